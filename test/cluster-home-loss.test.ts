/**
 * Issue 14: the node a room lives on (its home) is lost, killed with SIGKILL or shut down. The
 * room's record in Redis lets the next node restore it: every client resumes its session there
 * (on stage or in the audience, connected to the lost node or to another), and the room sees no
 * leave and no join; its bans, pages and pubsub go on.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import type { Room } from '../src/room.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken } from '../src/server/mint.ts';
import { startRelay, type Relay } from '../relay/server.ts';
import { Sdk } from '../src/sdk.ts';
import { nextEvent, until } from './helpers.ts';
import { startRedis, type TestRedis } from './redis.ts';
import { spawnNode } from './spawn-node.ts';
import { keysDir, tearDown, webhookSink } from './cluster-fixture.ts';
import { rawConnect } from './raw.ts';
import { Redis } from 'ioredis';
import { PROTOCOL_VERSION } from '../src/protocol/messages.ts';
import { RoomRecords } from '../relay/cluster/room-record.ts';

const API_KEY = 'home-key';
const SECRET = 'home-secret-home-secret-home-secret';
const ON_HOME = 30;
const ELSEWHERE = 30;

describe("issue 14: a room's home is lost", () => {
  let redis: TestRedis;
  let keys_: ReturnType<typeof keysDir>;
  let nodes: Relay[];
  const children: ChildProcess[] = [];
  const rooms: Room[] = [];
  const token = (roomId: string, participantId: string, isViewer: boolean, grant = {}) => mintToken({ apiKey: API_KEY, secret: SECRET, roomId, participantId, isViewer, grant });
  const keys = () => new KeyStore({ [API_KEY]: SECRET });
  /** A resume frame with `credential` on a raw socket to `url`: the reason it was refused, if it was. */
  const resumeAt = async (url: string, credential: string) => {
    const raw = await rawConnect(url);
    raw.send({ type: 'resume', v: PROTOCOL_VERSION, credential });
    const answer = await raw.next((f) => f.type === 'join-error' || f.type === 'joined');
    raw.ws.close();
    return (answer.error as { reason?: string } | undefined)?.reason;
  };

  /** What the nodes' webhooks told, as a receiver of the integrator got it. */
  const sink = webhookSink<{ event: string; roomId: string; createdAt: number }>();
  const { told } = sink;
  const hooks = () => sink.options();

  before(async () => {
    await sink.start();
    redis = await startRedis();
    keys_ = keysDir('home', API_KEY, SECRET);
    nodes = await Promise.all([0, 1].map(() => startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys: keys(), redis: redis.url, media: null, ...hooks() })));
  });
  after(() => tearDown({ rooms, children, nodes, redis, sink, keys: keys_ }));

  /** The room opened on `homeUrl`; members on it and on node 0; a watcher on node 1. */
  async function populate(roomId: string, homeUrl: string) {
    const urls = (first: string) => [first, nodes[0]!.url, nodes[1]!.url];
    const reconnect = { maxTimeMs: 15_000, initialDelayMs: 100 };
    const opener = await Sdk.join({ url: urls(homeUrl), token: token(roomId, 'opener', false, { canModerate: true, canPublishData: true, canWhiteboard: true }), reconnect });
    rooms.push(opener);
    const members = [opener];
    for (let i = 0; i < ON_HOME + ELSEWHERE; i++) {
      const room = await Sdk.join({ url: urls(i < ON_HOME ? homeUrl : nodes[0]!.url), token: token(roomId, `m${String(i).padStart(2, '0')}`, i % 3 !== 0, { canSubscribeData: true }), reconnect });
      rooms.push(room);
      members.push(room);
    }
    const watcher = await Sdk.join({ url: [nodes[1]!.url, nodes[0]!.url], token: token(roomId, 'watcher', false, { canSubscribeData: true }), reconnect });
    rooms.push(watcher);
    members.push(watcher);
    const total = ON_HOME + ELSEWHERE + 2;
    const viewers = Math.floor((ON_HOME + ELSEWHERE - 1) / 3) * 2 + ((ON_HOME + ELSEWHERE - 1) % 3 >= 1 ? 1 : 0) + ((ON_HOME + ELSEWHERE - 1) % 3 >= 2 ? 1 : 0);
    await until(() => watcher.participantCount.total === total, 5000, 'everyone in');
    assert.equal(watcher.participantCount.viewer, viewers);
    const events: string[] = [];
    watcher.on('participant-joined', ({ participant }) => events.push(`joined ${participant.id}`));
    watcher.on('participant-left', ({ participant }) => events.push(`left ${participant.id}`));
    // the stage as it was is told to a new listener: what counts is what comes after
    await until(() => events.length === watcher.remoteParticipants.size, 1000, 'the stage told');
    events.length = 0;
    const back = members.map((room) => new Promise<{ resumed: boolean; at: number }>((resolve) => room.on('reconnected', ({ resumed }) => resolve({ resumed, at: performance.now() }))));
    // an output runs at the home, and history is kept there: both go on at the next one
    await opener.whiteboard.start();
    await opener.pubsub.publish('chat', { text: 'before' }, { persist: true });
    await opener.pubsub.publish('chat', { text: 'to m01 only' }, { persist: true, to: ['m01'] });
    // written to the room's record within the turn (a crash a moment after a start may lose it)
    const client = new Redis(redis.url);
    const recorded = async (field: string) => (await client.hexists(`tessera:room:default:${roomId}`, field)) === 1;
    await until(async () => (await recorded('o:whiteboard')) && (await recorded('h:2')), 2000, 'the output and the history recorded').finally(() => client.disconnect());
    const counts = { ...watcher.participantCount };
    const stage = [...watcher.remoteParticipants.keys()];
    return { opener, watcher, members, events, back, counts, stage };
  }

  async function survived(roomId: string, lostAt: number, room: Awaited<ReturnType<typeof populate>>) {
    const outcomes = await Promise.all(room.back);
    const slowest = Math.max(...outcomes.map((o) => o.at - lostAt));
    assert.equal(outcomes.filter((o) => o.resumed).length, room.members.length, 'every session went on (resumed, not joined anew)');
    assert.ok(slowest < 5000, `the last client was back after ${Math.round(slowest)} ms`);
    await new Promise((r) => setTimeout(r, 1000));
    assert.deepEqual(room.events, [], 'the room saw no leave and no join');
    assert.deepEqual(room.watcher.participantCount, room.counts);
    assert.deepEqual([...room.watcher.remoteParticipants.keys()], room.stage);
    const homes = nodes.filter((n) => n.context.rooms.get('default', roomId));
    assert.equal(homes.length, 1, 'one live node holds the room');
    assert.equal(homes[0]!.context.rooms.get('default', roomId)!.size, room.members.length);
    const restored = homes[0]!.context.rooms.get('default', roomId)!;
    await until(() => restored.outputs.statuses().whiteboard.state === 'active', 5000, 'the whiteboard started again');
    assert.equal(restored.outputs.statuses().whiteboard.by, 'opener');
    await until(() => room.watcher.whiteboard.status.state === 'active', 5000, 'the watcher sees the whiteboard active');
    // the join order survived: the audience pages as before
    const page = await room.watcher.getParticipants({ tier: 'viewer', limit: 1000 });
    assert.deepEqual(page.participants.map((p) => p.id), page.participants.map((p) => p.id).sort());
    assert.equal(page.participants.length, room.counts.viewer);
    // the history kept at the lost home is there, as each may read it
    assert.deepEqual((await room.members[2]!.pubsub.getHistory('chat')).map((m) => m.payload), [{ text: 'before' }, { text: 'to m01 only' }]);
    assert.deepEqual((await room.members[3]!.pubsub.getHistory('chat')).map((m) => m.payload), [{ text: 'before' }]);
    // and the room works: a message reaches a member that was connected to the lost node
    const got: unknown[] = [];
    await room.members[1]!.pubsub.subscribe('after', (m) => void got.push(m.payload));
    await room.opener.pubsub.publish('after', 'still here');
    await until(() => got.length === 1, 3000, 'a message after the loss');
    return slowest;
  }

  it(`kill -9 of the home with ${ON_HOME} clients on it and ${ELSEWHERE} on another node: all resume within 5 s, no leave, no join`, async () => {
    const doomed = await spawnNode(redis.url, keys_.keysFile);
    children.push(doomed.child);
    const room = await populate('crash', doomed.url);
    assert.ok(!nodes.some((n) => n.context.rooms.get('default', 'crash')), 'the room lives on the doomed node');
    const killedAt = performance.now();
    doomed.child.kill('SIGKILL');
    const slowest = await survived('crash', killedAt, room);
    console.log(`# home killed: ${room.members.length} clients resumed; the last ${Math.round(slowest)} ms after the kill`);
  });

  it('a home shut down (a rolling deploy) hands its rooms on the same way', async () => {
    const leaving = await startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys: keys(), redis: redis.url, media: null, ...hooks() });
    const room = await populate('deploy', leaving.url);
    assert.ok(leaving.context.rooms.get('default', 'deploy'), 'the room lives on the leaving node');
    const closedAt = performance.now();
    const closedWhen = Date.now();
    await until(() => told.some((e) => e.roomId === 'deploy' && e.event === 'output-changed'), 5000, 'the webhooks of the room so far');
    await leaving.close();
    const slowest = await survived('deploy', closedAt, room);
    // the integrator's webhooks saw the room go on: nobody left or joined, it neither finished nor started again
    await new Promise((r) => setTimeout(r, 500));
    const after = told.filter((e) => e.roomId === 'deploy' && e.createdAt >= closedWhen).map((e) => e.event);
    assert.deepEqual(after.filter((e) => e !== 'output-changed'), [], `webhooks after the close: ${after.join(', ')}`);
    assert.ok(told.some((e) => e.roomId === 'deploy' && e.event === 'room-started'), 'the receiver heard of the room');
    console.log(`# home shut down: ${room.members.length} clients resumed; the last ${Math.round(slowest)} ms after the close began`);
  });

  it('a pinned identity stays reserved when the room moves: an unpinned token takes it at the new home no more than at the old, nor reads what was sent to it', async () => {
    const leaving = await startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys: keys(), redis: redis.url, media: null, ...hooks() });
    const reconnect = { maxTimeMs: 15_000, initialDelayMs: 100 };
    const sender = await Sdk.join({ url: leaving.url, token: token('pinned-move', 'ceo', false, { canPublishData: true }) });
    const alice = await Sdk.join({ url: leaving.url, token: token('pinned-move', 'alice', false, { canSubscribeData: true }) });
    await sender.pubsub.publish('chat', 'for alice only', { to: ['alice'], persist: true });
    await alice.leave();
    const keeper = await Sdk.join({ url: [leaving.url, nodes[0]!.url], token: token('pinned-move', 'keeper', false), reconnect });
    rooms.push(keeper);
    await sender.leave();
    const unpinned = mintToken({ apiKey: API_KEY, secret: SECRET, grant: { canSubscribeData: true } });
    const refusedAt = async (url: string) => {
      try {
        const taken = await Sdk.join({ url, token: unpinned, roomId: 'pinned-move', participantId: 'alice' });
        const history = await taken.pubsub.getHistory('chat');
        await taken.leave();
        return `joined, read ${JSON.stringify(history.map((m) => m.payload))}`;
      } catch (err) {
        return (err as { reason?: string }).reason ?? String(err);
      }
    };
    assert.equal(await refusedAt(nodes[1]!.url), 'identity-reserved', 'before the move');
    const resumed = new Promise<boolean>((resolve) => keeper.once('reconnected', ({ resumed: r }) => resolve(r)));
    await leaving.close();
    assert.equal(await resumed, true, 'the room moved with its member');
    await until(() => nodes[0]!.context.rooms.get('default', 'pinned-move') !== undefined, 5000, 'the room restored at node 0');
    // at its new home, which never saw alice: what reserves the id there is the room's record
    assert.equal(await refusedAt(nodes[0]!.url), 'identity-reserved', 'after the move');
    // alice herself, pinned, still reads what was sent to her
    const back = await Sdk.join({ url: nodes[0]!.url, token: token('pinned-move', 'alice', false, { canSubscribeData: true }) });
    assert.deepEqual((await back.pubsub.getHistory('chat')).map((m) => m.payload), ['for alice only']);
    await back.leave();
  });

  it('a room restored where its reservations outgrow the budget leaves in its record only the reservations it holds (the others stayed, and each next home reserved them again in place of others)', async () => {
    // the leaving node keeps every reservation; the next home holds four ids of this length
    const leaving = await startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys: keys(), redis: redis.url, media: null });
    const narrow = await startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys: keys(), redis: redis.url, media: null, reservedIdsBytesPerRoom: 4 * 402 });
    try {
      const keeper = await Sdk.join({ url: [leaving.url, narrow.url], token: token('ids-move', 'k0', false), reconnect: { maxTimeMs: 15_000, initialDelayMs: 100 } });
      rooms.push(keeper);
      for (let i = 0; i < 6; i++) await (await Sdk.join({ url: leaving.url, token: token('ids-move', `g${i}`, false) })).leave();
      const client = new Redis(redis.url);
      const reservedInRecord = async () => (await client.hkeys(RoomRecords.key('default', 'ids-move'))).filter((f) => f.startsWith('p:')).map((f) => f.slice(2)).sort();
      try {
        await until(async () => (await reservedInRecord()).length === 7, 5000, 'every reservation in the record');
        const resumed = new Promise<boolean>((resolve) => keeper.once('reconnected', ({ resumed: r }) => resolve(r)));
        await leaving.close();
        assert.equal(await resumed, true, 'the room moved with its member');
        await until(() => narrow.context.rooms.get('default', 'ids-move') !== undefined, 5000, 'the room restored');
        const held = [...narrow.context.rooms.get('default', 'ids-move')!.pinnedIdentities()].sort();
        assert.equal(held.length, 4, 'as many as the budget holds');
        assert.ok(held.includes('k0'), 'the member in the room keeps its own');
        await until(async () => (await reservedInRecord()).join() === held.join(), 5000, `the record's reservations are the room's (${held.join()})`);
      } finally {
        client.disconnect();
      }
    } finally {
      await narrow.close();
      await leaving.close().catch(() => undefined);
    }
  });

  it('a forged credential claims nothing and asks nothing: no lease, no record read, no other node asked, resume-unknown (how long it took told whether a room existed, in any project)', async () => {
    const client = new Redis(redis.url);
    const calls = async (command: string) => Number((await client.info('commandstats')).match(new RegExp(`cmdstat_${command}:calls=(\\d+)`))?.[1] ?? 0);
    const open = await Sdk.join({ url: nodes[1]!.url, token: token('forge-target', 'host', false) });
    rooms.push(open);
    try {
      const b64 = (text: string) => Buffer.from(text).toString('base64url');
      const secret = 'x'.repeat(32);
      const tag = 'A'.repeat(22);
      // node 1's id, from where the nodes say their HTTP sides are
      const liveNode = Object.entries(await client.hgetall('tessera:http')).find(([, base]) => base.endsWith(`:${nodes[1]!.port}`))?.[0];
      assert.ok(liveNode, 'node 1 is listed');
      const before = { exists: await calls('exists'), publish: await calls('publish'), set: await calls('set') };
      const forged: Array<[string, string, string]> = [
        ['deadbeef0000', 'default', 'never-opened'],
        ['deadbeef0000', 'another-project', 'crash'],
        // a room that lives, on a node that is gone, and on a node that lives
        ['deadbeef0000', 'default', 'forge-target'],
        ...Array.from({ length: 10 }, () => [liveNode, 'default', 'forge-target'] as [string, string, string]),
      ];
      for (const [node, project, roomId] of forged) {
        assert.equal(await resumeAt(nodes[0]!.url, `${node}.${b64(project)}.${b64(roomId)}.${secret}.${tag}`), 'resume-unknown');
        assert.equal(await client.exists(`tessera:home:${encodeURIComponent(project)}:${encodeURIComponent(roomId)}`), roomId === 'forge-target' ? 1 : 0);
      }
      // a real credential with its tag changed, and one without a tag
      const credential = (open as unknown as { connection: { credential: string } }).connection.credential;
      assert.equal(credential.split('.').length, 5, credential);
      assert.equal(await resumeAt(nodes[0]!.url, credential.slice(0, -2) + (credential.endsWith('AA') ? 'BB' : 'AA')), 'resume-unknown');
      assert.equal(await resumeAt(nodes[0]!.url, credential.slice(0, credential.lastIndexOf('.'))), 'resume-unknown');
      const after = { exists: await calls('exists'), publish: await calls('publish'), set: await calls('set') };
      // (the test's own EXISTS calls above: one for each forged credential)
      assert.equal(after.exists - before.exists, forged.length, 'no record was looked up for a forged credential');
      assert.ok(after.publish - before.publish < 5, `other nodes were asked: ${after.publish - before.publish} messages`);
      assert.ok(open.connected);
    } finally {
      client.disconnect();
    }
  });

  it('a room id of 128 characters of 3 bytes each resumes on a cluster (its credential names it: 128 characters were the most a resume frame took)', async () => {
    const roomId = '\u20ac'.repeat(128);
    const room = await Sdk.join({ url: [nodes[0]!.url, nodes[1]!.url], token: token(roomId, 'long', false), reconnect: { maxTimeMs: 5000, initialDelayMs: 50 } });
    rooms.push(room);
    const credential = (room as unknown as { connection: { credential: string } }).connection.credential;
    assert.ok(credential.length > 500, `${credential.length} characters`);
    const back = nextEvent(room, 'reconnected', 10_000);
    (room as unknown as { connection: { ws: { terminate(): void } } }).connection.ws.terminate();
    assert.deepEqual(await back, { resumed: true });
  });

  it("a seat held on this node resumes whatever key signed its credential (Redis restarted empty twice); a credential no node made is still refused", async () => {
    const client = new Redis(redis.url);
    try {
      const room = await Sdk.join({ url: nodes[0]!.url, token: token('keys-turn', 'stay', false), reconnect: { maxTimeMs: 5000, initialDelayMs: 50 } });
      rooms.push(room);
      const forged = `x.${Buffer.from('default').toString('base64url')}.${Buffer.from('keys-turn').toString('base64url')}.${'y'.repeat(32)}.${'A'.repeat(22)}`;
      // two new keys, each taken up by node 0 (a credential it cannot verify makes it read the key again, once a second)
      for (const key of ['first-new-key-first-new-key-first', 'second-new-key-second-new-key-sec']) {
        await client.set('tessera:peer-key', Buffer.from(key).toString('base64url'));
        await new Promise((r) => setTimeout(r, 1100));
        assert.equal(await resumeAt(nodes[0]!.url, forged), 'resume-unknown');
      }
      const back = nextEvent(room, 'reconnected', 10_000);
      (room as unknown as { connection: { ws: { terminate(): void } } }).connection.ws.terminate();
      assert.deepEqual(await back, { resumed: true });
    } finally {
      client.disconnect();
    }
  });

  it('a home that stalls (SIGSTOP) is judged dead and its room restored elsewhere; when it wakes it gives the room up and its clients resume there', async () => {
    const stalled = await spawnNode(redis.url, keys_.keysFile);
    children.push(stalled.child);
    const room = await populate('stall', stalled.url);
    const stoppedAt = performance.now();
    stalled.child.kill('SIGSTOP');
    // the others find its heartbeat gone and restore the room; its own clients hang on a silent socket meanwhile
    await until(() => nodes.some((n) => n.context.rooms.get('default', 'stall')), 10_000, 'the room restored on a live node');
    await new Promise((r) => setTimeout(r, 1000));
    stalled.child.kill('SIGCONT');
    // at its next renewal it finds the lease taken: it drops its copy, and its clients resume where the room is
    const outcomes = await Promise.all(room.back);
    assert.equal(outcomes.filter((o) => o.resumed).length, room.members.length, 'every session went on');
    console.log(`# home stalled: ${room.members.length} clients resumed; the last ${Math.round(Math.max(...outcomes.map((o) => o.at - stoppedAt)))} ms after the stop`);
    await new Promise((r) => setTimeout(r, 1000));
    assert.deepEqual(room.events, [], 'the room saw no leave and no join');
    assert.deepEqual(room.watcher.participantCount, room.counts);
    const homes = nodes.filter((n) => n.context.rooms.get('default', 'stall'));
    assert.equal(homes.length, 1);
    assert.equal(homes[0]!.context.rooms.get('default', 'stall')!.size, room.members.length);
    // the record is the new home's: the node that woke wrote nothing over it
    const client = new Redis(redis.url);
    try {
      assert.equal((await client.hkeys('tessera:room:default:stall')).filter((f) => f.startsWith('m:')).length, room.members.length);
    } finally {
      client.disconnect();
    }
  });
});
