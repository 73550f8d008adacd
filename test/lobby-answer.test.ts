import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawConnect, rawJoin } from './raw.ts';

describe('issue 11: the answer to an entry waits for the joiner token\'s turn', () => {
  let t: TestRelay;
  before(async () => {
    t = await startTestRelay();
  });
  after(async () => {
    await t.close();
  });

  it('a joiner admitted with another while the relay is busy sees the other: what the room sends it before its answer follows the answer', async () => {
    const mod = await rawJoin(t.url, t.token({ roomId: 'adm', participantId: 'mod', grant: { canModerate: true } }), { participantId: 'mod' });
    const ask = (id: string) => t.token({ roomId: 'adm', participantId: id, grant: {}, joinPolicy: { mode: 'ask', ttl: 60 } });
    let aRoom: Awaited<ReturnType<TestRelay['join']>> | null = null;
    const aJoin = t.join({ token: ask('A') }).then((r) => (aRoom = r));
    const b = await rawConnect(t.url);
    b.send({ type: 'join', v: 1, token: ask('B'), participantId: 'B' });
    await b.next((f) => f.type === 'lobby');
    await until(() => t.relay.context.rooms.get('default', 'adm')?.lobby.has('A') === true, 3000, 'A waits');
    const frames = t.relay.context.frames as unknown as object;
    // the relay is busy: work waits its turn (as inside any scheduler slice)
    Object.defineProperty(frames, 'open', { get: () => false, configurable: true });
    try {
      const answer = await mod.request('lobby.admit', { participantIds: ['A', 'B'] });
      assert.equal(answer.error, undefined, JSON.stringify(answer));
      await aJoin;
    } finally {
      delete (frames as { open?: unknown }).open;
    }
    await b.next((f) => f.type === 'joined');
    await new Promise((r) => setTimeout(r, 300));
    const room = aRoom!;
    assert.ok(room.remoteParticipants.has('B'), 'A does not see B, admitted with it');
    mod.ws.close();
    b.ws.close();
  });

  it('a joiner sent more than 1 MiB by its room while its answer waited gets the answer, then is closed 4009 to come back (never a joined frame followed by a gap)', async () => {
    const frames = t.relay.context.frames;
    const original = frames.runInTurn;
    const held: Array<() => void> = [];
    frames.runInTurn = function (this: typeof frames, flow, fn) {
      held.push(() => original.call(this, flow, fn));
    };
    let c: Awaited<ReturnType<typeof rawConnect>>;
    try {
      c = await rawConnect(t.url);
      c.send({ type: 'join', v: 1, token: t.token({ roomId: 'ahead', participantId: 'late', grant: {} }), participantId: 'late' });
      await until(() => held.length === 1, 3000, 'the answer waits for its turn');
    } finally {
      frames.runInTurn = original;
    }
    const member = t.relay.context.rooms.get('default', 'ahead')!.get('late')!;
    const big = Buffer.from(JSON.stringify({ type: 'event', name: 'x', data: 'y'.repeat(600 * 1024) }));
    member.link.sendRaw(big);
    member.link.sendRaw(big);
    held[0]!();
    assert.equal((await c.next((f) => f.type === 'joined')).type, 'joined');
    const closed = await Promise.race([c.closed, new Promise<null>((r) => setTimeout(() => r(null), 5000))]);
    assert.equal(closed?.code, 4009, 'closed to come back');
    assert.equal(c.frames.filter((f) => f.name === 'x').length, 0, 'nothing of what was not kept');
  });

  it('a fault while answering an entry (run from the scheduler, not the frame) refuses that join and takes its member out; the relay goes on', async () => {
    const log = t.relay.context.log;
    const info = log.info;
    const faults = t.relay.context.counters.faults;
    log.info = function (this: typeof log, message, fields) {
      if (message === 'joined' && fields?.participant === 'unlucky') throw new Error('injected');
      return info.call(this, message, fields);
    };
    try {
      const c = await rawConnect(t.url);
      c.send({ type: 'join', v: 1, token: t.token({ roomId: 'fault', participantId: 'unlucky', grant: {} }), participantId: 'unlucky' });
      const closed = await Promise.race([c.closed, new Promise<null>((r) => setTimeout(() => r(null), 5000))]);
      assert.equal(closed?.code, 4001, 'refused and closed');
    } finally {
      log.info = info;
    }
    assert.equal(t.relay.context.counters.faults, faults + 1);
    await until(() => t.relay.context.rooms.get('default', 'fault') === undefined, 3000, 'the member taken out (the room ends with it)');
    const next = await rawJoin(t.url, t.token({ roomId: 'fault', participantId: 'next', grant: {} }), { participantId: 'next' });
    next.ws.close();
  });
});
