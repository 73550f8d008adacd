import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LobbyRequest } from '../src/protocol/control.ts';
import type { Room } from '../src/room.ts';
import { nextEvent, rejectsWith, startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawConnect } from './raw.ts';

describe('lobby (joinPolicy ask)', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay();
  });
  after(() => t.close());

  const moderator = (room: string, id = 'mod') => t.join({ token: t.token({ roomId: room, participantId: id, grant: { canModerate: true } }) });
  const guestToken = (room: string, id: string, extra: Record<string, unknown> = {}) =>
    t.token({ roomId: room, participantId: id, grant: { canPublishData: true }, joinPolicy: { mode: 'ask', ...extra } });
  const requests = (room: Room) => {
    const seen: LobbyRequest[] = [];
    room.on('lobby-request', (r) => seen.push(r));
    return seen;
  };

  it('a guest waits until admitted, then joins with the tier of its own token', async () => {
    const mod = await moderator('l1');
    const seen = requests(mod);
    let waitingInfo: { requestedAt: number; ttl: number } | null = null;
    const joining = t.join({ token: t.token({ roomId: 'l1', participantId: 'guest', isViewer: true, grant: {}, joinPolicy: { mode: 'ask', ttl: 60 } }), name: 'Guest', onWaiting: (info) => (waitingInfo = info) });
    await until(() => seen.length === 1);
    assert.deepEqual({ ...seen[0], requestedAt: 0 }, { participantId: 'guest', name: 'Guest', requestedAt: 0 });
    assert.equal(waitingInfo!.ttl, 60);
    assert.deepEqual(mod.lobby.pending.map((r) => r.participantId), ['guest']);
    let settled = false;
    void joining.then(() => (settled = true), () => (settled = true));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(settled, false, 'still pending');
    assert.equal(mod.participantCount.total, 1, 'a waiting guest is not in the room');
    const resolved = nextEvent(mod, 'lobby-resolved');
    await mod.lobby.admit('guest');
    const guest = await joining;
    assert.equal(guest.localParticipant.id, 'guest');
    assert.equal(guest.localParticipant.isViewer, true, 'its own tier');
    assert.deepEqual(await resolved, { participantId: 'guest', outcome: 'admitted', by: 'mod' });
    assert.deepEqual(mod.lobby.pending, []);
    await until(() => mod.participantCount.viewer === 1);
    await guest.leave();
    await mod.leave();
  });

  it('denied: ENTRY_DENIED of kind Lobby', async () => {
    const mod = await moderator('l2');
    const seen = requests(mod);
    const refused = rejectsWith(t.join({ token: guestToken('l2', 'g') }), 'ENTRY_DENIED');
    await until(() => seen.length === 1);
    await mod.lobby.deny('g');
    const err = await refused;
    assert.equal(err.kind, 'Lobby');
    await mod.leave();
  });

  it('out of time: ENTRY_TIMEOUT after the token ttl (seconds); moderators see timeout', async () => {
    const mod = await moderator('l3');
    const outcomes: string[] = [];
    mod.on('lobby-resolved', ({ outcome }) => outcomes.push(outcome));
    const started = Date.now();
    const err = await rejectsWith(t.join({ token: guestToken('l3', 'slow', { ttl: 1 }) }), 'ENTRY_TIMEOUT');
    assert.equal(err.kind, 'Lobby');
    assert.ok(Date.now() - started >= 950);
    await until(() => outcomes.includes('timeout'));
    await mod.leave();
  });

  it('aborted through the signal: ENTRY_CANCELLED; the request leaves the queue', async () => {
    const mod = await moderator('l4');
    const seen = requests(mod);
    const controller = new AbortController();
    const joining = t.join({ token: guestToken('l4', 'g'), signal: controller.signal });
    await until(() => seen.length === 1);
    const resolved = nextEvent(mod, 'lobby-resolved');
    controller.abort();
    const err = await rejectsWith(joining, 'ENTRY_CANCELLED');
    assert.equal(err.kind, 'Lobby');
    assert.equal((await resolved).outcome, 'cancelled');
    assert.deepEqual(mod.lobby.pending, []);
    await rejectsWith(mod.lobby.admit('g'), 'NOT_FOUND');
    await mod.leave();
  });

  it('a joiner whose socket drops while waiting leaves the queue', async () => {
    const mod = await moderator('l5');
    const seen = requests(mod);
    const raw = await rawConnect(t.url);
    raw.send({ type: 'join', v: 1, token: guestToken('l5', 'dropper'), participantId: 'dropper' });
    const lobbyFrame = await raw.next();
    assert.equal(lobbyFrame.type, 'lobby');
    raw.send({ type: 'request', id: 1, method: 'pubsub.publish', params: { topic: 'x', payload: 1 } });
    // answered under its id (its caller waits for that), as refused: nothing is done from the lobby
    assert.equal(((await raw.next((f) => f.type === 'response' && f.id === 1)).error as { reason: string }).reason, 'waiting');
    await until(() => seen.length === 1);
    const resolved = nextEvent(mod, 'lobby-resolved');
    raw.ws.terminate();
    assert.deepEqual(await resolved, { participantId: 'dropper', outcome: 'cancelled' });
    assert.deepEqual(mod.lobby.pending, []);
    await mod.leave();
  });

  it('a moderator who arrives late sees the queue: pending, and a retroactive lobby-request', async () => {
    const a = t.join({ token: guestToken('l6', 'a'), name: 'A' });
    const b = t.join({ token: guestToken('l6', 'b'), name: 'B' });
    await new Promise((r) => setTimeout(r, 100));
    const mod = await moderator('l6');
    assert.deepEqual(mod.lobby.pending.map((r) => r.name), ['A', 'B']);
    const seen = requests(mod);
    await Promise.resolve();
    assert.deepEqual(seen.map((r) => r.participantId), ['a', 'b'], 'replayed to the late listener');
    const plain = await t.join({ token: t.token({ roomId: 'l6', participantId: 'plain', grant: {} }) });
    assert.deepEqual(plain.lobby.pending, [], 'non-moderators are not told');
    const decisions = await mod.lobby.admit(['a', 'b', 'nobody']);
    assert.deepEqual(decisions.map((d) => [d.participantId, d.ok]), [['a', true], ['b', true], ['nobody', false]]);
    const [ra, rb] = await Promise.all([a, b]);
    assert.equal(ra.id, 'l6');
    await rejectsWith(plain.lobby.admit('x'), 'INVALID_PERMISSIONS');
    for (const r of [ra, rb, plain, mod]) await r.leave();
  });

  it('two moderators admitting the same joiner at once: one wins, the other gets NOT_FOUND', async () => {
    const m1 = await moderator('l7', 'm1');
    const m2 = await moderator('l7', 'm2');
    const seen = requests(m2);
    const joining = t.join({ token: guestToken('l7', 'g') });
    await until(() => seen.length === 1);
    const results = await Promise.allSettled([m1.lobby.admit('g'), m2.lobby.admit('g')]);
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    const lost = results.filter((r) => r.status === 'rejected' && (r.reason as { code: string; reason: string }).code === 'NOT_FOUND');
    assert.equal(ok, 1);
    assert.equal(lost.length, 1);
    assert.equal(((lost[0] as PromiseRejectedResult).reason as { reason: string }).reason, 'not-waiting');
    const guest = await joining;
    for (const r of [guest, m1, m2]) await r.leave();
  });

  it('ending the room turns the waiting away with ENTRY_DENIED', async () => {
    const mod = await moderator('l8');
    const seen = requests(mod);
    const refused = rejectsWith(t.join({ token: guestToken('l8', 'g') }), 'ENTRY_DENIED');
    await until(() => seen.length === 1);
    await mod.end();
    const err = await refused;
    assert.equal(err.reason, 'room-ended');
  });

  it('a guest may wait in a room nobody is in yet, and is admitted when a moderator comes', async () => {
    const joining = t.join({ token: guestToken('l9', 'early') });
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(t.relay.context.rooms.get('default', 'l9'), 'the room exists for its lobby');
    const mod = await moderator('l9');
    await mod.lobby.admit('early');
    const guest = await joining;
    assert.equal(guest.id, 'l9');
    await guest.leave();
    await mod.leave();
  });

  it('a guest admitted while its token\'s arrivals are in debt (join-rate) keeps its place and its ttl: never left waiting with no place', async () => {
    const small = await startTestRelay({ presenceByteBurst: 1024, presenceByteRate: 1024 });
    try {
      const mod = await small.join({ token: small.token({ roomId: 'debt', participantId: 'mod', grant: { canModerate: true } }) });
      const audience = await Promise.all(Array.from({ length: 10 }, () => small.join({ token: small.token({ roomId: 'debt', isViewer: true, grant: {} }) })));
      // one shared guest token (unpinned, ask, a 2 s ttl)
      const guest = small.token({ roomId: 'debt', grant: {}, joinPolicy: { mode: 'ask', ttl: 2 } });
      const seen = requests(mod);
      const first = small.join({ token: guest, participantId: 'g1' });
      await until(() => seen.length === 1);
      await mod.lobby.admit('g1');
      await (await first).leave(); // its arrival and departure, told to eleven, put the token in debt
      const second = small.join({ token: guest, participantId: 'g2' });
      const outcome = second.then(
        () => 'joined',
        (err: { code: string; reason?: string }) => `${err.code}/${err.reason}`,
      );
      await until(() => seen.length === 2);
      const resolved: string[] = [];
      mod.on('lobby-resolved', ({ participantId, outcome: o }) => resolved.push(`${participantId}:${o}`));
      const err = await rejectsWith(mod.lobby.admit('g2'), 'RATE_LIMITED');
      assert.equal(err.reason, 'join-rate');
      assert.deepEqual(mod.lobby.pending.map((r) => r.participantId), ['g2'], 'still waiting, and the moderator still sees it');
      assert.equal(resolved.length, 0, 'nobody was told it was admitted');
      // its ttl still runs: the join ends, it does not hang
      assert.equal(await outcome, 'ENTRY_TIMEOUT/ttl');
      await until(() => resolved.includes('g2:timeout'), 2000, 'the moderator sees it go');
      assert.equal(small.relay.context.rooms.get('default', 'debt')!.lobby.size, 0);
      await Promise.all([mod.leave(), ...audience.map((a) => a.leave())]);
    } finally {
      await small.close();
    }
  });

  it('a token knocking and going away in a loop is refused join-rate after its burst: its moderator is not flooded (5,800 frames a second before)', async () => {
    const mod = await moderator('knock');
    const seen = requests(mod);
    const ask = t.token({ roomId: 'knock', isViewer: true, grant: {}, joinPolicy: { mode: 'ask' } });
    let knocks = 0;
    let refused: Record<string, unknown> | null = null;
    for (let i = 0; i < 200 && !refused; i++) {
      const c = await rawConnect(t.url);
      c.send({ type: 'join', v: 1, token: ask, participantId: `knocker-${i}`, name: 'n'.repeat(256) });
      const answer = await c.next((f) => f.type === 'lobby' || f.type === 'join-error');
      if (answer.type === 'lobby') knocks++;
      else refused = answer.error as Record<string, unknown>;
      c.ws.close();
      await c.closed;
    }
    assert.equal(refused?.code, 'RATE_LIMITED');
    assert.equal(refused?.reason, 'join-rate');
    assert.ok(knocks >= 20 && knocks <= 24, `${knocks} knocks before the refusal (a burst of 20)`);
    await until(() => seen.length === knocks, 2000, 'the moderator saw each knock');
    // another token of the room still asks (the budget is the token's)
    const guest = t.join({ token: guestToken('knock', 'guest') });
    await until(() => seen.some((r) => r.participantId === 'guest'), 2000, 'the other token knocks');
    await mod.lobby.admit('guest');
    await (await guest).leave();
    await mod.leave();
  });

  it('a reconnection the relay answers with the lobby says so (reconnect-waiting), and reconnected follows the admission: the app had no signal while it waited', async () => {
    // a grace shorter than the SDK's first retry: the relay has let the seat go, so the SDK joins again with its token, which asks
    const short = await startTestRelay({ resumeGraceMs: 200 });
    try {
      const mod = await short.join({ token: short.token({ roomId: 'back', participantId: 'mod', grant: { canModerate: true } }) });
      const asks = requests(mod);
      const token = short.token({ roomId: 'back', participantId: 'guest', grant: {}, joinPolicy: { mode: 'ask', ttl: 60 } });
      const joining = short.join({ token, reconnect: { initialDelayMs: 1000, maxDelayMs: 1000, maxTimeMs: 20_000 } });
      await until(() => asks.length === 1);
      await mod.lobby.admit('guest');
      const guest = await joining;
      const order: string[] = [];
      let info: { requestedAt: number; ttl: number } | null = null;
      guest.on('reconnecting', () => order.push('reconnecting'));
      guest.on('reconnect-waiting', (i) => {
        info = i;
        order.push('reconnect-waiting');
      });
      guest.on('reconnected', ({ resumed }) => order.push(`reconnected ${resumed}`));
      (guest as unknown as { connection: { ws: { terminate(): void } } }).connection.ws.terminate();
      await until(() => asks.length === 2, 5000, 'the rejoin knocked again');
      await until(() => order.includes('reconnect-waiting'), 2000, 'the guest was told it waits');
      assert.equal(info!.ttl, 60);
      assert.equal(order.at(-1), 'reconnect-waiting', 'not back before the admission');
      await mod.lobby.admit('guest');
      await until(() => order.includes('reconnected false'), 5000);
      assert.deepEqual(order, ['reconnecting', 'reconnect-waiting', 'reconnected false']);
      // once more, denied: the session ends with denied (it said connection-lost)
      const ended = nextEvent(guest, 'disconnected', 8000);
      (guest as unknown as { connection: { ws: { terminate(): void } } }).connection.ws.terminate();
      await until(() => asks.length === 3, 5000, 'the rejoin knocked a third time');
      await until(() => order.filter((o) => o === 'reconnect-waiting').length === 2, 2000);
      await mod.lobby.deny('guest');
      assert.deepEqual(await ended, { reason: 'denied' });
      await mod.leave();
    } finally {
      await short.close();
    }
  });
});
