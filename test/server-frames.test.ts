import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, afterEach, before, describe, it } from 'node:test';
import { WebSocketServer, type WebSocket as ServerSocket } from 'ws';
import { SdkError } from '../src/errors.ts';
import { Sdk } from '../src/sdk.ts';
import type { Room } from '../src/room.ts';
import { mintToken } from '../src/server/mint.ts';
import { API_KEY, nextEvent, SECRET, until } from './helpers.ts';

/**
 * Issue 12: the SDK validates every frame the relay sends. A fake relay (a bare `ws` server)
 * answers the join with a valid `joined`, then sends what a relay must never send: each reaches
 * the room as a typed error (or fails the one call it answers), nothing crashes, and the room
 * goes on working.
 */

/** A `joined` frame as a real relay sends it (captured from `startTestRelay`). */
const joinedFrame = () => ({
  type: 'joined',
  v: 1,
  roomId: 'r',
  self: {
    id: 'a',
    name: 'a',
    isViewer: false,
    grant: {
      canPublish: true, canSubscribe: true, canPublishData: true, canSubscribeData: true, canRecord: false, canHls: false,
      canLivestream: false, canTranscribe: false, canWhiteboard: false, canModerate: true, canPublishSources: ['camera', 'microphone', 'screen'],
    },
    joinedAt: Date.now(),
  },
  participants: [] as unknown[],
  counts: { speaker: 1, viewer: 0, total: 1 },
  outputs: { recording: { state: 'stopped' }, hls: { state: 'stopped' }, livestream: { state: 'stopped' }, transcription: { state: 'stopped' }, whiteboard: { state: 'stopped' } },
  lobby: [],
  resume: { credential: 'Qm4q7XAKOQ1EOQG-I-8Hqht0HFXJj9r-', graceMs: 15000 },
  limits: { maxFrameBytes: 262144, maxPayloadBytes: 65536 },
});

interface Request {
  id: number;
  method: string;
  params: Record<string, unknown>;
}

interface FakeRelay {
  url: string;
  /** The server side of the latest connection. */
  socket(): ServerSocket;
  /** The next request frame the SDK sends. */
  nextRequest(): Promise<Request>;
  close(): Promise<void>;
}

/** A fake relay: `answerJoin` sends what it likes in answer to the first frame. */
async function fakeRelay(answerJoin: (ws: ServerSocket) => void = (ws) => ws.send(JSON.stringify(joinedFrame()))): Promise<FakeRelay> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await once(server, 'listening');
  let latest: ServerSocket | null = null;
  const requests: Request[] = [];
  const waiting: Array<(r: Request) => void> = [];
  server.on('connection', (ws) => {
    latest = ws;
    ws.once('message', () => {
      answerJoin(ws);
      ws.on('message', (data, binary) => {
        if (binary) return;
        const frame = JSON.parse(String(data)) as { type: string } & Request;
        if (frame.type === 'ping') return ws.send('{"type":"pong"}');
        if (frame.type !== 'request') return;
        const take = waiting.shift();
        if (take) take(frame);
        else requests.push(frame);
      });
    });
  });
  return {
    url: `ws://127.0.0.1:${(server.address() as { port: number }).port}`,
    socket: () => latest!,
    nextRequest: () => new Promise((resolve) => {
      const queued = requests.shift();
      if (queued) resolve(queued);
      else waiting.push(resolve);
    }),
    close: async () => {
      for (const ws of server.clients) ws.terminate();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const token = () => mintToken({ apiKey: API_KEY, secret: SECRET, roomId: 'r', participantId: 'a', grant: { canPublishData: true, canModerate: true } });
const join = (url: string) => Sdk.join({ url, token: token(), reconnect: false, heartbeatMs: 60_000, timeoutMs: 3000 });

/** Assert `error` is an SdkError with these fields. */
function assertSdkError(error: unknown, expected: { kind: string; code: string; reason?: string; message?: RegExp }): void {
  assert.ok(error instanceof SdkError, `not an SdkError: ${String(error)}`);
  assert.equal(error.kind, expected.kind);
  assert.equal(error.code, expected.code);
  assert.equal(error.reason, expected.reason);
  if (expected.message) assert.match(error.message, expected.message);
}

/** Rejects with what `promise` rejects with (fails when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('expected a rejection');
}

/** What `promise` resolves to, or `'timed out'` after `ms` (its timer cleared either way). */
/**
 * Run `test/leave-exit-child.ts` against `url` (`mode`: leave while reconnecting, or at once while
 * open) and resolve with how long after its `leave()` resolved the process exited; fails if it did
 * not exit within `ms`.
 */
async function leaveInChild(url: string, mode: 'reconnecting' | 'open', ms: number): Promise<number> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/leave-exit-child.ts', url, mode], { cwd: new URL('..', import.meta.url).pathname, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let leftAt = 0;
  child.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    if (!leftAt && out.includes('left')) leftAt = Date.now();
  });
  const outcome = await within(once(child, 'exit').then(() => 'exited'), ms);
  const exitAt = Date.now();
  if (outcome !== 'exited') child.kill();
  assert.equal(outcome, 'exited', `the process that left did not exit (${out.trim() || 'it printed nothing'})`);
  assert.ok(leftAt > 0, 'it left');
  return exitAt - leftAt;
}

