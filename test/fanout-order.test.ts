/**
 * Issue 11, fan-out in slices: through a real relay whose delivery may write almost nothing at
 * once (so nearly every fan-out waits for the delivery's turns, and frames sent at once and
 * frames that waited are mixed), every member still gets its frames in the order the relay
 * sent them: a message targeted at a member after a room-wide one never arrives before it, a
 * response never before a broadcast sent ahead of it, and `joined` comes first.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Delivery } from '../relay/delivery.ts';
import { FrameScheduler } from '../relay/scheduler.ts';
import { HOLD_ROOM_SIZE } from '../relay/rooms/memory-room.ts';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawConnect, rawJoin, type RawClient } from './raw.ts';

const MEMBERS = 40;
const ROUNDS = 60;

/** A crowd of one more than {@link HOLD_ROOM_SIZE}, each subscribed to `chat`: `m0` a speaker with `hostGrant`, the others viewers. */
async function crowd(t: TestRelay, roomId: string, hostGrant: Record<string, boolean>, viewerGrant: Record<string, boolean>): Promise<RawClient[]> {
  const members: RawClient[] = [];
  for (let i = 0; i <= HOLD_ROOM_SIZE; i++) {
    const m = await rawJoin(t.url, t.token({ roomId, participantId: `m${i}`, grant: i === 0 ? hostGrant : viewerGrant, isViewer: i > 0 }), { participantId: `m${i}` });
    await m.request('pubsub.subscribe', { topic: 'chat' });
    members.push(m);
  }
  return members;
}

describe('issue 11: a fan-out delivered in slices keeps each member\'s frames in order', () => {
  let t: TestRelay;
  before(async () => {
    const frames = new FrameScheduler();
    t = await startTestRelay({ frames, delivery: new Delivery(frames, { directMs: 0.005 }) });
  });
  after(() => t.close());

  it('room-wide messages, messages targeted at one member and answers arrive in the order they were sent', async () => {
    const grant = { canPublishData: true, canSubscribeData: true };
    const members: RawClient[] = [];
    for (let i = 0; i < MEMBERS; i++) {
      const m = await rawJoin(t.url, t.token({ roomId: 'order', participantId: `m${i}`, grant }), { participantId: `m${i}` });
      members.push(m);
      const sub = await m.request('pubsub.subscribe', { topic: 'chat' });
      assert.ok(!sub.error, JSON.stringify(sub));
    }
    const publisher = await rawJoin(t.url, t.token({ roomId: 'order', participantId: 'p', grant }), { participantId: 'p' });
    // each round: one message to the room, then one to a single member, then that member asks something
    for (let round = 0; round < ROUNDS; round++) {
      const target = round % MEMBERS;
      publisher.ws.send(JSON.stringify({ type: 'request', id: 10_000 + 2 * round, method: 'pubsub.publish', params: { topic: 'chat', payload: { round, to: 'all' } } }));
      publisher.ws.send(JSON.stringify({ type: 'request', id: 10_001 + 2 * round, method: 'pubsub.publish', params: { topic: 'chat', payload: { round, to: `m${target}` }, to: [`m${target}`] } }));
    }
    await until(() => members.every((m) => m.frames.filter((f) => f.type === 'event' && f.name === 'pubsub.message').length >= ROUNDS), 20_000, 'every message delivered');
    // a request right behind: its answer comes after everything sent to that member before it
    const pongs = await Promise.all(members.map((m) => m.request('pubsub.history', { topic: 'chat' })));
    for (const p of pongs) assert.ok(!p.error, JSON.stringify(p));

    for (let i = 0; i < MEMBERS; i++) {
      const payloads = members[i]!.frames
        .filter((f) => f.type === 'event' && f.name === 'pubsub.message')
        .map((f) => (f.data as { payload: { round: number; to: string } }).payload);
      const expected: Array<{ round: number; to: string }> = [];
      for (let round = 0; round < ROUNDS; round++) {
        expected.push({ round, to: 'all' });
        if (round % MEMBERS === i) expected.push({ round, to: `m${i}` });
      }
      assert.deepEqual(payloads, expected, `member m${i}`);
    }
    for (const m of [...members, publisher]) m.ws.close();
  });
});

