/**
 * Issue 14: connections reach rooms through the room seam, which answers asynchronously (at once
 * in memory, later across nodes). What a connection does while its entry is under way, and
 * what happens when the seam is slow or fails, must not depend on which seam it is.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PROTOCOL_VERSION } from '../src/protocol/messages.ts';
import { LocalSeam } from '../relay/local-seam.ts';
import type { RoomSeam } from '../relay/seam.ts';
import type { RelayContext } from '../relay/context.ts';
import { startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawConnect, rawJoin } from './raw.ts';

const joinFrame = (token: string, participantId: string) => ({ type: 'join', v: PROTOCOL_VERSION, token, participantId });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A seam in front of the local one that answers `delayMs` later, or fails while `failing`. */
function slowSeam(delayMs: number, state: { failing: boolean }) {
  return (context: RelayContext): RoomSeam => {
    const local = new LocalSeam(context);
    const later = async <T>(fn: () => Promise<T>): Promise<T> => {
      await sleep(delayMs);
      if (state.failing) throw new Error('the seam is down');
      return fn();
    };
    return {
      enter: (verdict, link) => later(() => local.enter(verdict, link)),
      wait: (verdict, joiner) => later(() => local.wait(verdict, joiner)),
      resume: (frame, link) => later(() => local.resume(frame, link)),
    };
  };
}

describe('issue 14: the room seam', () => {
  let t: TestRelay;
  const state = { failing: false };
  before(async () => {
    t = await startTestRelay({ seam: slowSeam(150, state) });
  });
  after(() => t.close());

  it('requests sent right behind the join frame are answered after `joined`, in order', async () => {
    const c = await rawConnect(t.url);
    const order: unknown[] = [];
    c.ws.on('message', (data) => {
      const f = JSON.parse(String(data)) as { type: string; id?: number };
      if (f.type === 'joined' || f.type === 'response') order.push(f.id ?? f.type);
    });
    c.send(joinFrame(t.token({ roomId: 'early', participantId: 'a', grant: { canPublishData: true } }), 'a'));
    for (let id = 1; id <= 3; id++) c.send({ type: 'request', id, method: 'pubsub.subscribe', params: { topic: `t${id}` } });
    const joined = await c.next((f) => f.type === 'joined');
    assert.equal(joined.roomId, 'early');
    const answers = [await c.next((f) => f.type === 'response'), await c.next((f) => f.type === 'response'), await c.next((f) => f.type === 'response')];
    assert.deepEqual(answers.map((a) => a.id), [1, 2, 3]);
    for (const a of answers) assert.ok(a.result, JSON.stringify(a));
    assert.deepEqual(order, ['joined', 1, 2, 3]);
    c.ws.close();
  });

  it('more than 16 frames before the answer: the rest are refused under their ids, the join goes on', async () => {
    const c = await rawConnect(t.url);
    c.send(joinFrame(t.token({ roomId: 'early-many', participantId: 'a', grant: {} }), 'a'));
    for (let id = 1; id <= 20; id++) c.send({ type: 'request', id, method: 'participants.list', params: { tier: 'speaker' } });
    await c.next((f) => f.type === 'joined');
    // the first 16 are held and run once the member is in; the rest are refused under their ids
    for (let id = 1; id <= 20; id++) {
      const answer = await c.next((f) => f.type === 'response' && f.id === id);
      if (id <= 16) assert.ok(answer.result, `request ${id} ran`);
      else assert.deepEqual([(answer.error as { code: string }).code, (answer.error as { reason: string }).reason], ['INVALID_STATE', 'waiting'], `request ${id} refused`);
    }
    c.ws.close();
  });

  it('a joiner whose socket closes before the seam answers does not stay in the room', async () => {
    const c = await rawConnect(t.url);
    c.send(joinFrame(t.token({ roomId: 'gone', participantId: 'ghost', grant: {} }), 'ghost'));
    await sleep(20);
    c.ws.terminate();
    await sleep(300);
    assert.equal(t.relay.context.rooms.get('default', 'gone'), undefined, 'the room it was entering is not kept');
    const other = await rawJoin(t.url, t.token({ roomId: 'gone', participantId: 'b', grant: {} }), { participantId: 'b' });
    const list = await other.request('participants.list', { tier: 'speaker' });
    assert.deepEqual((list.result as { participants: Array<{ id: string }> }).participants.map((p) => p.id), ['b']);
    other.ws.close();
  });

  it('a resume whose socket closes before the seam answers: the member leaves, and its identity can join again', async () => {
    const c = await rawConnect(t.url);
    c.send(joinFrame(t.token({ roomId: 'resume-gone', grant: {} }), 'r'));
    const joined = (await c.next((f) => f.type === 'joined')) as { resume: { credential: string } };
    c.ws.terminate();
    await until(() => t.relay.context.rooms.get('default', 'resume-gone')?.get('r') !== undefined);
    const again = await rawConnect(t.url);
    again.send({ type: 'resume', v: PROTOCOL_VERSION, credential: joined.resume.credential });
    await sleep(20);
    again.ws.terminate();
    await until(() => t.relay.context.rooms.get('default', 'resume-gone') === undefined, 2000, 'the member left');
    // the unpinned token joins under the same id at once: no seat was left holding it
    const back = await rawJoin(t.url, t.token({ roomId: 'resume-gone', grant: {} }), { participantId: 'r' });
    back.ws.close();
  });

  it('the lobby through a slow seam: a waiting joiner is admitted by a moderator', async () => {
    const mod = await t.join({ token: t.token({ roomId: 'slow-lobby', participantId: 'mod', grant: { canModerate: true } }) });
    const requested = new Promise((resolve) => mod.on('lobby-request', resolve));
    const joining = t.join({ token: t.token({ roomId: 'slow-lobby', participantId: 'guest', grant: {}, joinPolicy: { mode: 'ask', ttl: 60 } }) });
    await requested;
    await mod.lobby.admit('guest');
    const guest = await joining;
    assert.equal(guest.localParticipant.id, 'guest');
    assert.ok(mod.remoteParticipants.has('guest') || (await until(() => mod.remoteParticipants.has('guest')).then(() => true)));
  });

  it('a seam that fails refuses the join with INTERNAL_ERROR, counts a fault, and the relay goes on', async () => {
    const faults = t.relay.context.counters.faults;
    state.failing = true;
    try {
      const c = await rawConnect(t.url);
      c.send(joinFrame(t.token({ roomId: 'down', participantId: 'x', grant: {} }), 'x'));
      const refused = await c.next((f) => f.type === 'join-error');
      assert.equal((refused.error as { code: string }).code, 'INTERNAL_ERROR');
      assert.equal(t.relay.context.counters.faults, faults + 1);
    } finally {
      state.failing = false;
    }
    const ok = await rawJoin(t.url, t.token({ roomId: 'down', participantId: 'y', grant: {} }), { participantId: 'y' });
    ok.ws.close();
  });
});
