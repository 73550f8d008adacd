/**
 * Deleting a recording through the server API on a cluster: the files are on the node that
 * wrote them, and the call reaches that node through any other, whether or not the room is
 * still open (and wherever it lives now); another project's recording is not found, whatever
 * the state of its node; a deleted recording leaves nothing in Redis. Two nodes on a real
 * Redis, real ffmpeg.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { clusterKey } from '../relay/cluster/bus.ts';
import { placeKey } from '../relay/cluster/node-files.ts';
import { startRelay, type Relay } from '../relay/server.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken } from '../src/server/mint.ts';
import { RoomService } from '../src/server/room-service.ts';
import { Sdk } from '../src/sdk.ts';
import { rejectsWith, until } from './helpers.ts';
import { startRedis, type TestRedis } from './redis.ts';

const API_KEY = 'delete-key';
const SECRET = 'delete-secret-delete-secret-0123';
const BETA_KEY = 'beta-key';
const BETA_SECRET = 'beta-secret-beta-secret-01234567';

describe('deleting a recording through any node of a cluster', () => {
  let redis: TestRedis;
  let r: Redis;
  let nodes: Relay[];
  const dir = mkdtempSync(join(tmpdir(), 'tessera-cluster-delete-'));
  const service = (node: number) => new RoomService({ url: nodes[node]!.url, apiKey: API_KEY, secret: SECRET });
  const beta = (node: number) => new RoomService({ url: nodes[node]!.url, apiKey: BETA_KEY, secret: BETA_SECRET });
  /** The Redis record naming the node that wrote recording `id` of acme's room. */
  const writerRecord = (roomId: string, id: string) => placeKey({ kind: 'recording', project: 'acme', roomId, id });

  /** A finished recording of acme's `roomId`, written at node 0, which node 1 finds (Redis names its writer). */
  async function recordAtNode0(roomId: string): Promise<string> {
    const token = mintToken({ apiKey: API_KEY, secret: SECRET, roomId, participantId: 'host', grant: { canRecord: true } });
    const host = await Sdk.join({ url: nodes[0]!.url, token });
    const id = (await host.recording.start()).info!.recording!;
    await host.recording.stop();
    await host.leave();
    const viaNode1 = `${nodes[1]!.url.replace(/^ws/, 'http')}/recordings/${id}/timeline.jsonl`;
    await until(async () => (await fetch(viaNode1, { headers: { authorization: `Bearer ${token}` } })).status === 200, 5000, 'node 1 serves the recording node 0 wrote');
    return id;
  }

  before(async () => {
    redis = await startRedis();
    r = new Redis(redis.url);
    nodes = await Promise.all(
      [0, 1].map((i) => {
        const keys = new KeyStore();
        keys.replaceProjects({ acme: { keys: { [API_KEY]: SECRET }, revoked: [] }, beta: { keys: { [BETA_KEY]: BETA_SECRET }, revoked: [] } });
        return startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys, redis: redis.url, media: null, recordingsDir: join(dir, `rec-${i}`), hlsDir: join(dir, `hls-${i}`), composite: { width: 320, height: 180, fps: 10, videoKbps: 100 } });
      }),
    );
  });
  after(async () => {
    try {
      r.disconnect();
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
    await until(async () => (await r.get(clusterKey('home', 'acme', 'studio'))) === null, 15_000, "node 0 gave the room's lease up");
    // the room opens again, at the other node: the recording stays where it was written
    const later = await Sdk.join({ url: nodes[1]!.url, token: mintToken({ apiKey: API_KEY, secret: SECRET, roomId: 'studio', participantId: 'later', grant: {} }) });
    assert.ok(nodes[1]!.context.rooms.get('acme', 'studio'), 'the room lives at node 1 now');
    await service(1).deleteRecording('studio', id);
    assert.equal(existsSync(files), false, "the writer's files are gone");
    assert.equal((await rejectsWith(service(1).deleteRecording('studio', id), 'NOT_FOUND')).reason, 'unknown-recording');
    assert.equal((await rejectsWith(service(0).deleteRecording('studio', id), 'NOT_FOUND')).reason, 'unknown-recording');
    await later.leave();
  });

  it('a deleted recording leaves no Redis record naming its writer: deleted through another node, or at the writer itself', async () => {
    const passed = await recordAtNode0('archive');
    assert.equal(await r.exists(writerRecord('archive', passed)), 1, 'Redis names the writer');
    await service(1).deleteRecording('archive', passed);
    assert.equal(await r.exists(writerRecord('archive', passed)), 0, 'deleted at the writer, asked through node 1');
    const here = await recordAtNode0('archive');
    assert.equal(await r.exists(writerRecord('archive', here)), 1, 'Redis names the writer');
    await service(0).deleteRecording('archive', here);
    assert.equal(await r.exists(writerRecord('archive', here)), 0, 'deleted at the writer, asked there');
  });

  it("another project's recording id (or another room's) answers exactly as an id nobody made, also while the node that wrote it is down", async () => {
    const id = await recordAtNode0('booth');
    const unknown = `${id.slice(0, -8)}zzzzzzzz`;
    /** A refusal of a deletion, the id it names written `<id>`: what it tells of anything but the id. */
    const refusal = async (s: RoomService, roomId: string, recording: string) => {
      const e = await rejectsWith(s.deleteRecording(roomId, recording), 'NOT_FOUND');
      return { code: e.code, kind: e.kind, reason: e.reason, message: e.message.replace(recording, '<id>') };
    };
    for (const node of [0, 1]) assert.deepEqual(await refusal(beta(node), 'booth', id), await refusal(beta(node), 'booth', unknown), `node ${node}, the writer up`);
    await nodes[0]!.close();
    assert.equal((await rejectsWith(service(1).deleteRecording('booth', id), 'INTERNAL_ERROR')).reason, 'unreachable', 'its own project is told its node is down');
    assert.ok(existsSync(join(dir, 'rec-0', 'acme', 'booth', id)), 'and nothing was deleted');
    assert.deepEqual(await refusal(beta(1), 'booth', id), await refusal(beta(1), 'booth', unknown), 'another project: not found, as an id nobody made');
    assert.deepEqual(await refusal(service(1), 'elsewhere', id), await refusal(service(1), 'elsewhere', unknown), 'another room of the project: not found too');
  });
});