describe('issue 11: in a crowded room, arrivals, departures and counts share the next write', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ countIntervalMs: 20 });
  });
  after(() => t.close());

  it(`past ${HOLD_ROOM_SIZE} members an arrival is held but keeps its place between the chat lines around it; a departure with nothing after it still goes out`, async () => {
    const grant = { canPublishData: true, canSubscribeData: true };
    const members = await crowd(t, 'crowd', grant, grant);
    const publisher = members[0]!;
    const kinds = (m: RawClient) =>
      m.frames
        .filter((f) => f.type === 'event' && (f.name === 'pubsub.message' || f.name === 'participant-joined' || f.name === 'participant-left'))
        .map((f) => (f.name === 'pubsub.message' ? `chat ${(f.data as { payload: { n: number } }).payload.n}` : `${f.name} ${(f.data as { id: string }).id}`));
    for (const m of members) m.frames.length = 0;
    // a chat, an arrival held for company, a chat that takes it along
    await publisher.request('pubsub.publish', { topic: 'chat', payload: { n: 1 } });
    const guest = await rawJoin(t.url, t.token({ roomId: 'crowd', participantId: 'guest', grant: {} }), { participantId: 'guest' });
    await publisher.request('pubsub.publish', { topic: 'chat', payload: { n: 2 } });
    await until(() => members.slice(1).every((m) => kinds(m).length >= 3), 5000, 'the chat and the arrival');
    for (const m of members.slice(1)) assert.deepEqual(kinds(m), ['chat 1', 'participant-joined guest', 'chat 2'], 'the arrival between the chat lines it was sent between');
    // the crowd's count (coalesced) reaches every viewer too: with the guest on stage before it
    // leaves (a count that changes and changes back within one window is rightly never sent)
    const sawSpeakers = (m: RawClient, speaker: number) =>
      m.frames.some((f) => f.type === 'event' && f.name === 'participant-count-changed' && (f.data as { speaker: number }).speaker === speaker);
    await until(() => members.slice(1).every((m) => sawSpeakers(m, 2)), 5000, 'the count with the guest');
    // a departure alone, with no chat after it: out within the hold
    const leftAt = performance.now();
    guest.ws.close();
    await until(() => members.every((m) => kinds(m).includes('participant-left guest')), 5000, 'the departure');
    assert.ok(performance.now() - leftAt < 2000, 'the departure went out on its own, not waiting for company that never came');
    const lastSpeakers = (m: RawClient) =>
      (m.frames.filter((f) => f.type === 'event' && f.name === 'participant-count-changed').at(-1)?.data as { speaker: number } | undefined)?.speaker;
    await until(() => members.slice(1).every((m) => lastSpeakers(m) === 1), 5000, 'the count without the guest');
    for (const m of members) m.ws.close();
  });
});

describe('issue 11: in a crowded room, an output\'s status changes share the next write', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay();
  });
  after(() => t.close());

  it(`past ${HOLD_ROOM_SIZE} members, output-changed keeps its place between the chat lines around it, and a change with nothing after it still goes out`, async () => {
    const members = await crowd(t, 'crowd-out', { canPublishData: true, canSubscribeData: true, canWhiteboard: true }, { canSubscribeData: true });
    const host = members[0]!;
    const kinds = (m: RawClient) =>
      m.frames
        .filter((f) => f.type === 'event' && (f.name === 'pubsub.message' || f.name === 'output-changed'))
        .map((f) => (f.name === 'pubsub.message' ? `chat ${(f.data as { payload: { n: number } }).payload.n}` : `${(f.data as { output: string }).output} ${(f.data as { state: string }).state}`));
    for (const m of members) m.frames.length = 0;
    await host.request('pubsub.publish', { topic: 'chat', payload: { n: 1 } });
    assert.ok((await host.request('output.start', { output: 'whiteboard' })).result);
    await host.request('pubsub.publish', { topic: 'chat', payload: { n: 2 } });
    await until(() => members.slice(1).every((m) => kinds(m).length >= 4), 5000, 'the chat and the changes');
    for (const m of members.slice(1)) assert.deepEqual(kinds(m), ['chat 1', 'whiteboard starting', 'whiteboard active', 'chat 2'], 'the changes between the chat lines they were sent between');
    // a stop with no chat after it: out within the hold
    const stoppedAt = performance.now();
    assert.ok((await host.request('output.stop', { output: 'whiteboard' })).result);
    await until(() => members.slice(1).every((m) => kinds(m).includes('whiteboard stopped')), 5000, 'the stop');
    assert.ok(performance.now() - stoppedAt < 2000, 'the change went out on its own, not waiting for company that never came');
    for (const m of members) m.ws.close();
  });
});

/** This process's write syscalls so far (Linux): the relay under test runs here. */
function writeSyscalls(): number {
  return Number(/^syscw:\s*(\d+)/m.exec(readFileSync('/proc/self/io', 'utf8'))![1]);
}

describe('issue 11: the answers to a connection\'s frames handled in one turn share one write', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay();
  });
  after(() => t.close());

  it('300 pings arriving at once are answered in a few writes, not a syscall each (a flood of cheap requests cost as many syscalls as a room\'s chat)', async () => {
    const m = await rawJoin(t.url, t.token({ roomId: 'answers', isViewer: true, grant: {} }), { participantId: 'asker' });
    const PINGS = 300;
    const pongs = () => m.frames.filter((f) => f.type === 'pong').length;
    const socket = (m.ws as unknown as { _socket: Socket })._socket;
    const before = writeSyscalls();
    // the pings in one write of the client, so that the relay reads them together
    socket.cork();
    for (let i = 0; i < PINGS; i++) m.send({ type: 'ping' });
    socket.uncork();
    await until(() => pongs() >= PINGS, 10_000, 'every pong');
    const writes = writeSyscalls() - before;
    assert.equal(pongs(), PINGS);
    assert.ok(writes < PINGS / 10, `${writes} write syscalls for ${PINGS} answers`);
    m.ws.close();
  });
});

describe('issue 11: a connection cut in the turn its answers were written still gets them, and its close frame', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ maxPendingConnections: 1 });
  });
  after(() => t.close());

  it('a joiner evicted for a newer socket gets its error frame and close 4002, every time (a destroyed socket drops what its cork holds)', async () => {
    for (let i = 0; i < 10; i++) {
      const first = await rawConnect(t.url);
      const second = await rawConnect(t.url); // takes the only pending place: the first is evicted
      const closed = await first.closed;
      assert.equal(closed.code, 4002, `try ${i}: close ${closed.code}`);
      assert.ok(first.frames.some((f) => f.type === 'error'), `try ${i}: the error frame before the close`);
      second.ws.terminate();
      await second.closed;
    }
  });
});
