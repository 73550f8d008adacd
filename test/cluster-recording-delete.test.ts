/**
 * Deleting a recording through the server API on a cluster: the files are on the node that
 * wrote them, and the call reaches that node through any other, whether or not the room is
 * still open (and wherever it lives now). Two nodes on a real Redis, real ffmpeg.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { clusterKey } from '../relay/cluster/bus.ts';
import { startRelay, type Relay } from '../relay/server.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken } from '../src/server/mint.ts';
import { RoomService } from '../src/server/room-service.ts';
import { Sdk } from '../src/sdk.ts';
import { rejectsWith, until } from './helpers.ts';
import { startRedis, type TestRedis } from './redis.ts';

const API_KEY = 'delete-key';
const SECRET = 'delete-secret-delete-secret-0123';

describe('deleting a recording through any node of a cluster', () => {
  let redis: TestRedis;
  let nodes: Relay[];
  const dir = mkdtempSync(join(tmpdir(), 'tessera-cluster-delete-'));
  const service = (node: number) => new RoomService({ url: nodes[node]!.url, apiKey: API_KEY, secret: SECRET });

  before(async () => {
    redis = await startRedis();
    nodes = await Promise.all(
      [0, 1].map((i) => {
        const keys = new KeyStore();
        keys.replaceProjects({ acme: { keys: { [API_KEY]: SECRET }, revoked: [] } });
        return startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys, redis: redis.url, media: null, recordingsDir: join(dir, `rec-${i}`), hlsDir: join(dir, `hls-${i}`), composite: { width: 320, height: 180, fps: 10, videoKbps: 100 } });
      }),
    );
  });
  after(async () => {
    try {
      await Promise.all(nodes.map((n) => n.close()));
      await redis.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reaches the node that wrote it: refused while it is written, deleted once finished, also after the room moved to another node', async () => {
    const host = await Sdk.join({ url: nodes[0]!.url, token: mintToken({ apiKey: API_KEY, secret: SECRET, roomId: 'studio', participantId: 'host', grant: { canRecord: true } }) });
    const status = await host.recording.start();
    const id = status.info!.recording!;
    const files = join(dir, 'rec-0', 'acme', 'studio', id);
    assert.ok(existsSync(files));
    assert.equal((await rejectsWith(service(1).deleteRecording('studio', id), 'INVALID_STATE')).reason, 'recording-active', 'refused at the writer, asked through the other node');
    await host.recording.stop();
    await host.leave();
    await until(() => !nodes[0]!.context.rooms.get('acme', 'studio'), 5000, 'the room closed');
    const r = new Redis(redis.url);
    try {
      await until(async () => (await r.get(clusterKey('home', 'acme', 'studio'))) === null, 15_000, "node 0 gave the room's lease up");
    } finally {
      r.disconnect();
    }
    // the room opens again, at the other node: the recording stays where it was written
    const later = await Sdk.join({ url: nodes[1]!.url, token: mintToken({ apiKey: API_KEY, secret: SECRET, roomId: 'studio', participantId: 'later', grant: {} }) });
    assert.ok(nodes[1]!.context.rooms.get('acme', 'studio'), 'the room lives at node 1 now');
    await service(1).deleteRecording('studio', id);
    assert.equal(existsSync(files), false, "the writer's files are gone");
    assert.equal((await rejectsWith(service(1).deleteRecording('studio', id), 'NOT_FOUND')).reason, 'unknown-recording');
    assert.equal((await rejectsWith(service(0).deleteRecording('studio', id), 'NOT_FOUND')).reason, 'unknown-recording');
    await later.leave();
  });
});
