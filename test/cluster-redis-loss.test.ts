/**
 * Issue 14: what a cluster does when its Redis goes away and comes back empty. No node crashes;
 * a room goes on for the members on its home; what needs another node is refused, not hung;
 * once Redis is back, members whose room is elsewhere resume (and so see the room as it is),
 * and the room keeps its one home.
 */
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { after, before, describe, it } from 'node:test';
import type { Room } from '../src/room.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken } from '../src/server/mint.ts';
import { startRelay, type Relay } from '../relay/server.ts';
import { Sdk } from '../src/sdk.ts';
import { SdkError } from '../src/errors.ts';
import { nextEvent, until } from './helpers.ts';
import { startRedis, type TestRedis } from './redis.ts';
import { rawConnect } from './raw.ts';

const API_KEY = 'loss-key';
const SECRET = 'loss-secret-loss-secret-loss-secret';

describe('issue 14: Redis lost and back', () => {
  let redis: TestRedis;
  let nodes: Relay[];
  const rooms: Room[] = [];
  const token = (participantId: string, grant = {}, isViewer = false) => mintToken({ apiKey: API_KEY, secret: SECRET, roomId: 'r', participantId, grant, isViewer });
  const join = async (node: number, participantId: string, grant = {}, isViewer = false) => {
    const room = await Sdk.join({ url: nodes[node]!.url, token: token(participantId, grant, isViewer), timeoutMs: 15_000, reconnect: { maxTimeMs: 20_000, initialDelayMs: 100 } });
    rooms.push(room);
    return room;
  };

  before(async () => {
    redis = await startRedis();
    const keys = new KeyStore({ [API_KEY]: SECRET });
    nodes = await Promise.all([0, 1].map(() => startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys, redis: redis.url, media: null })));
  });
  after(async () => {
    for (const room of rooms) void room.leave().catch(() => undefined);
    await Promise.all(nodes.map((n) => n.close()));
    await redis.stop();
  });

  it('no crash, the home goes on, cross-node joins are refused; once back, remote members resume and the room keeps its home', async () => {
    const host = await join(0, 'host', { canPublishData: true });
    const local = await join(0, 'local');
    const remote = await join(1, 'remote', {}, true);
    await until(() => host.participantCount.total === 3, 3000, 'all in');
    const port = Number(new URL(redis.url).port);

    await redis.stop();
    // the home's own members are served as before
    const got: unknown[] = [];
    await local.pubsub.subscribe('chat', (m) => got.push(m.payload));
    await host.pubsub.publish('chat', 'still here');
    await until(() => got.length === 1, 3000, 'a message between members on the home');
    // a join that needs Redis (room r is homed on node 0, the join comes through node 1) fails, it does not hang
    const started = performance.now();
    const refused = await Sdk.join({ url: nodes[1]!.url, token: token('late'), timeoutMs: 15_000, reconnect: false }).then(
      () => null,
      (err: unknown) => err,
    );
    assert.ok(refused instanceof SdkError, `the join was refused: ${String(refused)}`);
    assert.equal(refused.code, 'INTERNAL_ERROR');
    assert.ok(performance.now() - started < 12_000, 'refused without waiting for the join timeout');
    for (const n of nodes) assert.equal((await fetch(n.url.replace('ws:', 'http:') + '/healthz')).status, 200, 'every node still answers');

    // Redis comes back, empty
    const reconnected = nextEvent(remote, 'reconnected', 15_000);
    redis = await startRedis(port);
    const { resumed } = await reconnected;
    assert.equal(resumed, true, 'the member on the other node resumed');
    // the home claimed its room again: a join through node 1 reaches it
    const late = await join(1, 'late2');
    await until(() => late.remoteParticipants.has('host') && late.remoteParticipants.has('local'), 5000, 'the late joiner sees the room');
    assert.equal(nodes.filter((n) => n.context.rooms.get('default', 'r')).length, 1, 'one home');
    await until(() => host.participantCount.total === 4, 3000, 'counts exact');
    // the room's record went with Redis: the home wrote it whole again when it claimed the room back
    const client = new Redis(redis.url);
    try {
      await until(async () => (await client.hkeys('tessera:room:default:r')).filter((f) => f.startsWith('m:')).sort().join() === 'm:host,m:late2,m:local,m:remote', 5000, 'the record whole again');
    } finally {
      client.disconnect();
    }
  });
});

describe('issue 11: a member its node gave up on is not left seated at the home', () => {
  let redis: TestRedis;
  let nodes: Relay[];
  const token = (participantId: string, isViewer = false) => mintToken({ apiKey: API_KEY, secret: SECRET, roomId: 'stall', participantId, grant: {}, isViewer });

  before(async () => {
    redis = await startRedis();
    const keys = new KeyStore({ [API_KEY]: SECRET });
    nodes = [];
    for (let i = 0; i < 2; i++) nodes.push(await startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys, redis: redis.url, media: null }));
  });
  after(async () => {
    redis.process.kill('SIGCONT');
    await Promise.all(nodes.map((n) => n.close()));
    await redis.stop();
  });

  it('joins through another node while Redis stalls past the call timeout: refused there, and not seated at the home when Redis wakes (they stayed for ever)', async () => {
    const host = await Sdk.join({ url: nodes[0]!.url, token: token('host'), reconnect: false });
    // node 1 learns the room's home first, so that the joins below call it straight away
    const warm = await Sdk.join({ url: nodes[1]!.url, token: token('warm', true), reconnect: false });
    await warm.leave();
    const home = () => nodes[0]!.context.rooms.get('default', 'stall');
    await until(() => home()?.size === 1, 3000, 'only the host');
    redis.process.kill('SIGSTOP');
    let answers: string[];
    try {
      answers = await Promise.all(
        Array.from({ length: 5 }, async (_, i) => {
          const c = await rawConnect(nodes[1]!.url);
          c.send({ type: 'join', v: 1, token: token(`s${i}`, true), participantId: `s${i}` });
          const f = await c.next((x) => x.type === 'joined' || x.type === 'join-error', 12_000).catch(() => ({ type: 'none' }) as Record<string, unknown>);
          c.ws.close();
          return String(f.type);
        }),
      );
    } finally {
      redis.process.kill('SIGCONT');
    }
    assert.deepEqual(answers, ['join-error', 'join-error', 'join-error', 'join-error', 'join-error'], 'refused at node 1 (its call to the home timed out)');
    // the home takes the joins once Redis wakes (their messages waited there), and is told they were given up
    await new Promise((r) => setTimeout(r, 2000));
    await until(() => home()?.size === 1, 8000, `the home holds only the host, not ${[...(home()?.members() ?? [])].map((m) => m.id).join(', ')}`);
    await host.leave();
    await until(() => home() === undefined, 5000, 'the room ends with its last real member');
  });
});
