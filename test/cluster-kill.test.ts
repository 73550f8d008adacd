/**
 * Issue 14: a relay node killed with SIGKILL while 100 clients are connected to it. Its room is
 * homed on another node; the clients (given every node's URL) resume on a third, and the room
 * sees no leave and no join.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import type { Room } from '../src/room.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken } from '../src/server/mint.ts';
import { startRelay, type Relay } from '../relay/server.ts';
import { Sdk } from '../src/sdk.ts';
import { until } from './helpers.ts';
import { startRedis, type TestRedis } from './redis.ts';
import { spawnNode } from './spawn-node.ts';
import { keysDir } from './cluster-fixture.ts';

const API_KEY = 'kill-key';
const SECRET = 'kill-secret-kill-secret-kill-secret';
const CLIENTS = 100;

describe('issue 14: a node is killed', () => {
  let redis: TestRedis;
  let home: Relay;
  let keys_: ReturnType<typeof keysDir>;
  let doomed: { url: string; child: ChildProcess };
  let spare: { url: string; child: ChildProcess };
  const rooms: Room[] = [];

  before(async () => {
    redis = await startRedis();
    keys_ = keysDir('kill', API_KEY, SECRET);
    home = await startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys: new KeyStore({ [API_KEY]: SECRET }), redis: redis.url, media: null });
    [doomed, spare] = await Promise.all([spawnNode(redis.url, keys_.keysFile), spawnNode(redis.url, keys_.keysFile)]);
  });
  after(async () => {
    try {
      for (const room of rooms) void room.leave().catch(() => undefined);
      spare?.child.kill('SIGKILL');
      doomed?.child.kill('SIGKILL');
      await home?.close();
      await redis?.stop();
    } finally {
      keys_?.remove();
    }
  });

  it(`kill -9 of a node with ${CLIENTS} clients: all resume on another node within 5 s, the room sees no leave and no join, counts exact`, async () => {
    const token = (participantId: string, isViewer: boolean) => mintToken({ apiKey: API_KEY, secret: SECRET, roomId: 'survive', participantId, isViewer, grant: {} });
    // the watcher opens the room on the home node
    const watcher = await Sdk.join({ url: home.url, token: token('watcher', false) });
    rooms.push(watcher);
    const events: string[] = [];
    watcher.on('participant-joined', ({ participant }) => events.push(`joined ${participant.id}`));
    watcher.on('participant-left', ({ participant }) => events.push(`left ${participant.id}`));
    const clients = await Promise.all(
      Array.from({ length: CLIENTS }, async (_, i) => {
        const room = await Sdk.join({ url: [doomed.url, spare.url], token: token(`c${i}`, i >= 20), reconnect: { maxTimeMs: 15_000, initialDelayMs: 100 } });
        rooms.push(room);
        return room;
      }),
    );
    await until(() => watcher.participantCount.speaker === 21 && watcher.participantCount.viewer === 80, 5000, 'everyone in');
    const resumed = clients.map(
      (room) =>
        new Promise<{ resumed: boolean; at: number }>((resolve) => room.on('reconnected', ({ resumed }) => resolve({ resumed, at: performance.now() }))),
    );
    assert.equal(events.length, 20, 'the 20 speakers joined');
    events.length = 0;
    const killedAt = performance.now();
    doomed.child.kill('SIGKILL');
    const outcomes = await Promise.all(resumed);
    const slowest = Math.max(...outcomes.map((o) => o.at - killedAt));
    assert.equal(outcomes.filter((o) => o.resumed).length, CLIENTS, 'every session went on (resumed, not joined anew)');
    assert.ok(slowest < 5000, `the last client was back after ${Math.round(slowest)} ms`);
    console.log(`# ${CLIENTS} clients resumed on another node; the last ${Math.round(slowest)} ms after the kill`);
    // the doomed node's seats are noticed gone too: nothing is left holding a dead link
    await new Promise((r) => setTimeout(r, 2000));
    assert.deepEqual(events, [], 'the room saw no leave and no join');
    assert.deepEqual(watcher.participantCount, { speaker: 21, viewer: 80, total: 101 });
    assert.equal(home.context.rooms.get('default', 'survive')?.size, 101);
    // and they work: a client that resumed is answered by the room
    const page = await clients[50]!.getParticipants({ tier: 'viewer', limit: 100 });
    assert.equal(page.participants.length, 80);
  });
});
