import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RecogniserPool, type PoolClock } from './pool.ts';

/** A clock the test moves by hand. */
function manualClock(): PoolClock & { advance(ms: number): void } {
  let now = 0;
  const timers = new Map<number, { at: number; fn: () => void }>();
  let id = 0;
  return {
    now: () => now,
    setTimeout: (fn, ms) => (timers.set(++id, { at: now + ms, fn }), id),
    clearTimeout: (timer) => void timers.delete(timer as number),
    advance(ms) {
      const end = now + ms;
      for (;;) {
        const next = [...timers].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
        if (!next) break;
        timers.delete(next[0]);
        now = next[1].at;
        next[1].fn();
      }
      now = end;
    },
  };
}

const LIMITS = { perRoom: 2, perProject: 3, perRelay: 3, participantSpacingMs: 3000, relayStartEveryMs: 1000 };
/** A place in project `p` (the room ids of these tests are unique across projects). */
const at = (room: string, participant: string, project = 'p') => ({ project, room, participant });

describe('RecogniserPool', () => {
  it('caps recognisers per room and per relay; a freed place goes to the first waiting', () => {
    const clock = manualClock();
    const pool = new RecogniserPool(LIMITS, clock);
    const releases = new Map<string, () => void>();
    const ask = (room: string, who: string) => pool.request(at(room, who), (release) => releases.set(`${room}/${who}`, release));
    ask('a', '1');
    ask('a', '2');
    ask('a', '3');
    ask('b', '1');
    ask('b', '2');
    assert.deepEqual([...releases.keys()], ['a/1', 'a/2', 'b/1'], 'two in room a, three in all');
    assert.equal(pool.queued, 2);
    releases.get('a/1')!();
    // the start bucket (three) is spent: the next start waits for its refill
    assert.ok(!releases.has('a/3'));
    clock.advance(1000);
    assert.ok(releases.has('a/3'), 'room a has a place again');
    assert.equal(pool.running, 3);
    releases.get('b/1')!();
    clock.advance(1000);
    assert.ok(releases.has('b/2'));
    assert.equal(pool.queued, 0);
  });

  it('a participant republishing in a loop starts one recogniser per spacing', () => {
    const clock = manualClock();
    const pool = new RecogniserPool(LIMITS, clock);
    let starts = 0;
    const loop = () =>
      pool.request(at('a', 'mallory'), (release) => {
        starts++;
        release();
        loop();
      });
    loop();
    assert.equal(starts, 1);
    clock.advance(9000);
    assert.equal(starts, 4, 'at 0, 3, 6 and 9 s');
  });

  it('relay-wide, starts refill one a second once the bucket is spent', () => {
    const clock = manualClock();
    const pool = new RecogniserPool({ ...LIMITS, perRoom: 100, perProject: 100, perRelay: 3 }, clock);
    let starts = 0;
    for (let i = 0; i < 10; i++) pool.request(at('r', `p${i}`), (release) => (starts++, release()));
    assert.equal(starts, 3, 'the bucket');
    clock.advance(2000);
    assert.equal(starts, 5);
  });

  it('a request withdrawn while waiting never starts', () => {
    const pool = new RecogniserPool({ ...LIMITS, perRoom: 1 }, manualClock());
    const granted: string[] = [];
    const holder = { release: () => {} };
    pool.request(at('a', '1'), (release) => (granted.push('1'), (holder.release = release)));
    const cancel = pool.request(at('a', '2'), () => granted.push('2'));
    cancel();
    holder.release();
    assert.deepEqual(granted, ['1']);
    assert.equal(pool.running, 0);
  });

  it('one project takes at most its share: a microphone of another project gets a place while those of the first wait', () => {
    const pool = new RecogniserPool({ perRoom: 4, perProject: 4, perRelay: 8, participantSpacingMs: 3000, relayStartEveryMs: 1000 }, manualClock());
    const granted: string[] = [];
    // a leaked domain-wide token of project "evil" in three rooms, four microphones each
    for (const room of ['e1', 'e2', 'e3']) for (let i = 0; i < 4; i++) pool.request(at(`evil/${room}`, `m${i}`, 'evil'), () => granted.push(`evil/${room}/m${i}`));
    assert.equal(granted.length, 4, 'half of the relay');
    assert.equal(pool.queued, 8);
    pool.request(at('good/r', 'speaker', 'good'), () => granted.push('good/r/speaker'));
    assert.ok(granted.includes('good/r/speaker'), 'the other project gets one at once');
    assert.equal(pool.running, 5);
  });

  it('a relay of one project gives it every place: the per-project cap is a share between projects', () => {
    let projects = 1;
    const pool = new RecogniserPool({ perRoom: 4, perProject: 4, perRelay: 8, participantSpacingMs: 3000, relayStartEveryMs: 1000 }, manualClock(), () => projects);
    let granted = 0;
    for (const room of ['r1', 'r2', 'r3']) for (let i = 0; i < 4; i++) pool.request(at(room, `m${i}`), () => granted++);
    assert.equal(granted, 8, 'the whole relay for the only project');
    projects = 2;
    pool.request(at('other', 'x', 'q'), () => granted++);
    assert.equal(granted, 8, 'the relay is full: a second project waits for a place like anyone');
  });
});
