import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startRelay } from '../relay/server.ts';
import type { Room } from '../src/room.ts';
import { Sdk } from '../src/sdk.ts';
import { nextEvent, rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawConnect } from './raw.ts';

/** Cut a client's socket as a network would: no closing handshake (the relay sees 1006). */
function drop(room: Room): void {
  (room as unknown as { connection: { ws: { terminate(): void } } }).connection.ws.terminate();
}

const FAST = { initialDelayMs: 20, maxDelayMs: 100, maxTimeMs: 5000 };
const DATA = { canPublishData: true, canSubscribeData: true } as const;

describe('resume after a dropped connection', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay({ resumeGraceMs: 3000, tokenLeeway: 0 });
  });
  after(() => t.close());
  const join = (room: string, id: string, extra: Record<string, unknown> = {}) =>
    t.join({ token: t.token({ roomId: room, participantId: id, grant: DATA, ...extra }), reconnect: FAST });

  it('resumes the same session: others see nothing, joins meanwhile are delivered once, subscriptions go on', async () => {
    const observer = await join('r1', 'observer');
    const events: string[] = [];
    observer.on('participant-joined', ({ participant }) => events.push(`+${participant.id}`));
    observer.on('participant-left', ({ participant }) => events.push(`-${participant.id}`));
    const a = await join('r1', 'a');
    const seen: string[] = [];
    a.on('participant-joined', ({ participant }) => seen.push(`+${participant.id}`));
    a.on('participant-left', ({ participant }) => seen.push(`-${participant.id}`));
    const got: unknown[] = [];
    await a.pubsub.subscribe('news', (m) => got.push(m.payload));
    const leaver = await join('r1', 'leaver');
    await until(() => seen.includes('+leaver'));
    const states: string[] = [];
    a.on('reconnecting', () => states.push('reconnecting'));
    const back = nextEvent(a, 'reconnected');
    drop(a);
    // while a is away: someone joins, someone leaves
    const newcomer = await join('r1', 'newcomer');
    await leaver.leave();
    assert.deepEqual(await back, { resumed: true });
    assert.equal(states[0], 'reconnecting');
    assert.deepEqual(seen.slice(0, 2), ['+observer', '+leaver']);
    // a gap's joins and leaves come from a diff of the relay's view: each exactly once, leaves first
    assert.deepEqual(seen.slice(2), ['-leaver', '+newcomer'], 'each join and leave of the gap delivered exactly once');
    assert.deepEqual([...a.remoteParticipants.keys()].sort(), ['newcomer', 'observer']);
    assert.deepEqual(a.participantCount, { speaker: 3, viewer: 0, total: 3 });
    assert.equal(a.connected, true);
    assert.deepEqual(events.filter((e) => e.endsWith('a')), ['+a'], 'the observer never saw a leave');
    await observer.pubsub.publish('news', 'after');
    await until(() => got.includes('after'), 2000, 'the subscription went on');
    for (const r of [observer, a, newcomer]) await r.leave();
  });

  it('calls made while reconnecting wait and complete; a call in flight at the drop fails with CONNECTION_LOST', async () => {
    const a = await join('r2', 'a');
    const inFlight = a.getParticipants({ tier: 'speaker' });
    drop(a);
    await rejectsWith(inFlight, 'CONNECTION_LOST');
    await nextEvent(a, 'reconnecting').catch(() => undefined);
    const waiting = a.getParticipants({ tier: 'speaker' });
    const page = await waiting;
    assert.deepEqual(page.participants.map((p) => p.id), ['a']);
    await a.leave();
  });

  it('an expired join token does not end a live session', async () => {
    // two seconds: `iat` is whole seconds, so a one-second token minted late in a second could
    // expire before its first join (CI saw it once)
    const a = await t.join({ token: t.token({ roomId: 'r3', participantId: 'a', grant: {}, ttl: 2 }), reconnect: FAST });
    await new Promise((r) => setTimeout(r, 2300));
    await rejectsWith(t.join({ token: t.token({ roomId: 'r3', grant: {}, ttl: 2, now: Date.now() / 1000 - 2.3 }) }), 'INVALID_TOKEN');
    const back = nextEvent(a, 'reconnected');
    drop(a);
    assert.deepEqual(await back, { resumed: true });
    await a.leave();
  });

  it('a participant removed while away cannot come back through resume', async () => {
    const mod = await join('r4', 'mod', { grant: { canModerate: true } });
    const a = await t.join({ token: t.token({ roomId: 'r4', participantId: 'a', grant: {} }), reconnect: { initialDelayMs: 400, maxTimeMs: 3000 } });
    const gone = nextEvent(a, 'disconnected');
    drop(a);
    const { AwayLink } = await import('../relay/seats.ts');
    await until(() => t.relay.context.rooms.get('default', 'r4')?.get('a')?.link instanceof AwayLink, 2000, 'a is away');
    await mod.remove('a');
    assert.deepEqual(await gone, { reason: 'removed' });
    await mod.leave();
  });

  it('a revoked API key cannot resume', async () => {
    const own = await startTestRelay({ resumeGraceMs: 3000 });
    try {
      const a = await own.join({ token: own.token({ roomId: 'r5', grant: {} }), reconnect: { initialDelayMs: 300, maxTimeMs: 2000 } });
      const gone = nextEvent(a, 'disconnected', 5000);
      drop(a);
      own.keys.replace({}, ['test-key']);
      assert.deepEqual(await gone, { reason: 'connection-lost' });
    } finally {
      await own.close();
    }
  });

  it('a resume refused for a revoked key ends the old connection too, if it still looked open (it stayed, answered NOT_CONNECTED)', async () => {
    const own = await startTestRelay();
    try {
      const first = await rawConnect(own.url);
      first.send({ type: 'join', v: 1, token: own.token({ roomId: 'r5b', grant: {} }), participantId: 'old' });
      const joined = (await first.next((f) => f.type === 'joined')) as { resume: { credential: string } };
      own.keys.replace({}, ['test-key']);
      const second = await rawConnect(own.url);
      second.send({ type: 'resume', v: 1, credential: joined.resume.credential });
      const refused = (await second.next((f) => f.type === 'join-error')) as { error: { code: string } };
      assert.equal(refused.error.code, 'INVALID_API_KEY');
      await Promise.race([first.closed, new Promise((_, reject) => setTimeout(() => reject(new Error('the old connection is still open')), 2000))]);
      second.ws.close();
    } finally {
      await own.close();
    }
  });

  it('a client that took a live link for dead by its heartbeat (a laptop that slept) resumes its seat: its close 4008 (a browser sends it) is not a leave, others see nothing', async () => {
    const observer = await join('r-hb', 'observer');
    const left: string[] = [];
    observer.on('participant-left', ({ participant }) => left.push(participant.id));
    // the relay's side: a close frame of 4008, then a resume
    const first = await rawConnect(t.url);
    first.send({ type: 'join', v: 1, token: t.token({ roomId: 'r-hb', participantId: 'raw', grant: {} }), participantId: 'raw' });
    const joined = (await first.next((f) => f.type === 'joined')) as { resume: { credential: string } };
    first.ws.close(4008, 'heartbeat-timeout');
    await first.closed;
    const second = await rawConnect(t.url);
    second.send({ type: 'resume', v: 1, credential: joined.resume.credential });
    const back = await second.next((f) => f.type === 'joined' || f.type === 'join-error');
    assert.equal(back.type, 'joined', `the seat was held: ${JSON.stringify(back)}`);
    assert.equal(back.resumed, true);
    second.ws.close();
    // the SDK's side: its heartbeat finds nothing heard for long, though the link is up
    const a = await t.join({ token: t.token({ roomId: 'r-hb', participantId: 'sleeper', grant: {} }), heartbeatMs: 300, reconnect: FAST });
    const again = nextEvent(a, 'reconnected');
    (a as unknown as { connection: { lastFrameAt: number } }).connection.lastFrameAt = Date.now() - 60_000;
    assert.deepEqual(await again, { resumed: true });
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(left.filter((id) => id === 'sleeper'), [], 'the observer never saw the sleeper leave');
    await a.leave();
    await observer.leave();
  });

  it('a seat nobody comes back to is given up after the grace period', async () => {
    const short = await startTestRelay({ resumeGraceMs: 300 });
    try {
      const observer = await short.join({ token: short.token({ roomId: 'r6', participantId: 'o', grant: {} }) });
      const a = await short.join({ token: short.token({ roomId: 'r6', participantId: 'a', grant: {} }), reconnect: false });
      await until(() => observer.remoteParticipants.has('a'));
      drop(a);
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(observer.remoteParticipants.has('a'), 'still seated during the grace period');
      await until(() => !observer.remoteParticipants.has('a'), 3000, 'given up after it');
      assert.deepEqual(observer.participantCount, { speaker: 1, viewer: 0, total: 1 });
      await observer.leave();
    } finally {
      await short.close();
    }
  });

  it('seats held for members away are capped by --max-connections, three quarters of them for one token: a token joining and cutting its sockets in a loop holds no more (42,000 past a cap of 1,000 before), and others still resume', async () => {
    const small = await startTestRelay({ maxConnections: 10, resumeGraceMs: 1000 });
    try {
      const viewer = small.token({ roomId: 'drops', isViewer: true, grant: {} });
      for (let i = 0; i < 25; i++) {
        const c = await rawConnect(small.url);
        c.send({ type: 'join', v: 1, token: viewer, participantId: `v${i}` });
        await c.next((f) => f.type === 'joined');
        c.ws.terminate();
        await c.closed;
      }
      await until(() => small.relay.connections === 0, 2000, 'every socket gone');
      assert.equal(small.relay.context.seats.away, 7, 'one token holds three quarters of the seats --max-connections allows');
      assert.equal(small.relay.context.rooms.get('default', 'drops')?.size, 7, 'the others left at once');
      // another token's member whose connection drops still has its seat
      const other = await rawConnect(small.url);
      other.send({ type: 'join', v: 1, token: small.token({ roomId: 'drops', participantId: 'victim', grant: {} }), participantId: 'victim' });
      const joined = (await other.next((f) => f.type === 'joined')) as { resume: { credential: string } };
      other.ws.terminate();
      await other.closed;
      await until(() => small.relay.context.seats.away === 8, 2000, 'the victim held');
      const back = await rawConnect(small.url);
      back.send({ type: 'resume', v: 1, credential: joined.resume.credential });
      assert.equal((await back.next((f) => f.type === 'joined' || f.type === 'join-error')).type, 'joined', 'and resumes');
      back.ws.close();
      await back.closed;
      // given up after the grace period, and counted out
      await until(() => small.relay.context.seats.away === 0, 3000, 'the seats given up');
      assert.equal(small.relay.context.rooms.get('default', 'drops'), undefined);
    } finally {
      await small.close();
    }
  });

  it('a relay restart under a live room of 200: everyone comes back (joining anew), counts exact', async () => {
    const first = await startTestRelay({ countIntervalMs: 50 });
    const port = first.relay.port;
    const keys = first.keys;
    const host = await Sdk.join({ url: first.url, token: first.token({ roomId: 'big', participantId: 'host', grant: {} }), reconnect: { initialDelayMs: 100, maxDelayMs: 300, maxTimeMs: 15_000 } });
    const shared = first.token({ grant: {}, isViewer: true, ttl: 600 });
    const audience = await Promise.all(Array.from({ length: 199 }, () => Sdk.join({ url: first.url, token: shared, roomId: 'big', reconnect: { initialDelayMs: 100, maxDelayMs: 300, maxTimeMs: 15_000 } })));
    const everyone = [host, ...audience];
    await until(() => host.participantCount.total === 200, 3000);
    const reconnected = everyone.map((r) => nextEvent(r, 'reconnected', 15_000));
    await first.relay.close(); // SIGTERM's path: every session gets server-shutdown
    const second = await startRelay({ port, keys, logLevel: 'silent', countIntervalMs: 50, recordingsDir: first.relay.context.config.recordingsDir, hlsDir: first.relay.context.config.hlsDir });
    try {
      const results = await Promise.all(reconnected);
      assert.equal(results.length, 200);
      assert.ok(results.every((r) => r.resumed === false), 'the new relay had no session to resume: each joined anew');
      await until(() => everyone.every((r) => r.participantCount.total === 200), 5000, 'counts exact everywhere');
      assert.deepEqual(host.participantCount, { speaker: 1, viewer: 199, total: 200 });
      assert.equal(new Set(audience.map((r) => r.localParticipant.id)).size, 199);
      await Promise.all(everyone.map((r) => r.leave()));
    } finally {
      await second.close();
      await first.close(); // its relay is closed already: this removes its temporary directory
    }
  });
});
