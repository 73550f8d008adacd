/**
 * Issue 14: relay nodes sharing rooms through a real Redis (`redis-server` on a free port, no
 * persistence). Three nodes; members of one room spread over them see one room.
 */
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { after, before, describe, it } from 'node:test';
import type { Room } from '../src/room.ts';
import { KeyStore } from '../relay/token/keys.ts';
import { mintToken, type MintOptions } from '../src/server/mint.ts';
import { startRelay, type Relay } from '../relay/server.ts';
import { Sdk } from '../src/sdk.ts';
import { nextEvent, until } from './helpers.ts';
import { startRedis, type TestRedis } from './redis.ts';
import { rawConnect, rawJoin } from './raw.ts';

const API_KEY = 'cluster-key';
const SECRET = 'cluster-secret-cluster-secret-32b';

describe('issue 14: three relay nodes on one Redis', () => {
  let redis: TestRedis;
  let nodes: Relay[];
  const rooms: Room[] = [];
  const token = (claims: Omit<MintOptions, 'apiKey' | 'secret'>) => mintToken({ apiKey: API_KEY, secret: SECRET, ...claims });
  const join = async (node: number, options: Omit<Parameters<typeof Sdk.join>[0], 'url'>) => {
    const room = await Sdk.join({ url: nodes[node]!.url, ...options });
    rooms.push(room);
    return room;
  };

  before(async () => {
    redis = await startRedis();
    const keys = new KeyStore({ [API_KEY]: SECRET });
    nodes = await Promise.all([0, 1, 2].map(() => startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys, redis: redis.url, media: null })));
  });
  after(async () => {
    for (const room of rooms) void room.leave().catch(() => undefined);
    await Promise.all(nodes.map((n) => n.close()));
    await redis.stop();
  });

  it('speakers and viewers on three nodes see one stage and one count', async () => {
    const a = await join(0, { token: token({ roomId: 'stage', participantId: 'a', grant: {} }) });
    const b = await join(1, { token: token({ roomId: 'stage', participantId: 'b', grant: {} }) });
    const viewers = await Promise.all([0, 1, 2].map((n) => join(n, { token: token({ roomId: 'stage', participantId: `v${n}`, isViewer: true, grant: {} }) })));
    const c = await join(2, { token: token({ roomId: 'stage', participantId: 'c', grant: {} }) });
    for (const room of [a, b, c, ...viewers]) {
      await until(() => room.participantCount.speaker === 3 && room.participantCount.viewer === 3, 3000, 'counts settled');
    }
    // one node holds the room; members on the other two reach it through Redis
    const homes = nodes.filter((n) => n.context.rooms.get('default', 'stage'));
    assert.equal(homes.length, 1);
    assert.equal(homes[0], nodes[0]);
    assert.deepEqual([...a.remoteParticipants.keys()], ['b', 'c']);
    assert.deepEqual([...c.remoteParticipants.keys()], ['a', 'b']);
    assert.deepEqual([...viewers[2]!.remoteParticipants.keys()], ['a', 'b', 'c']);
    const left = nextEvent(a, 'participant-left');
    await b.leave();
    assert.equal((await left).participant.id, 'b');
    await until(() => c.participantCount.speaker === 2 && viewers[1]!.participantCount.speaker === 2, 3000, 'counts after a leave');
  });

  it('viewer pages from any node walk the whole audience once', async () => {
    const host = await join(1, { token: token({ roomId: 'pages', participantId: 'host', grant: {} }) });
    const audience = [];
    for (let i = 0; i < 12; i++) audience.push(await join(i % 3, { token: token({ roomId: 'pages', participantId: `v${String(i).padStart(2, '0')}`, isViewer: true, grant: {} }) }));
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await audience[2]!.getParticipants({ tier: 'viewer', limit: 5, cursor });
      seen.push(...page.participants.map((p) => p.id));
      cursor = page.nextCursor;
    } while (cursor);
    assert.deepEqual(seen, audience.map((_, i) => `v${String(i).padStart(2, '0')}`));
    assert.equal(host.participantCount.viewer >= 0, true);
  });

  it('pubsub across nodes, with `to` and history', async () => {
    const sender = await join(0, { token: token({ roomId: 'data', participantId: 's', grant: { canPublishData: true } }) });
    const all = await join(1, { token: token({ roomId: 'data', participantId: 'all', isViewer: true, grant: {} }) });
    const only = await join(2, { token: token({ roomId: 'data', participantId: 'only', isViewer: true, grant: {} }) });
    const gotAll: unknown[] = [];
    const gotOnly: unknown[] = [];
    await all.pubsub.subscribe('chat', (m) => gotAll.push(m.payload));
    await only.pubsub.subscribe('chat', (m) => gotOnly.push(m.payload));
    await sender.pubsub.publish('chat', 'to everyone', { persist: true });
    await sender.pubsub.publish('chat', 'to one', { to: ['only'] });
    await until(() => gotAll.length === 1 && gotOnly.length === 2, 3000, 'messages delivered');
    assert.deepEqual(gotAll, ['to everyone']);
    assert.deepEqual(gotOnly, ['to everyone', 'to one']);
    const history = await only.pubsub.getHistory('chat');
    assert.deepEqual(history.map((m) => m.payload), ['to everyone']);
    // a large payload from a member on a node that is not the room's home: read there as its bytes
    // (cut from its frame) and sent to the home as those bytes, after that frame's were given back
    // (sent in two fragments: ws joins them into a buffer of the message's own, whose memory the
    // relay gives back as soon as the frame is handled, before the bus sends the request on)
    const bytes = await rawJoin(nodes[2]!.url, token({ roomId: 'data', participantId: 'bytes', isViewer: true, grant: {} }), { participantId: 'bytes' });
    const texts: string[] = [];
    bytes.ws.on('message', (data, isBinary) => void (isBinary || texts.push(String(data))));
    assert.ok((await bytes.request('pubsub.subscribe', { topic: 'chat' })).result);
    const far = await rawJoin(nodes[1]!.url, token({ roomId: 'data', participantId: 'far', grant: { canPublishData: true } }), { participantId: 'far' });
    const large = { text: 'y'.repeat(20_000), n: [1, 2.5] };
    const spelled = JSON.stringify(large, null, 1); // white space that encoding the value again would drop
    const frame = Buffer.from(`{"type":"request","id":77,"method":"pubsub.publish","params":{"topic":"chat","persist":true,"payload":${spelled}}}`);
    far.ws.send(frame.subarray(0, 10_000), { binary: false, fin: false });
    far.ws.send(frame.subarray(10_000), { binary: false, fin: true });
    assert.ok((await far.next((f) => f.id === 77)).result, 'published');
    await until(() => gotAll.length === 2 && gotOnly.length === 3, 3000, 'the large message delivered');
    assert.deepEqual([gotAll[1], gotOnly[2]], [large, large]);
    assert.deepEqual((await only.pubsub.getHistory('chat')).map((m) => m.payload), ['to everyone', large]);
    await until(() => texts.some((x) => x.includes(`"payload":${spelled},"from":"far"`)), 3000, 'the payload as it was written, on a third node');
    far.ws.close();
    bytes.ws.close();
  });

  it('a fan-out to many members on another node is one Redis publish, not one per member', async () => {
    const { Redis } = await import('ioredis');
    const probe = new Redis(redis.url);
    const publishes = async () => Number(/cmdstat_publish:calls=(\d+)/.exec(await probe.info('commandstats'))?.[1] ?? 0);
    try {
      const sender = await join(0, { token: token({ roomId: 'fan', participantId: 's', grant: { canPublishData: true } }) });
      const audience = await Promise.all(Array.from({ length: 30 }, (_, i) => join(1, { token: token({ roomId: 'fan', participantId: `f${i}`, isViewer: true, grant: {} }) })));
      let got = 0;
      await Promise.all(audience.map((room) => room.pubsub.subscribe('chat', () => got++)));
      await new Promise((r) => setTimeout(r, 300)); // count events settle
      const before = await publishes();
      await sender.pubsub.publish('chat', 'to thirty');
      await until(() => got === 30, 3000, 'all thirty received it');
      const delta = (await publishes()) - before;
      assert.ok(delta <= 3, `${delta} publishes for one message to 30 members on one other node`);
    } finally {
      probe.disconnect();
    }
  });

  it('a room that ended and reopened elsewhere is found there, not at the home a node remembered', async () => {
    const first = await join(0, { token: token({ roomId: 'moves', participantId: 'a', grant: {} }) });
    const remembered = await join(1, { token: token({ roomId: 'moves', participantId: 'b', grant: {} }) });
    await remembered.leave();
    await first.leave();
    // node 0 gives the lease up at its next renewal; then node 2 opens the room again
    await until(() => nodes[0]!.context.rooms.get('default', 'moves') === undefined, 3000, 'the room is gone');
    await new Promise((r) => setTimeout(r, 2500));
    const reopened = await join(2, { token: token({ roomId: 'moves', participantId: 'c', grant: {} }) });
    const back = await join(1, { token: token({ roomId: 'moves', participantId: 'b2', grant: {} }) });
    await until(() => back.remoteParticipants.has('c') && reopened.remoteParticipants.has('b2'), 3000, 'one room');
    assert.deepEqual(nodes.map((n) => n.context.rooms.get('default', 'moves') !== undefined), [false, false, true]);
  });

  it('a lobby request on one node reaches a moderator on another, who admits it', async () => {
    const mod = await join(0, { token: token({ roomId: 'lobby', participantId: 'mod', grant: { canModerate: true } }) });
    const requested = nextEvent(mod, 'lobby-request');
    const joining = join(2, { token: token({ roomId: 'lobby', participantId: 'guest', grant: {}, joinPolicy: { mode: 'ask', ttl: 60 } }) });
    assert.equal((await requested).participantId, 'guest');
    await mod.lobby.admit('guest');
    const guest = await joining;
    assert.equal(guest.localParticipant.id, 'guest');
    await until(() => mod.remoteParticipants.has('guest'), 3000, 'the guest on stage');
  });

  it('removal and room.end reach members on every node', async () => {
    const mod = await join(1, { token: token({ roomId: 'end', participantId: 'mod', grant: { canModerate: true } }) });
    const x = await join(2, { token: token({ roomId: 'end', participantId: 'x', grant: {} }) });
    const y = await join(0, { token: token({ roomId: 'end', participantId: 'y', isViewer: true, grant: {} }) });
    const removed = nextEvent(x, 'disconnected');
    await mod.remove('x');
    assert.equal((await removed).reason, 'removed');
    const ended = nextEvent(y, 'disconnected');
    await mod.end();
    assert.equal((await ended).reason, 'room-ended');
  });

  it('a removed token stays out through every node, and after its room reopens on another node', async () => {
    const mod = await join(0, { token: token({ roomId: 'bans', participantId: 'mod', grant: { canModerate: true } }) });
    const banned = token({ roomId: 'bans', participantId: 'z', grant: {} });
    const z = await join(1, { token: banned });
    const removed = nextEvent(z, 'disconnected');
    await mod.remove('z');
    assert.equal((await removed).reason, 'removed');
    for (const node of [1, 2, 0]) {
      await assert.rejects(Sdk.join({ url: nodes[node]!.url, token: banned }), (err: { reason?: string }) => err.reason === 'removed', `through node ${node}`);
    }
    // a lobby token removed: it does not wait in the lobby again through a node that is not the
    // room's home (that node never learnt of the removal; 100 such waits filled the lobby)
    const asking = token({ roomId: 'bans', grant: {}, joinPolicy: { mode: 'ask', ttl: 600 } });
    const w = await rawConnect(nodes[1]!.url);
    w.send({ type: 'join', v: 1, token: asking, participantId: 'w' });
    assert.equal((await w.next((f) => f.type === 'lobby', 10_000)).type, 'lobby');
    await mod.lobby.admit('w');
    assert.equal((await w.next((f) => f.type === 'joined', 10_000)).type, 'joined');
    await mod.remove('w');
    for (const node of [1, 2, 0]) {
      const again = await rawConnect(nodes[node]!.url);
      again.send({ type: 'join', v: 1, token: asking, participantId: `w${node}` });
      const answer = await again.next((f) => f.type === 'lobby' || f.type === 'join-error', 10_000);
      assert.equal((answer as { error?: { reason?: string } }).error?.reason, 'removed', `the removed lobby token through node ${node}: ${JSON.stringify(answer)}`);
      again.ws.close();
    }
    assert.equal(mod.lobby.pending.length, 0, 'nobody waits');
    // the room ends and opens again on a node that never knew it: the ban is the room's, not its home's
    await mod.end();
    const redisClient = new Redis(redis.url);
    const fresh = await startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys: new KeyStore({ [API_KEY]: SECRET }), redis: redis.url, media: null });
    try {
      await until(async () => (await redisClient.exists('tessera:home:default:bans')) === 0, 5000, 'the lease given up');
      await Sdk.join({ url: fresh.url, token: token({ roomId: 'bans', participantId: 'first', grant: {} }) });
      assert.ok(fresh.context.rooms.get('default', 'bans'), 'reopened on the new node');
      for (const url of [fresh.url, nodes[1]!.url, nodes[0]!.url]) {
        await assert.rejects(Sdk.join({ url, token: banned }), (err: { reason?: string }) => err.reason === 'removed', `reopened, through ${url}`);
      }
    } finally {
      redisClient.disconnect();
      await fresh.close();
    }
  });
  it("a shared token's members on another node get what they would get at the home: each its own frame budget, not a share of one queue (120 publishes each, at once)", async () => {
    const host = await rawJoin(nodes[0]!.url, token({ roomId: 'quiz', participantId: 'host', grant: { canSubscribeData: true } }), { participantId: 'host' });
    await host.request('pubsub.subscribe', { topic: 'answers' });
    // an audience at the home, so that each publish is work and the home is busy while they arrive
    const audienceToken = token({ roomId: 'quiz', isViewer: true, grant: { canSubscribeData: true } });
    const audience = await Promise.all(Array.from({ length: 100 }, () => rawJoin(nodes[0]!.url, audienceToken)));
    await Promise.all(audience.map((a) => a.request('pubsub.subscribe', { topic: 'answers' })));
    const shared = token({ roomId: 'quiz', grant: { canPublishData: true } });
    const members = await Promise.all([0, 1, 2].map(() => rawJoin(nodes[1]!.url, shared)));
    const ids: Array<[(typeof members)[number], number]> = [];
    let id = 1000;
    for (const m of members) {
      for (let i = 0; i < 120; i++) {
        m.send({ type: 'request', id, method: 'pubsub.publish', params: { topic: 'answers', payload: 'x'.repeat(500) } });
        ids.push([m, id++]);
      }
    }
    const refused: string[] = [];
    for (const [m, rid] of ids) {
      const answer = (await m.next((f) => f.type === 'response' && f.id === rid, 10_000)) as { error?: { reason?: string } };
      if (answer.error) refused.push(answer.error.reason ?? '?');
    }
    assert.deepEqual(refused, [], 'every publish taken');
    for (const c of [host, ...members, ...audience]) c.ws.close();
  });

  it('a malformed message on the bus (an entry without its verdict, a resume without its frame, a type that is an object) is refused or logged, it never ends the node', async () => {
    const failures: unknown[] = [];
    const record = (err: unknown) => void failures.push(err);
    process.on('unhandledRejection', record);
    process.on('uncaughtException', record);
    const publisher = new Redis(redis.url, { lazyConnect: true });
    const listener = new Redis(redis.url, { lazyConnect: true });
    try {
      await Promise.all([publisher.connect(), listener.connect()]);
      const answers: string[] = [];
      await listener.subscribe('tessera:node:evil');
      listener.on('message', (_channel: string, text: string) => void answers.push(text));
      const channels = (await publisher.pubsub('CHANNELS', 'tessera:node:*')) as string[];
      assert.ok(channels.length >= 3, `every node listens: ${channels.join(' ')}`);
      const messages = [
        { t: 'enter', link: 'x', call: 1 },
        { t: 'wait', link: 'y', call: 2 },
        { t: 'resume', link: 'z', call: 3 },
        { t: 'enter', link: 'w', call: 4, verdict: { project: { toString: 1 }, roomId: 'stage' } },
        { t: { toString: 1 } },
        { t: 'api', call: 5 },
      ];
      for (const channel of channels.filter((c) => c !== 'tessera:node:evil')) {
        await publisher.publish(channel, JSON.stringify({ from: 'evil', batch: messages }));
      }
      // the entries are answered (refused), so that a node that sent one does not wait for its call to time out
      const refused = () => answers.reduce((n, a) => n + a.split('"malformed"').length - 1, 0);
      await until(() => refused() >= 4 * 3, 3000, 'the malformed entries refused');
      assert.deepEqual(failures, []);
      // and every node still takes members
      for (const n of [0, 1, 2]) {
        const room = await join(n, { token: token({ roomId: 'after-bad-bus', participantId: `m${n}`, grant: {} }) });
        assert.equal(room.id, 'after-bad-bus');
      }
    } finally {
      process.off('unhandledRejection', record);
      process.off('uncaughtException', record);
      publisher.disconnect();
      listener.disconnect();
    }
  });
});

