/**
 * Issue 11: a token whose members join and leave in a loop. Every on-stage arrival and departure
 * is an event to every member, and each arrival is a new member with a fresh budget, so the
 * token pays: each departure for itself and its arrival, and its arrivals are refused
 * `join-rate` while that is in debt. A room filling up with one token's members costs nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BROADCAST_EVENT_BYTES } from '../relay/data/fanout-budget.ts';
import { nextEvent, startTestRelay, until, type TestRelay } from './helpers.ts';
import { rawConnect, rawJoin, type RawClient } from './raw.ts';

const VIEWERS = 20;
/** Two arrivals to a room of twenty-odd, and change. */
const BURST = 50 * BROADCAST_EVENT_BYTES;

/** One join of `token`: the `joined` frame's client, or the refusal's error. */
async function tryJoin(url: string, token: string, participantId: string): Promise<RawClient | { code: string; reason: string }> {
  const c = await rawConnect(url);
  c.send({ type: 'join', v: 1, token, participantId });
  const first = await c.next();
  if (first.type === 'joined') return c;
  c.ws.close();
  const error = first.error as { code: string; reason: string };
  return { code: error.code, reason: error.reason };
}

describe('issue 11: arrivals and departures are paid for by their token', () => {
  let t: TestRelay;
  const viewers: RawClient[] = [];
  let watcher: RawClient;
  before(async () => {
    // a second of refill pays for two arrivals: what a test can wait for
    t = await startTestRelay({ presenceByteRate: 2 * 22 * BROADCAST_EVENT_BYTES, presenceByteBurst: BURST });
    watcher = await rawJoin(t.url, t.token({ roomId: 'churn', grant: {} }));
    for (let i = 0; i < VIEWERS; i++) viewers.push(await rawJoin(t.url, t.token({ roomId: 'churn', isViewer: true, grant: {} })));
  });
  after(() => t.close());

  it('a speaker-tier token joining and leaving in a loop is refused join-rate once its announcements are in debt; its departures are still told', async () => {
    const churner = t.token({ roomId: 'churn', grant: {} });
    const outcomes: string[] = [];
    let last: RawClient | null = null;
    for (let i = 0; i < 6; i++) {
      const r = await tryJoin(t.url, churner, `churn-${i}`);
      if ('ws' in r) {
        outcomes.push('joined');
        await r.request('session.leave');
        await r.closed;
        last = r;
      } else outcomes.push(`${r.code}/${r.reason}`);
    }
    // each arrival and departure is told to the 21 others: 42 events a cycle, charged at the departure; 50 in the burst
    assert.deepEqual(outcomes.slice(0, 2), ['joined', 'joined'], 'within the burst, then into debt');
    assert.ok(outcomes.slice(2).every((o) => o === 'RATE_LIMITED/join-rate'), `then refused: ${outcomes.join(', ')}`);
    assert.ok(last, 'some member of the token joined');
    await until(() => watcher.frames.filter((f) => f.name === 'participant-left').length === 2, 2000, 'every departure, in debt or not, was told');
    // the debt is paid back at its rate, and the token's members may come back
    await until(async () => {
      const r = await tryJoin(t.url, churner, `back-${Date.now()}`);
      if (!('ws' in r)) return false;
      r.ws.close();
      return true;
    }, 8000, 'joins again once paid back');
  });

  it('another speaker token, and viewers of any token, are not held back by a token in debt', async () => {
    const churner = t.token({ roomId: 'churn', grant: { canPublishData: true } });
    for (let i = 0; i < 3; i++) {
      const r = await tryJoin(t.url, churner, `debt-${i}`);
      if (!('ws' in r)) continue;
      await r.request('session.leave');
      await r.closed;
    }
    const refused = await tryJoin(t.url, churner, 'debt-x');
    assert.ok(!('ws' in refused) && refused.reason === 'join-rate', 'the churning token is in debt');
    const other = await tryJoin(t.url, t.token({ roomId: 'churn', grant: { canPublishData: true }, participantId: 'someone-else' }), 'someone-else');
    assert.ok('ws' in other, 'another token joins');
    const viewer = await tryJoin(t.url, t.token({ roomId: 'churn', isViewer: true, grant: {} }), 'a-viewer');
    assert.ok('ws' in viewer, 'a viewer is never announced, so never charged');
    other.ws.close();
    viewer.ws.close();
  });

  it('a room filling up with one shared token\'s members costs it nothing; ending the room charges no departure', async () => {
    const shared = t.token({ roomId: 'fill', grant: {} });
    const members: RawClient[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await tryJoin(t.url, shared, `fill-${i}`);
      assert.ok('ws' in r, `arrival ${i} joined: ${JSON.stringify(r)}`);
      members.push(r);
    }
    const moderator = await rawJoin(t.url, t.token({ roomId: 'fill', isViewer: true, grant: { canModerate: true } }));
    await moderator.request('room.end');
    await Promise.all(members.map((m) => m.closed));
    const again = await tryJoin(t.url, shared, 'fill-again');
    assert.ok('ws' in again, `the room's next session admits the token: ${JSON.stringify(again)}`);
    again.ws.close();
  });

  it('the answer to a join (as to a resume and an admission: one path) is the joiner token\'s work, in its flow\'s turn (the whole stage encoded after the turn, charged to nobody: waves of joins held the relay 192 ms a second)', async () => {
    const frames = t.relay.context.frames;
    const original = frames.runInTurn;
    const ran: string[] = [];
    frames.runInTurn = function (this: typeof frames, flow, fn) {
      return original.call(this, flow, () => {
        ran.push(flow.key);
        fn();
      });
    };
    try {
      const c = await rawJoin(t.url, t.token({ roomId: 'answers', participantId: 'joiner', grant: {}, isViewer: true }), { participantId: 'joiner' });
      const member = t.relay.context.rooms.get('default', 'answers')!.get('joiner')!;
      assert.ok(ran.includes(`${member.project}\n${member.tokenKey}`), `flows whose turn ran work: ${JSON.stringify(ran)}`);
      c.ws.close();
    } finally {
      frames.runInTurn = original;
    }
  });

  it('the SDK\'s reconnect waits out join-rate: a session whose seat expired comes back once its token is paid up', async () => {
    // its own departure (told to the 11 others, charged for its arrival too) puts its token in debt for about two seconds
    const own = await startTestRelay({ resumeGraceMs: 200, presenceByteRate: 1024, presenceByteBurst: 1024 });
    try {
      for (let i = 0; i < 11; i++) await rawJoin(own.url, own.token({ roomId: 'back', isViewer: true, grant: {} }));
      const a = await own.join({ token: own.token({ roomId: 'back', grant: {} }), reconnect: { initialDelayMs: 500, maxTimeMs: 10_000 } });
      const back = nextEvent(a, 'reconnected', 12_000);
      (a as unknown as { connection: { ws: { terminate(): void } } }).connection.ws.terminate();
      await back;
      assert.equal(a.connected, true);
      await a.leave();
    } finally {
      await own.close();
    }
  });
});