async function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timed out'> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([promise, new Promise<'timed out'>((resolve) => (timer = setTimeout(() => resolve('timed out'), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

describe('server frames: the SDK validates what the relay sends', () => {
  const uncaught: unknown[] = [];
  const spy = (error: unknown) => uncaught.push(error);
  let relay: FakeRelay | null = null;

  before(() => process.on('uncaughtException', spy));
  after(() => process.off('uncaughtException', spy));
  afterEach(async () => {
    await relay?.close();
    relay = null;
    assert.deepEqual(uncaught, [], 'no uncaught exception');
  });

  it('unknown, invalid, malformed and error frames reach the room as typed errors; the room keeps working', async () => {
    relay = await fakeRelay();
    const room = await join(relay.url);
    const errors: SdkError[] = [];
    room.on('error', ({ error }) => errors.push(error));
    const ws = relay.socket();

    ws.send('{"type":"hello","v":2}');
    ws.send('{"type":"event","name":');
    ws.send(JSON.stringify({ type: 'event', name: 'participant-joined', data: { id: 5, name: 'Mallory' } }));
    ws.send(Buffer.from([0xff, 0x00, 0x01]), { binary: true });
    ws.send(JSON.stringify({ type: 'error', error: { code: 'RATE_LIMITED', kind: 'Request', message: 'slow down', reason: 'message-rate' } }));
    ws.send(JSON.stringify({ type: 'error', error: { code: 'SHINY_NEW_CODE', kind: 'State', message: 'from a newer relay', reason: 'not-a-reason-yet' } }));
    // an event from a newer relay: ignored, no error
    ws.send(JSON.stringify({ type: 'event', name: 'reaction', data: { emoji: '🎉' } }));
    // a frame for nobody's request
    ws.send(JSON.stringify({ type: 'response', id: 999, error: { message: 'no code' } }));
    // then a valid event: still delivered
    const joined = nextEvent(room, 'participant-joined');
    ws.send(JSON.stringify({ type: 'event', name: 'participant-joined', data: { id: 'b', name: 'Bob', joinedAt: 1 } }));
    assert.equal((await joined).participant.id, 'b');

    assert.equal(errors.length, 7, errors.map((e) => e.message).join('\n'));
    const [unknownType, invalidJson, badEvent, binary, rateLimited, newer, orphan] = errors;
    assertSdkError(unknownType, { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame', message: /unknown frame type "hello"/ });
    assertSdkError(invalidJson, { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame', message: /not valid JSON/ });
    assertSdkError(badEvent, { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame', message: /participant-joined.*id/ });
    assertSdkError(binary, { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-chunk' });
    assertSdkError(rateLimited, { kind: 'Request', code: 'RATE_LIMITED', reason: 'message-rate', message: /slow down/ });
    assertSdkError(newer, { kind: 'State', code: 'SHINY_NEW_CODE', message: /newer relay/ });
    assertSdkError(orphan, { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame', message: /response/ });
    assert.deepEqual([...room.remoteParticipants.keys()], ['b'], 'the malformed participant-joined changed nothing');
    assert.equal(room.connected, true);
  });

  it('a response whose result does not parse fails its call with INTERNAL_ERROR, not the room; later calls work', async () => {
    relay = await fakeRelay();
    const room = await join(relay.url);
    const errors: SdkError[] = [];
    room.on('error', ({ error }) => errors.push(error));
    const ws = relay.socket();

    const publish = room.pubsub.publish('t', { hi: 1 });
    const request = await relay.nextRequest();
    assert.equal(request.method, 'pubsub.publish');
    ws.send(JSON.stringify({ type: 'response', id: request.id, result: { id: 7, timestamp: 'now' } }));
    assertSdkError(await rejection(publish), { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame', message: /pubsub\.publish result id/ });

    // neither result nor error: the same, for that request
    const history = room.pubsub.getHistory('t');
    const second = await relay.nextRequest();
    ws.send(JSON.stringify({ type: 'response', id: second.id }));
    assertSdkError(await rejection(history), { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame' });

    // a page of participants with one broken entry
    const page = room.getParticipants({ tier: 'viewer' });
    const third = await relay.nextRequest();
    const participants = Array.from({ length: 1000 }, (_, i) => ({ id: `v${i}`, name: `V${i}`, joinedAt: i, tier: 'viewer' }));
    participants[500] = { id: 'v500', name: 'V500', joinedAt: 500, tier: 'everyone' };
    ws.send(JSON.stringify({ type: 'response', id: third.id, result: { participants, nextCursor: null } }));
    assertSdkError(await rejection(page), { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame', message: /participants\[500\]/ });

    // a relay error keeps its own code
    const sub = room.pubsub.subscribe('t', () => undefined);
    const fourth = await relay.nextRequest();
    ws.send(JSON.stringify({ type: 'response', id: fourth.id, error: { code: 'INVALID_PERMISSIONS', kind: 'Auth', message: 'no', reason: 'missing-canSubscribeData' } }));
    assertSdkError(await rejection(sub), { kind: 'Auth', code: 'INVALID_PERMISSIONS', reason: 'missing-canSubscribeData' });

    // and a valid answer resolves, with unknown fields dropped
    const ok = room.pubsub.publish('t', 1);
    const fifth = await relay.nextRequest();
    ws.send(JSON.stringify({ type: 'response', id: fifth.id, result: { id: 'm1', timestamp: 5, recipients: 2, future: true } }));
    assert.deepEqual(await ok, { id: 'm1', timestamp: 5, recipients: 2 });

    assert.deepEqual(errors, [], 'failures of calls are not room errors');
    assert.equal(room.connected, true);
  });

  it('a relay that answers stream.open with a chunk of 0 bytes or a window below 1 fails the send (it looped for ever, 150 MB/s); a stream id reused while open fails the first stream; the stage never holds yourself or anyone twice; counts must be whole and at least add up', async () => {
    relay = await fakeRelay((ws) => ws.send(JSON.stringify({ ...joinedFrame(), participants: [{ id: 'a', name: 'a', joinedAt: 1 }, { id: 'b', name: 'b', joinedAt: 2 }, { id: 'b', name: 'b', joinedAt: 2 }] })));
    const room = await join(relay.url);
    const errors: SdkError[] = [];
    room.on('error', ({ error }) => errors.push(error));
    const ws = relay.socket();
    assert.deepEqual([...room.remoteParticipants.keys()], ['b'], 'not the local participant, b once');

    for (const answer of [{ streamId: 1, chunkBytes: 0, window: 16 }, { streamId: 2, chunkBytes: 65536, window: -5 }, { streamId: -1, chunkBytes: 65536, window: 16 }]) {
      const send = room.dataStream.send('hello', { topic: 't' });
      const request = await relay.nextRequest();
      assert.equal(request.method, 'stream.open');
      ws.send(JSON.stringify({ type: 'response', id: request.id, result: answer }));
      assertSdkError(await rejection(send), { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame', message: /stream\.open result/ });
    }

    const streams: Array<{ text: Promise<string> }> = [];
    room.dataStream.on('stream', (stream) => {
      const text = stream.readText();
      text.catch(() => undefined); // the second one ends with the connection, after the test
      streams.push({ text });
    });
    const open = (streamId: number, size: number) => ws.send(JSON.stringify({ type: 'event', name: 'stream.open', data: { streamId, from: 'b', timestamp: 1, size, kind: 'text' } }));
    open(9, 5);
    await new Promise((r) => setTimeout(r, 50));
    open(9, 3);
    assertSdkError(await rejection(streams[0]!.text), { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame' });

    ws.send(JSON.stringify({ type: 'event', name: 'participant-joined', data: { id: 'a', name: 'me again', joinedAt: 3 } }));
    ws.send(JSON.stringify({ type: 'event', name: 'participant-count-changed', data: { speaker: -1, viewer: -2, total: -3 } }));
    ws.send(JSON.stringify({ type: 'event', name: 'participant-count-changed', data: { speaker: 2, viewer: 3, total: 4 } }));
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual([...room.remoteParticipants.keys()], ['b'], 'participant-joined of yourself is not another participant');
    assert.deepEqual(room.participantCount, { speaker: 1, viewer: 0, total: 1 }, 'counts that do not add up are not taken');
    assert.equal(errors.filter((e) => e.reason === 'bad-frame').length, 2, 'each bad count is a bad-frame');
    // a newer relay may count a tier this SDK does not know in the total
    ws.send(JSON.stringify({ type: 'event', name: 'participant-count-changed', data: { speaker: 2, viewer: 3, total: 6, agent: 1 } }));
    await until(() => room.participantCount.total === 6, 2000, 'the newer relay\'s counts taken');
    assert.deepEqual(room.participantCount, { speaker: 2, viewer: 3, total: 6 });
  });

  it('a lobby ttl a timer cannot hold, or a lobby frame sent again and again, neither ends the wait at once nor keeps it for ever', async () => {
    const lobby = (ttl: number) => JSON.stringify({ type: 'lobby', requestedAt: Date.now(), ttl });
    relay = await fakeRelay((ws) => ws.send(lobby(1e308)));
    const settledEarly = await Promise.race([join(relay.url).then(() => 'joined', (e: SdkError) => e.code), new Promise((r) => setTimeout(() => r('waiting'), 300))]);
    assert.equal(settledEarly, 'waiting', 'a huge ttl does not time the wait out at once');
    await relay.close();
    // the relay's own ttl of 0 s, repeated every 100 ms: the wait ends 10 s after the first, not never
    relay = await fakeRelay((ws) => {
      ws.send(lobby(0));
      const again = setInterval(() => (ws.readyState === ws.OPEN ? ws.send(lobby(0)) : clearInterval(again)), 100);
    });
    const began = Date.now();
    assertSdkError(await rejection(join(relay.url)), { kind: 'Lobby', code: 'ENTRY_TIMEOUT', reason: 'ttl' });
    assert.ok(Date.now() - began < 12_000);
  });

  it('frames right behind joined (before the room listens) are validated too', async () => {
    relay = await fakeRelay((ws) => {
      ws.send(JSON.stringify(joinedFrame()));
      ws.send('{"type":"event","name":"participant-joined","data":null}');
      ws.send(Buffer.from([1, 2]), { binary: true });
      ws.send(JSON.stringify({ type: 'event', name: 'participant-joined', data: { id: 'c', name: 'Cy', joinedAt: 2 } }));
    });
    const room: Room = await join(relay.url);
    const seen = await nextEvent(room, 'participant-joined');
    assert.equal(seen.participant.id, 'c');
    assert.equal(room.remoteParticipants.size, 1);
  });

  it('a relay that takes every session and drops it at once is not retried for ever: a drop soon after a reconnection continues it (its backoff and time away)', async () => {
    let sessions = 0;
    relay = await fakeRelay((ws) => {
      sessions++;
      ws.send(JSON.stringify(joinedFrame()));
      setTimeout(() => ws.terminate(), 20);
    });
    const room = await Sdk.join({ url: relay.url, token: token(), reconnect: { initialDelayMs: 20, maxDelayMs: 80, maxTimeMs: 600 }, heartbeatMs: 60_000, timeoutMs: 3000 });
    const reconnected: number[] = [];
    room.on('reconnected', () => reconnected.push(Date.now()));
    // each reconnection used to start afresh (250 ms of budget each time): it never ended
    const { reason } = await Promise.race([nextEvent(room, 'disconnected'), new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still reconnecting after ${sessions} sessions`)), 5000))]);
    assert.equal(reason, 'connection-lost');
    assert.ok(reconnected.length >= 2, `it did come back in between (${reconnected.length})`);
    assert.ok(sessions <= 20, `${sessions} sessions for 600 ms of reconnection`);
    // the backoff went on growing across the drops: the later gaps are not the first delay
    const gaps = reconnected.slice(1).map((t, i) => t - reconnected[i]!);
    assert.ok(Math.max(...gaps) >= 75, `gaps ${gaps.join(', ')} ms`);
  });

  it('a lobby answered to a reconnection is not waited through past maxTimeMs (it held the session, its socket and a timer for the lobby ttl, up to 24.8 days): the session ends connection-lost', async () => {
    let handshakes = 0;
    relay = await fakeRelay((ws) => ws.send(JSON.stringify(handshakes++ === 0 ? joinedFrame() : { type: 'lobby', requestedAt: Date.now(), ttl: 1e9 })));
    const room = await Sdk.join({ url: relay.url, token: token(), reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxTimeMs: 500 }, heartbeatMs: 60_000, timeoutMs: 3000 });
    const disconnected = nextEvent(room, 'disconnected', 5000);
    const began = Date.now();
    relay.socket().close(1011);
    assert.deepEqual(await disconnected, { reason: 'connection-lost' });
    assert.ok(Date.now() - began < 2000, `the session ended ${Date.now() - began} ms after the drop (maxTimeMs 500)`);
    assert.equal(handshakes, 2, 'one reconnection, held in the lobby');
    const held = relay.socket();
    if (held.readyState !== held.CLOSED) await once(held, 'close');
  });

  it('a reconnection to a relay that never answers ends at maxTimeMs, not an attempt\'s 5 s timeout past it', async () => {
    let handshakes = 0;
    // after the first session, handshakes are never answered
    relay = await fakeRelay((ws) => void (handshakes++ === 0 && ws.send(JSON.stringify(joinedFrame()))));
    const room = await Sdk.join({ url: relay.url, token: token(), reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxTimeMs: 800 }, heartbeatMs: 60_000, timeoutMs: 15_000 });
    const disconnected = nextEvent(room, 'disconnected', 8000);
    const began = Date.now();
    relay.socket().close(1011);
    assert.deepEqual(await disconnected, { reason: 'connection-lost' });
    const took = Date.now() - began;
    assert.ok(took < 2000, `the session ended ${took} ms after the drop (maxTimeMs 800; an attempt's own timeout is 5 s)`);
  });

  it('leave() while a reconnection is under way stops it: the pending handshake\'s socket closes at once (it lived on 5 s), and a Node process that left exits (held in a lobby, it lived on for the lobby ttl)', async () => {
    let handshakes = 0;
    // the resume is never answered
    relay = await fakeRelay((ws) => void (handshakes++ === 0 && ws.send(JSON.stringify(joinedFrame()))));
    const room = await Sdk.join({ url: relay.url, token: token(), reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxTimeMs: 60_000 }, heartbeatMs: 60_000, timeoutMs: 15_000 });
    relay.socket().close(1011);
    await until(() => handshakes === 2, 3000, 'the resume sent');
    const pending = relay.socket();
    const closed = once(pending, 'close');
    await room.leave();
    const left = Date.now();
    assert.equal(await within(closed.then(() => 'closed'), 1000), 'closed', 'the pending handshake\'s socket closed within 1 s of leave()');
    assert.ok(Date.now() - left < 1000);
    await relay.close();

    // a process of its own: the resume answered with a lobby of a huge ttl, then leave()
    handshakes = 0;
    relay = await fakeRelay((ws) => ws.send(JSON.stringify(handshakes++ === 0 ? joinedFrame() : { type: 'lobby', requestedAt: Date.now(), ttl: 1e9 })));
    const firstDrop = (async () => {
      await until(() => handshakes === 1, 10_000, 'the child joined');
      relay!.socket().close(1011);
    })();
    const afterLeave = await leaveInChild(relay.url, 'reconnecting', 15_000);
    await firstDrop;
    assert.ok(afterLeave < 3000, `it exited ${afterLeave} ms after leave()`);
    assert.equal(handshakes, 2, 'its reconnection was held in the lobby');
  });

  it('a Node process that leaves a relay that never completes the closing handshake exits within a second of leave() (ws waited 30 s for it)', async () => {
    // the relay answers the join, then reads nothing more: neither session.leave nor the close frame
    relay = await fakeRelay((ws) => {
      ws.send(JSON.stringify(joinedFrame()));
      (ws as unknown as { _socket: { pause(): void } })._socket.pause();
    });
    const afterLeave = await leaveInChild(relay.url, 'open', 20_000);
    assert.ok(afterLeave < 2500, `it exited ${afterLeave} ms after leave() resolved`);
  });

  it('a malformed joined fails Sdk.join with a typed error, never a TypeError', async () => {
    const spoil: Array<[string, (j: Record<string, unknown>) => unknown, RegExp]> = [
      ['no self', (j) => delete j.self, /self/],
      ['self not an object', (j) => (j.self = 'a'), /self/],
      ['outputs missing', (j) => delete j.outputs, /outputs/],
      ['a participant without an id', (j) => (j.participants = [{ name: 'x', joinedAt: 1 }]), /participants\[0\]/],
      ['counts not numbers', (j) => (j.counts = { speaker: '1', viewer: 0, total: 1 }), /counts/],
      ['no resume', (j) => delete j.resume, /resume/],
    ];
    for (const [what, change, problem] of spoil) {
      const joined = joinedFrame() as Record<string, unknown>;
      change(joined);
      relay = await fakeRelay((ws) => ws.send(JSON.stringify(joined)));
      const error = await rejection(join(relay.url));
      assertSdkError(error, { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame', message: problem });
      assert.ok(!(error instanceof TypeError), what);
      // the SDK closed its socket
      const ws = relay.socket();
      if (ws.readyState !== ws.CLOSED) await once(ws, 'close');
      await relay.close();
      relay = null;
    }
    // not JSON at all, a frame without a type, and a malformed lobby frame, during the handshake
    for (const frame of ['{"type":"joined",', '{"kind":"welcome"}', '{"type":"lobby","ttl":"soon"}']) {
      relay = await fakeRelay((ws) => ws.send(frame));
      assertSdkError(await rejection(join(relay.url)), { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame' });
      await relay.close();
      relay = null;
    }
    // a join-error with a code this SDK does not know keeps it
    relay = await fakeRelay((ws) => ws.send(JSON.stringify({ type: 'join-error', error: { code: 'ROOM_FROZEN', kind: 'State', message: 'frozen' } })));
    assertSdkError(await rejection(join(relay.url)), { kind: 'State', code: 'ROOM_FROZEN', message: /frozen/ });
    // a malformed join-error is a malformed frame
    await relay.close();
    relay = await fakeRelay((ws) => ws.send(JSON.stringify({ type: 'join-error', error: 'nope' })));
    assertSdkError(await rejection(join(relay.url)), { kind: 'Network', code: 'INTERNAL_ERROR', reason: 'bad-frame', message: /join-error/ });
  });
});

/**
 * SDKs and relays of neighbouring versions speak protocol version 1 to each other: what one
 * side does not know of the other is left out or ignored, never a failed join or a room error.
 */
describe('server frames: relays of neighbouring versions', () => {
  const uncaught: unknown[] = [];
  const spy = (error: unknown) => uncaught.push(error);
  let relay: FakeRelay | null = null;
  const errorsOf = (room: Room) => {
    const errors: SdkError[] = [];
    room.on('error', ({ error }) => errors.push(error));
    return errors;
  };

  before(() => process.on('uncaughtException', spy));
  after(() => process.off('uncaughtException', spy));
  afterEach(async () => {
    await relay?.close();
    relay = null;
    assert.deepEqual(uncaught, [], 'no uncaught exception');
  });

  it("an older relay's whiteboard info (maxBytes a string) is left out: the join, start() and output-changed work", async () => {
    const older = joinedFrame();
    (older.outputs as Record<string, unknown>).whiteboard = { state: 'active', by: 'a', info: { maxBytes: '65536' } };
    relay = await fakeRelay((ws) => ws.send(JSON.stringify(older)));
    const room = await join(relay.url);
    const errors = errorsOf(room);
    assert.equal(room.whiteboard.state, 'active');
    assert.deepEqual(room.whiteboard.status, { state: 'active', by: 'a' });
    assert.equal(room.whiteboard.info, undefined);
    const ws = relay.socket();

    const started = room.whiteboard.start();
    const request = await relay.nextRequest();
    assert.equal(request.method, 'output.start');
    ws.send(JSON.stringify({ type: 'response', id: request.id, result: { state: 'active', by: 'a', info: { maxBytes: '65536' } } }));
    assert.deepEqual(await started, { state: 'active', by: 'a' });

    const changed = nextEvent(room, 'output-changed');
    ws.send(JSON.stringify({ type: 'event', name: 'output-changed', data: { output: 'whiteboard', state: 'stopping', by: 'a', info: { maxBytes: '65536' } } }));
    assert.deepEqual(await changed, { output: 'whiteboard', state: 'stopping', by: 'a' });
    assert.equal(room.whiteboard.state, 'stopping');
    assert.deepEqual(errors, []);
  });

  it("a newer relay's sources, track kinds, outputs, states and outcomes are left out or ignored, silently", async () => {
    const newer = joinedFrame();
    newer.self.grant.canPublishSources = ['camera', 'hologram', 'microphone'];
    newer.participants = [{ id: 'b', name: 'Bob', joinedAt: 1, tracks: [{ source: 'hologram', kind: 'video', muted: false }, { source: 'microphone', kind: 'audio', muted: true }, { source: 'screen', kind: 'depth', muted: false }] }];
    (newer.outputs as Record<string, unknown>).hologram = { state: 'active' };
    relay = await fakeRelay((ws) => ws.send(JSON.stringify(newer)));
    const room = await Sdk.join({ url: relay.url, token: token(), reconnect: false, heartbeatMs: 60_000, timeoutMs: 3000, autoSubscribe: false });
    const errors = errorsOf(room);
    assert.deepEqual(room.localParticipant.grant.canPublishSources, ['camera', 'microphone']);
    assert.deepEqual([...room.remoteParticipants.get('b')!.tracks.keys()], ['microphone']);
    const ws = relay.socket();
    const seen: string[] = [];
    room.on('output-changed', ({ output, state }) => seen.push(`${output} ${state}`));
    room.on('lobby-resolved', ({ outcome }) => seen.push(`lobby ${outcome}`));

    const send = (name: string, data: unknown) => ws.send(JSON.stringify({ type: 'event', name, data }));
    send('participant-joined', { id: 'c', name: 'Cy', joinedAt: 2, tracks: [{ source: 'camera', kind: 'depth', muted: false }, { source: 'camera', kind: 'video', muted: false }] });
    send('track-published', { participantId: 'b', source: 'hologram', kind: 'video', muted: false });
    send('track-published', { participantId: 'b', source: 'camera', kind: 'depth', muted: false });
    send('track-mute', { participantId: 'b', source: 'hologram', muted: true });
    send('track-unpublished', { participantId: 'b', source: 'hologram' });
    send('unpublish-requested', { source: 'hologram', by: 'a' });
    send('lobby-resolved', { participantId: 'w', outcome: 'expired', by: 'a' });
    send('output-changed', { output: 'hologram', state: 'stopped' });
    send('output-changed', { output: 'recording', state: 'paused', by: 'a' });
    // then events it knows: still delivered
    send('lobby-resolved', { participantId: 'w', outcome: 'denied', by: 'a' });
    const last = nextEvent(room, 'output-changed');
    send('output-changed', { output: 'recording', state: 'starting', by: 'a' });
    await last;
    assert.deepEqual(seen, ['lobby denied', 'recording starting']);
    assert.deepEqual([...room.remoteParticipants.get('c')!.tracks.keys()], ['camera']);
    assert.deepEqual(errors, [], errors.map((e) => e.message).join('\n'));
  });

  it('a frame of a type this SDK does not know before joined is ignored; the join completes', async () => {
    relay = await fakeRelay((ws) => {
      ws.send('{"type":"welcome","features":["x"]}');
      ws.send('{"type":"__proto__"}');
      ws.send(JSON.stringify(joinedFrame()));
    });
    const room = await join(relay.url);
    assert.equal(room.connected, true);
  });

  it("received errors are normalised before they reach the room's outputs", async () => {
    relay = await fakeRelay();
    const room = await join(relay.url);
    const errors = errorsOf(room);
    const ws = relay.socket();
    const failed = nextEvent(room, 'output-changed');
    // an older relay: no kind; a reason this SDK does not know
    ws.send(JSON.stringify({ type: 'event', name: 'output-changed', data: { output: 'hls', state: 'failed', error: { code: 'INVALID_STATE', message: 'x', reason: 'brand-new' } } }));
    assert.deepEqual((await failed).error, { code: 'INVALID_STATE', kind: 'State', message: 'x' });
    assert.deepEqual(room.hls.status.error, { code: 'INVALID_STATE', kind: 'State', message: 'x' });
    assert.deepEqual(errors, []);
  });
});