describe('issue 14: what crosses Redis is paid for where it is read', () => {
  const KiB = 1024;
  let redis: TestRedis;
  let nodes: Relay[];

  before(async () => {
    redis = await startRedis();
    const keys = new KeyStore({ [API_KEY]: SECRET });
    nodes = await Promise.all(
      [0, 1].map(() => startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys, redis: redis.url, media: null, fanoutByteRate: 256 * KiB, fanoutByteBurst: 256 * KiB })),
    );
  });
  after(async () => {
    await Promise.all(nodes.map((n) => n.close()));
    await redis.stop();
  });

  it("a member's binary frames are charged at its own node, which stops reading them while it owes", async () => {
    const token = (participantId: string) => mintToken({ apiKey: API_KEY, secret: SECRET, roomId: 'binary', participantId, grant: { canPublishData: true } });
    const host = await rawJoin(nodes[0]!.url, token('host'), { participantId: 'host' });
    const sender = await rawJoin(nodes[1]!.url, token('s'), { participantId: 's' });
    assert.ok(nodes[0]!.context.rooms.get('default', 'binary'), 'the room is homed on node 0');
    const opened = await sender.request('stream.open', { size: 1024 * KiB, kind: 'bytes', to: ['host'] });
    const { streamId, chunkBytes } = opened.result as { streamId: number; chunkBytes: number };
    const refused: unknown[] = [];
    sender.ws.on('message', (data, binary) => {
      if (!binary && String(data).includes('unknown-stream')) refused.push(data);
    });
    // 1 MiB of chunks of no stream: 256 KiB of burst, then 256 KiB/s, whichever node reads them
    const started = performance.now();
    const count = Math.ceil((1024 * KiB) / chunkBytes);
    for (let seq = 0; seq < count; seq++) {
      const frame = Buffer.alloc(9 + chunkBytes);
      frame[0] = 1;
      frame.writeUInt32BE(streamId + 1000, 1);
      sender.ws.send(frame);
    }
    await until(() => refused.length === count, 10_000, 'every stray chunk refused');
    assert.ok(performance.now() - started > 2000, `1 MiB of stray chunks crossed Redis in ${Math.round(performance.now() - started)} ms`);
    host.ws.close();
    sender.ws.close();
  });

  it("one shared token's members on another node push no more through Redis than their token's budget, and never more than the home's window unread: the home's subscriber is not cut", async () => {
    const edge = nodes[1]!;
    const token = (claims: Omit<MintOptions, 'apiKey' | 'secret'>) => mintToken({ apiKey: API_KEY, secret: SECRET, ...claims });
    const opened: Room[] = [];
    const join = async (node: number, options: Omit<Parameters<typeof Sdk.join>[0], 'url'>) => {
      const room = await Sdk.join({ url: nodes[node]!.url, ...options });
      opened.push(room);
      return room;
    };
    const keeper = await join(0, { token: token({ roomId: 'shared-flood', participantId: 'keeper', grant: {} }) });
    // a member of another room homed on node 0, reaching it through node 1 as the flood does
    const bystanderHost = await join(0, { token: token({ roomId: 'bystander', participantId: 'host', grant: { canPublishData: true } }) });
    const bystander = await join(1, { token: token({ roomId: 'bystander', participantId: 'b', grant: {} }) });
    let bystanderTrouble = 0;
    bystander.on('reconnecting', () => bystanderTrouble++);
    const got: unknown[] = [];
    await bystander.pubsub.subscribe('chat', ({ payload }) => got.push(payload));
    const shared = token({ grant: {}, isViewer: true });
    const flooders = await Promise.all(Array.from({ length: 10 }, () => rawJoin(edge.url, shared, { roomId: 'shared-flood' })));
    let refused = 0;
    for (const f of flooders) f.ws.on('message', (data, binary) => !binary && String(data).includes('unknown-stream') && refused++);
    const frame = Buffer.alloc(256 * KiB, 7);
    frame[0] = 1;
    const seconds = 3;
    const until_ = performance.now() + seconds * 1000;
    const pump = (ws: (typeof flooders)[number]['ws']) => {
      while (performance.now() < until_ && ws.readyState === ws.OPEN && ws.bufferedAmount < 1024 * KiB) ws.send(frame);
      if (performance.now() < until_ && ws.readyState === ws.OPEN) setTimeout(() => pump(ws), 2);
    };
    for (const f of flooders) pump(f.ws);
    let published = 0;
    const chat = setInterval(() => void bystanderHost.pubsub.publish('chat', published++).catch(() => undefined), 50);
    await new Promise((r) => setTimeout(r, seconds * 1000 + 1000));
    clearInterval(chat);
    await until(() => got.length === published, 5000, 'the bystander got every chat line');
    // every frame that crossed Redis was refused at the home: at most the token's burst and rate (here 256 KiB and 256 KiB/s), not ten members' each
    const crossed = refused * 256 * KiB;
    assert.ok(crossed <= 256 * KiB * (seconds + 2), `${Math.round(crossed / KiB)} KiB crossed Redis`);
    assert.equal(bystanderTrouble, 0, 'the home kept its subscriber: nobody reaching it through another node was dropped');
    for (const f of flooders) f.ws.close();
    await Promise.all(opened.map((r) => r.leave()));
  });

  it('a stream aimed at a member on another node that does not read holds the stream back, it does not get the member cut', async () => {
    // nodes of their own: the fan-out budget of the default, send limits small enough to reach in a few seconds
    const keys = new KeyStore({ [API_KEY]: SECRET });
    const limits = { sendSoftLimitBytes: 256 * KiB, streamHighWater: 256 * KiB, maxBufferedBytes: 4 * 1024 * KiB };
    const pair = await Promise.all([0, 1].map(() => startRelay({ port: 0, host: '127.0.0.1', logLevel: 'silent', keys, redis: redis.url, media: null, ...limits })));
    after(() => Promise.all(pair.map((n) => n.close())));
    const token = (participantId: string, grant = {}) => mintToken({ apiKey: API_KEY, secret: SECRET, roomId: 'aimed', participantId, grant });
    const sender = await rawJoin(pair[0]!.url, token('s', { canPublishData: true }), { participantId: 's' });
    const victim = await rawJoin(pair[1]!.url, token('v', { canSubscribeData: true }), { participantId: 'v' });
    (victim.ws as unknown as { _socket: import('node:net').Socket })._socket.pause();
    const opened = await sender.request('stream.open', { size: 64 * 1024 * KiB, kind: 'bytes', to: ['v'] });
    const { streamId, chunkBytes, window } = opened.result as { streamId: number; chunkBytes: number; window: number };
    let acked = -1;
    let aborted = false;
    sender.ws.on('message', (data, binary) => {
      if (binary) return;
      const f = JSON.parse(String(data)) as { name?: string; data?: { seq: number } };
      if (f.name === 'stream.ack' && f.data) acked = Math.max(acked, f.data.seq);
    });
    victim.ws.on('close', () => (aborted = true));
    // a sender that keeps to its window: as fast as the acknowledgements let it, for 4 s
    let seq = 0;
    const until4s = performance.now() + 4000;
    while (performance.now() < until4s && !aborted) {
      while (seq <= acked + window && seq * chunkBytes < 64 * 1024 * KiB) {
        const frame = Buffer.alloc(9 + chunkBytes);
        frame[0] = 1;
        frame.writeUInt32BE(streamId, 1);
        frame.writeUInt32BE(seq++, 5);
        sender.ws.send(frame);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(pair[1]!.context.counters.cut, 0, 'the victim was not cut as a slow consumer');
    assert.equal(victim.ws.readyState, victim.ws.OPEN);
    // held back while the victim was full, then it went on without it (dropped from the stream, as on one relay)
    assert.ok((acked + 1) * chunkBytes > limits.maxBufferedBytes, `the stream went on: ${Math.round(((acked + 1) * chunkBytes) / KiB)} KiB acknowledged`);
    sender.ws.close();
    victim.ws.close();
  });
});
