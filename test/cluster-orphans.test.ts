/**
 * Issue 14 and 15: a room whose home died or shut down, and to which nobody came back, still
 * ends as rooms end: a live node restores it from its record, its members' grace periods run out
 * there, and the integrator's webhooks hear them leave and the room finish.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { KeyStore } from '../relay/token/keys.ts';
import { startRelay, type Relay } from '../relay/server.ts';
import { mintToken } from '../src/server/mint.ts';
import type { Room } from '../src/room.ts';
import { Sdk } from '../src/sdk.ts';
import { until } from './helpers.ts';
import { startRedis, type TestRedis } from './redis.ts';
import { spawnNode } from './spawn-node.ts';
import { keysDir, tearDown, webhookSink } from './cluster-fixture.ts';

const API_KEY = 'orphan-key';
const SECRET = 'orphan-secret-orphan-secret-orphan';
const GRACE_MS = 2000;

describe('issue 14 and 15: webhooks of a cluster, and a room nobody came back to after its home was lost', () => {
  let redis: TestRedis;
  let keys_: ReturnType<typeof keysDir>;
  let nodes: Relay[];
  const children: ChildProcess[] = [];
  const rooms: Room[] = [];
  const token = (roomId: string, participantId: string, isViewer = false) => mintToken({ apiKey: API_KEY, secret: SECRET, roomId, participantId, isViewer, grant: {} });
  const keys = () => new KeyStore({ [API_KEY]: SECRET });
  const sink = webhookSink<{ id: string; event: string; roomId: string; data: { participant?: { id: string } } }>();
  const { told } = sink;
  const settings = () => ({
    port: 0,
    host: '127.0.0.1',
    logLevel: 'silent' as const,
    keys: keys(),
    redis: redis.url,
    media: null,
    resumeGraceMs: GRACE_MS,
    ...sink.options(),
  });
  /** Members who know only `url`: when it is gone they do not come back. */
  const populate = async (url: string, roomId: string, reconnect: { maxTimeMs: number; initialDelayMs: number } | false = { maxTimeMs: 300, initialDelayMs: 50 }) => {
    for (const [id, isViewer] of [['ada', false], ['bo', false], ['vi', true]] as const) {
      rooms.push(await Sdk.join({ url, token: token(roomId, id, isViewer), reconnect }));
    }
  };
  /** What the webhooks said of the room, in order. */
  const story = (roomId: string) => told.filter((e) => e.roomId === roomId).map((e) => (e.data.participant ? `${e.event} ${e.data.participant.id}` : e.event));
  const ended = async (roomId: string) => {
    await until(() => story(roomId).includes('room-finished'), 20_000, `room-finished for ${roomId}`);
    // anything told late would be told by now
    await new Promise((r) => setTimeout(r, 500));
    const after = story(roomId);
    assert.deepEqual(after.slice(-3).slice(0, 2).sort(), ['participant-left ada', 'participant-left bo'], JSON.stringify(after));
    assert.equal(after.at(-1), 'room-finished', JSON.stringify(after));
    assert.equal(after.filter((e) => e === 'room-finished').length, 1, `finished once: ${JSON.stringify(told.filter((e) => e.roomId === roomId))}`);
    assert.equal(nodes.filter((n) => n.context.rooms.get('default', roomId)).length, 0, 'no node holds the room');
    const client = new Redis(redis.url);
    try {
      await until(async () => (await client.exists(`tessera:room:default:${roomId}`)) === 0, 3000, 'the record deleted');
      assert.equal(await client.zscore('tessera:recorded', JSON.stringify(['default', roomId])), null, 'and its index entry');
    } finally {
      client.disconnect();
    }
  };

  before(async () => {
    await sink.start();
    redis = await startRedis();
    keys_ = keysDir('orphans', API_KEY, SECRET);
    nodes = await Promise.all([0, 1].map(() => startRelay(settings())));
  });
  after(() => tearDown({ rooms, children, nodes, redis, sink, keys: keys_ }));

  it('a join through a node that is not the home is told once, by the home; so is its leave and the room\'s end', async () => {
    const first = await Sdk.join({ url: nodes[0]!.url, token: token('once', 'ada') });
    const second = await Sdk.join({ url: nodes[1]!.url, token: token('once', 'bo') });
    assert.ok(nodes[0]!.context.rooms.get('default', 'once') && !nodes[1]!.context.rooms.get('default', 'once'), 'homed on node 0');
    await second.leave();
    await first.leave();
    await until(() => story('once').includes('room-finished'), 5000, 'the room finished');
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(story('once'), ['room-started', 'participant-joined ada', 'participant-joined bo', 'participant-left bo', 'participant-left ada', 'room-finished']);
  });

  it('kill -9 of the home: a live node restores the room, its members leave at the end of their grace, the room finishes', async () => {
    const doomed = await spawnNode(redis.url, keys_.keysFile);
    children.push(doomed.child);
    await populate(doomed.url, 'crashed');
    // a visitor through each live node, gone before the home dies: both nodes remember where the room was
    for (const node of nodes) await (await Sdk.join({ url: node.url, token: token('crashed', 'visitor') })).leave();
    const client = new Redis(redis.url);
    await until(async () => (await client.hlen('tessera:room:default:crashed')) >= 4, 3000, 'the record written').finally(() => client.disconnect());
    const killedAt = Date.now();
    doomed.child.kill('SIGKILL');
    await ended('crashed');
    // the lease runs out (6 s), a sweep finds the room (3 s), the grace runs out (2 s)
    assert.ok(Date.now() - killedAt < 16_000, `finished ${Date.now() - killedAt} ms after the kill`);
  });

  it('a stalled home that wakes after its room was restored elsewhere and ended there does not bring it back', async () => {
    const stalled = await spawnNode(redis.url, keys_.keysFile);
    children.push(stalled.child);
    // members whose sockets outlive the stall (the SDK's heartbeat waits longer), and who do not
    // come back once the node drops them (those that came back would open the room anew, rightly)
    await populate(stalled.url, 'paused', false);
    const client = new Redis(redis.url);
    try {
      await until(async () => (await client.hlen('tessera:room:default:paused')) >= 4, 3000, 'the record written');
      stalled.child.kill('SIGSTOP');
      await ended('paused');
      await until(async () => (await client.get('tessera:home:default:paused')) === null, 5000, 'the lease given up where the room ended');
      stalled.child.kill('SIGCONT');
      // its next renewals find the lease gone and the room ended: it gives its copy up, writing nothing
      await new Promise((r) => setTimeout(r, 4500));
      assert.equal(await client.exists('tessera:room:default:paused'), 0, 'no record written again');
      assert.equal(await client.get('tessera:home:default:paused'), null, 'no lease claimed again');
      assert.equal(story('paused').filter((e) => e === 'room-finished').length, 1);
    } finally {
      client.disconnect();
      stalled.child.kill('SIGKILL');
    }
  });

  it('a home shut down: the room it left goes on elsewhere until its members are gone, then finishes', async () => {
    const leaving = await startRelay(settings());
    await populate(leaving.url, 'deployed');
    await until(() => story('deployed').includes('participant-joined bo'), 3000, 'the joins told');
    await leaving.close();
    // the node said nothing of its members as it closed: they leave where the room went on
    assert.ok(!story('deployed').some((e) => e.startsWith('participant-left') || e === 'room-finished'));
    await ended('deployed');
    assert.deepEqual(story('deployed'), ['room-started', 'participant-joined ada', 'participant-joined bo', 'participant-left ada', 'participant-left bo', 'room-finished']);
  });
});
