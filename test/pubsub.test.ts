import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { PubSubMessage } from '../src/protocol/messages.ts';
import type { Room } from '../src/room.ts';
import { rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawJoin } from './raw.ts';

const DATA = { canPublishData: true, canSubscribeData: true } as const;

describe('pubsub: delivery, targeting, history, permissions, limits', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ historySize: 5, maxPayloadBytes: 1024, messageRate: 20, messageBurst: 30, maxTopicLength: 16, maxTopicsPerRoom: 4, maxSubscriptions: 3 });
  });
  after(() => t.close());

  const join = (room: string, id: string, grant: Record<string, boolean> = DATA, isViewer = false) =>
    t.join({ token: t.token({ roomId: room, participantId: id, grant, isViewer }) });
  const inbox = async (room: Room, topic: string) => {
    const got: PubSubMessage[] = [];
    const off = await room.pubsub.subscribe(topic, (m) => got.push(m));
    return { got, off };
  };

  it('delivers to every subscriber but the sender, with id, from and timestamp stamped by the relay', async () => {
    const [a, b, v] = [await join('p1', 'a'), await join('p1', 'b'), await join('p1', 'v', DATA, true)];
    const [ia, ib, iv] = [await inbox(a, 'chat'), await inbox(b, 'chat'), await inbox(v, 'chat')];
    const before = Date.now();
    const sent = await a.pubsub.publish('chat', { text: 'hi', n: [1, 2] });
    assert.equal(sent.recipients, 2);
    await until(() => ib.got.length === 1 && iv.got.length === 1);
    const m = ib.got[0]!;
    assert.deepEqual({ topic: m.topic, payload: m.payload, from: m.from, id: m.id }, { topic: 'chat', payload: { text: 'hi', n: [1, 2] }, from: 'a', id: sent.id });
    assert.ok(m.timestamp >= before - 5 && m.timestamp <= Date.now());
    assert.deepEqual(iv.got[0], m);
    assert.equal(ia.got.length, 0, 'no echo to the sender');
    for (const payload of [null, 0, 'text', [1, 'two'], true]) await a.pubsub.publish('chat', payload);
    await until(() => ib.got.length === 6);
    assert.deepEqual(ib.got.slice(1).map((x) => x.payload), [null, 0, 'text', [1, 'two'], true]);
    for (const r of [a, b, v]) await r.leave();
  });

  it('a client cannot forge from: the relay stamps it', async () => {
    const b = await join('p2', 'b');
    const ib = await inbox(b, 'chat');
    const raw = await rawJoin(t.url, t.token({ roomId: 'p2', participantId: 'mallory', grant: DATA }), { participantId: 'mallory' });
    const res = await raw.request('pubsub.publish', { topic: 'chat', payload: 'x', from: 'b', id: 'forged', timestamp: 1 });
    assert.ok(res.result);
    await until(() => ib.got.length === 1);
    assert.equal(ib.got[0]!.from, 'mallory');
    assert.notEqual(ib.got[0]!.id, 'forged');
    assert.notEqual(ib.got[0]!.timestamp, 1);
    raw.ws.close();
    await b.leave();
  });

  it('to reaches exactly the named ids (viewers included), live and in history; unknown ids are no one', async () => {
    const [a, b, c, v] = [await join('p3', 'a'), await join('p3', 'b'), await join('p3', 'c'), await join('p3', 'v', DATA, true)];
    const boxes = { b: await inbox(b, 't'), c: await inbox(c, 't'), v: await inbox(v, 't') };
    assert.equal((await a.pubsub.publish('t', 'to-b', { to: ['b'], persist: true })).recipients, 1);
    assert.equal((await a.pubsub.publish('t', 'to-v', { to: ['v'], persist: true })).recipients, 1);
    assert.equal((await a.pubsub.publish('t', 'to-nobody', { to: ['ghost'], persist: true })).recipients, 0);
    assert.equal((await a.pubsub.publish('t', 'to-all', { persist: true })).recipients, 3);
    await until(() => boxes.b.got.length === 2 && boxes.v.got.length === 2 && boxes.c.got.length === 1);
    await new Promise((r) => setTimeout(r, 30));
    assert.deepEqual(boxes.b.got.map((m) => m.payload), ['to-b', 'to-all']);
    assert.deepEqual(boxes.v.got.map((m) => m.payload), ['to-v', 'to-all']);
    assert.deepEqual(boxes.c.got.map((m) => m.payload), ['to-all']);
    const seen = async (r: Room) => (await r.pubsub.getHistory('t')).map((m) => m.payload);
    assert.deepEqual(await seen(b), ['to-b', 'to-all']);
    assert.deepEqual(await seen(v), ['to-v', 'to-all']);
    assert.deepEqual(await seen(c), ['to-all']);
    assert.deepEqual(await seen(a), ['to-b', 'to-v', 'to-nobody', 'to-all'], 'the sender sees its own');
    // a target that arrives later reads what was meant for it
    const ghost = await join('p3', 'ghost');
    assert.deepEqual(await seen(ghost), ['to-nobody', 'to-all']);
    for (const r of [a, b, c, v, ghost]) await r.leave();
  });

  it('history: only persisted messages, oldest first, bounded per topic, with limit', async () => {
    const a = await join('p4', 'a');
    await a.pubsub.publish('h', 'live only');
    for (let i = 1; i <= 8; i++) await a.pubsub.publish('h', i, { persist: true });
    const late = await join('p4', 'late');
    assert.deepEqual((await late.pubsub.getHistory('h')).map((m) => m.payload), [4, 5, 6, 7, 8], 'history-size 5');
    assert.deepEqual((await late.pubsub.getHistory('h', { limit: 2 })).map((m) => m.payload), [7, 8]);
    assert.deepEqual(await late.pubsub.getHistory('empty'), []);
    await rejectsWith(late.pubsub.getHistory('h', { limit: 0 }), 'INVALID_ARGUMENT');
    await a.leave();
    await late.leave();
  });

  it('permissions: publish needs canPublishData; subscribe and history need canSubscribeData', async () => {
    const owner = await join('p5', 'owner');
    const mute = await join('p5', 'mute', { canSubscribeData: true });
    const deaf = await join('p5', 'deaf', { canPublishData: true, canSubscribeData: false });
    const e1 = await rejectsWith(mute.pubsub.publish('x', 1), 'INVALID_PERMISSIONS');
    assert.equal(e1.reason, 'missing-canPublishData');
    await rejectsWith(deaf.pubsub.subscribe('x', () => {}), 'INVALID_PERMISSIONS');
    await rejectsWith(deaf.pubsub.getHistory('x'), 'INVALID_PERMISSIONS');
    // a participant without canSubscribeData never receives, even when named in `to`
    const raw = await rawJoin(t.url, t.token({ roomId: 'p5', participantId: 'deaf2', grant: { canSubscribeData: false } }), { participantId: 'deaf2' });
    const refused = await raw.request('pubsub.subscribe', { topic: 'x' });
    assert.equal((refused.error as { code: string }).code, 'INVALID_PERMISSIONS');
    assert.equal((await owner.pubsub.publish('x', 'hello', { to: ['deaf2', 'deaf'] })).recipients, 0);
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(raw.frames.filter((f) => (f as { name?: string }).name === 'pubsub.message').length, 0);
    raw.ws.close();
    for (const r of [owner, mute, deaf]) await r.leave();
  });

  it('limits: payload size, topic name length, topics per room, subscriptions per participant', async () => {
    const a = await join('p6', 'a');
    const e = await rejectsWith(a.pubsub.publish('big', 'x'.repeat(2000)), 'PAYLOAD_TOO_LARGE');
    assert.equal(e.kind, 'Request');
    await a.pubsub.publish('big', 'x'.repeat(1000));
    await rejectsWith(a.pubsub.publish('a-very-long-topic-name', 1), 'INVALID_ARGUMENT');
    await rejectsWith(a.pubsub.publish('', 1), 'INVALID_ARGUMENT');
    for (const topic of ['t1', 't2', 't3']) await a.pubsub.subscribe(topic, () => {});
    const tooMany = await rejectsWith(a.pubsub.subscribe('t4', () => {}), 'RATE_LIMITED');
    assert.equal(tooMany.reason, 'too-many-subscriptions');
    const b = await join('p6', 'b');
    for (const topic of ['h1', 'h2', 'h3', 'h4']) await b.pubsub.publish(topic, 1, { persist: true }); // the room's 4 topics with history
    const full = await rejectsWith(b.pubsub.publish('h5', 1, { persist: true }), 'RATE_LIMITED');
    assert.equal(full.reason, 'too-many-topics');
    await b.pubsub.publish('h1', 2, { persist: true }); // a topic that has history already is fine
    // item 10: subscribing never uses the room's topic quota up
    await b.pubsub.subscribe('t6', () => {});
    await a.leave();
    await b.leave();
  });

  it('a large payload goes out as the bytes it came as (cut from its frame, not decoded): spelled any way JSON allows, kept alike, measured as sent; what JSON refuses is answered as before', async () => {
    const sub = await rawJoin(t.url, t.token({ roomId: 'p6b', participantId: 'sub', grant: DATA }), { participantId: 'sub' });
    const texts: string[] = [];
    sub.ws.on('message', (data, isBinary) => void (isBinary || texts.push(String(data))));
    assert.ok((await sub.request('pubsub.subscribe', { topic: 'chat' })).result);
    const sdk = await join('p6b', 'sdk');
    const inboxed = await inbox(sdk, 'chat');
    const pub = await rawJoin(t.url, t.token({ roomId: 'p6b', participantId: 'pub', grant: DATA }), { participantId: 'pub' });
    // white space, escapes and number spellings that encoding the value again would not keep
    const spelled = `{ "text" : "caf\\u00e9 \\/ ${'.'.repeat(900)}" ,\n "n" : [ 1.50 , -2.50E+1 , 2e0 ], "t": true }`;
    const frame = (id: number, payload: string) => `{"type":"request","id":${id},"method":"pubsub.publish","params":{"topic":"chat","persist":true,"payload":${payload}}}`;
    assert.ok(frame(1, spelled).length > 1024, 'a frame large enough to be cut');
    pub.send(frame(9001, spelled));
    assert.ok((await pub.next((f) => f.id === 9001)).result, 'published');
    await until(() => texts.some((x) => x.includes('pubsub.message')) && inboxed.got.length === 1);
    const event = texts.find((x) => x.includes('pubsub.message'))!;
    assert.ok(event.includes(`"payload":${spelled},"from":"pub"`), 'the payload\'s own bytes, in the event frame');
    assert.deepStrictEqual(inboxed.got[0]!.payload, JSON.parse(spelled), 'the SDK reads the value that was sent');
    const history = await sub.request('pubsub.history', { topic: 'chat' });
    assert.deepStrictEqual((history.result as { messages: Array<{ payload: unknown }> }).messages.map((m) => m.payload), [JSON.parse(spelled)]);
    // the payload limit (1,024 here) counts the bytes as sent: padding counts
    const padded = `[${' '.repeat(1100)}1]`;
    pub.send(frame(9002, padded));
    assert.equal(((await pub.next((f) => f.id === 9002)).error as { code: string }).code, 'PAYLOAD_TOO_LARGE');
    // large frames JSON refuses, or a payload nested too deep: the same answers as a small frame gets
    pub.send(frame(9003, `"${'x'.repeat(1100)}\u0001"`));
    const bad = await pub.next((f) => f.type === 'error');
    assert.deepEqual(bad.error, { code: 'INVALID_ARGUMENT', kind: 'Request', message: 'frame is not valid JSON', reason: 'bad-frame' });
    pub.send(frame(9004, `${'['.repeat(65)}"${'x'.repeat(1100)}"${']'.repeat(65)}`));
    assert.match(((await pub.next((f) => f.id === 9004)).error as { message: string }).message, /nest at most 64/);
    assert.equal(inboxed.got.length, 1, 'nothing refused was delivered');
    // numbers a receiver would read otherwise than encoded again (JSON.stringify writes null and 0):
    // a large payload arrives as a small one does
    const odd = (pad: number) => `{"pad":"${'.'.repeat(pad)}","n":[1e400,-0,-1e-400]}`;
    for (const [id, pad] of [[9005, 10], [9006, 900]] as const) {
      pub.send(frame(id, odd(pad)));
      assert.ok((await pub.next((f) => f.id === id)).result);
    }
    await until(() => inboxed.got.length === 3);
    assert.deepStrictEqual(inboxed.got.slice(1).map((m) => (m.payload as { n: unknown }).n), [[null, 0, 0], [null, 0, 0]]);
    sub.ws.close();
    pub.ws.close();
    await sdk.leave();
  });

  it('rate: a burst past the bucket gets RATE_LIMITED; others keep their latency; a flood is cut off', async () => {
    const flooder = await join('p7', 'flooder');
    const calm = await join('p7', 'calm');
    const listener = await join('p7', 'listener');
    const box = await inbox(listener, 'c');
    const results = await Promise.allSettled(Array.from({ length: 60 }, (_, i) => flooder.pubsub.publish('c', i)));
    const limited = results.filter((r) => r.status === 'rejected' && (r.reason as { code: string }).code === 'RATE_LIMITED').length;
    assert.ok(limited >= 25 && limited <= 31, `${limited} of 60 refused with a burst of 30`);
    const start = Date.now();
    await calm.pubsub.publish('c', 'calm');
    await until(() => box.got.some((m) => m.payload === 'calm'));
    assert.ok(Date.now() - start < 1000);
    // ten bursts' worth of refusals in a second: cut off
    const gone = new Promise<string>((resolve) => flooder.on('disconnected', ({ reason }) => resolve(reason)));
    const raw = await rawJoin(t.url, t.token({ roomId: 'p7', participantId: 'raw-flood', grant: DATA }), { participantId: 'raw-flood' });
    for (let i = 0; i < 400; i++) raw.send({ type: 'request', id: 10_000 + i, method: 'pubsub.publish', params: { topic: 'c', payload: i } });
    assert.equal((await raw.closed).code, 4011);
    assert.equal(calm.connected, true);
    await flooder.leave();
    await gone;
    await calm.leave();
    await listener.leave();
  });

  it('subscribe twice, unsubscribe, and leave clean up on both sides', async () => {
    const a = await join('p8', 'a');
    const b = await join('p8', 'b');
    const got1: unknown[] = [];
    const got2: unknown[] = [];
    const off1 = await b.pubsub.subscribe('s', (m) => got1.push(m.payload));
    const off2 = await b.pubsub.subscribe('s', (m) => got2.push(m.payload));
    assert.equal((await a.pubsub.publish('s', 1)).recipients, 1, 'one relay subscription for two handlers');
    await until(() => got1.length === 1 && got2.length === 1);
    await off1();
    assert.equal((await a.pubsub.publish('s', 2)).recipients, 1, 'still subscribed through the second');
    await until(() => got2.length === 2);
    assert.equal(got1.length, 1);
    await off2();
    await off2(); // twice is harmless
    assert.equal((await a.pubsub.publish('s', 3)).recipients, 0, 'unsubscribed at the relay');
    await b.pubsub.subscribe('s', () => {});
    assert.equal((await a.pubsub.publish('s', 4)).recipients, 1);
    await b.leave();
    assert.equal((await a.pubsub.publish('s', 5)).recipients, 0, 'leaving drops its subscriptions');
    await a.leave();
  });
});
