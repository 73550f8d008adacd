import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../log.ts';
import type { PostOutcome } from './post.ts';
import { QUEUE_LIMITS, WebhookQueues, type Pending, type QueueClock } from './queue.ts';

const log = createLogger('silent');
const event = (id: string, url = 'http://receiver/'): Pending => ({ id, url, body: id, authorization: () => 'Bearer x' });

/** A receiver under the test's control: each attempt waits until the test settles it. */
function controlled() {
  const attempts: Array<{ url: string; body: string; settle: (o: PostOutcome) => void }> = [];
  const post = (url: string, body: string) => new Promise<PostOutcome>((settle) => attempts.push({ url, body, settle }));
  return { attempts, post };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setTimeout(r, 2));
  assert.ok(check(), 'condition reached');
}

/** Lets settled attempts' callbacks run. */
const flush = () => new Promise<void>((r) => setImmediate(r));

/** A clock that moves only when the test says: timers fire in order as it advances. */
function fakeClock() {
  let now = 0;
  const timers: Array<{ at: number; fn: () => void; live: boolean }> = [];
  const delays: number[] = [];
  const clock: QueueClock = {
    now: () => now,
    later(fn, ms) {
      const timer = { at: now + ms, fn, live: true };
      timers.push(timer);
      delays.push(ms);
      return () => void (timer.live = false);
    },
  };
  return {
    clock,
    /** Every delay asked of `later`, in order. */
    delays,
    get now() {
      return now;
    },
    pending: () => timers.filter((t) => t.live).length,
    async advance(ms: number): Promise<void> {
      const end = now + ms;
      for (;;) {
        const next = timers.filter((t) => t.live && t.at <= end).sort((a, b) => a.at - b.at)[0];
        if (!next) break;
        now = next.at;
        next.live = false;
        next.fn();
        await flush();
      }
      now = end;
    },
  };
}

/** A receiver that answers every attempt at once with a 503, noting when each came. */
function refusing(time: { now: number }) {
  const at: number[] = [];
  const post = () => {
    at.push(time.now);
    return Promise.resolve<PostOutcome>({ ok: false, why: 'answered 503' });
  };
  return { at, post };
}

describe('webhook queues', () => {
  it('a room sends its next event only after the previous one is delivered; other rooms do not wait', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log, { ...QUEUE_LIMITS, baseDelayMs: 1, maxDelayMs: 2 });
    q.push('p', 'a', event('a1'));
    q.push('p', 'a', event('a2'));
    q.push('p', 'b', event('b1'));
    assert.deepEqual(r.attempts.map((a) => a.body), ['a1', 'b1']);
    r.attempts[0]!.settle({ ok: true });
    await until(() => r.attempts.length === 3);
    assert.equal(r.attempts[2]!.body, 'a2');
    r.attempts[1]!.settle({ ok: true });
    r.attempts[2]!.settle({ ok: true });
    await until(() => q.queued === 0);
    assert.deepEqual(q.stats, { delivered: 3, failed: 0, dropped: 0 });
    q.close();
  });

  it('a failed attempt is retried, the room waiting behind it; after its attempts it is given up and the next goes', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log, { ...QUEUE_LIMITS, maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2 });
    q.push('p', 'a', event('a1'));
    q.push('p', 'a', event('a2'));
    for (let i = 0; i < 3; i++) {
      await until(() => r.attempts.length === i + 1);
      assert.equal(r.attempts[i]!.body, 'a1');
      r.attempts[i]!.settle({ ok: false, why: 'answered 503' });
    }
    await until(() => r.attempts.length === 4);
    assert.equal(r.attempts[3]!.body, 'a2');
    r.attempts[3]!.settle({ ok: true });
    await until(() => q.queued === 0);
    assert.deepEqual(q.stats, { delivered: 1, failed: 1, dropped: 0 });
    q.close();
  });

  it('a permanent failure (a private target) is not retried', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log, { ...QUEUE_LIMITS, baseDelayMs: 1 });
    q.push('p', 'a', event('a1'));
    r.attempts[0]!.settle({ ok: false, why: 'private', permanent: true });
    await until(() => q.queued === 0);
    assert.equal(r.attempts.length, 1);
    assert.equal(q.stats.failed, 1);
    q.close();
  });

  it('a full room queue drops its oldest waiting event, never the one in flight; at the relay-wide bound the project drops its oldest', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log, { ...QUEUE_LIMITS, perRoom: 3, total: 4 });
    for (const id of ['a1', 'a2', 'a3', 'a4', 'a5']) q.push('p', 'a', event(id));
    assert.equal(q.queued, 3);
    assert.equal(q.stats.dropped, 2);
    q.push('p', 'b', event('b1'));
    q.push('p', 'b', event('b2'));
    assert.equal(q.queued, 4, 'the relay-wide bound');
    assert.equal(q.stats.dropped, 3);
    r.attempts[0]!.settle({ ok: true });
    await until(() => r.attempts.length === 3);
    r.attempts[1]!.settle({ ok: true });
    await until(() => r.attempts.length === 4);
    assert.deepEqual(r.attempts.map((a) => a.body), ['a1', 'b1', 'a5', 'b2'], 'a4, the oldest waiting of the project, went');
    q.close();
  });

  it('a room that opened and closed while its project\'s webhooks were backed up is forgotten from its start on; one whose start went out is not; an earlier room of the same name keeps its events', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log, { ...QUEUE_LIMITS, projectConcurrency: 1, total: 50 });
    q.push('p', 'legit', event('legit-start'));
    assert.equal(r.attempts.length, 1, 'in flight: the project\'s one slot');
    q.push('p', 'x', event('x-old-end')); // the end of an earlier room x, waiting
    q.push('p', 'x', event('x-start'));
    q.push('p', 'x', event('x-joined'));
    assert.equal(q.forgetUnsent('p', 'x', 'x-start'), true);
    assert.equal(q.queued, 2, 'legit-start (in flight) and the earlier room\'s end are left');
    assert.equal(q.forgetUnsent('p', 'legit', 'legit-start'), false, 'its start is in flight: its end is to be sent');
    assert.equal(q.forgetUnsent('p', 'nowhere', 'n-start'), false);
    // a shared token opening and closing rooms in a loop: nothing of them stays, nothing real is dropped
    for (let i = 0; i < 1000; i++) {
      q.push('p', `churn-${i}`, event(`c${i}-start`));
      q.push('p', `churn-${i}`, event(`c${i}-joined`));
      assert.equal(q.forgetUnsent('p', `churn-${i}`, `c${i}-start`), true);
    }
    assert.equal(q.queued, 2);
    assert.equal(q.stats.dropped, 0);
    r.attempts[0]!.settle({ ok: true });
    await until(() => r.attempts.length === 2);
    assert.equal(r.attempts[1]!.body, 'x-old-end');
    r.attempts[1]!.settle({ ok: true });
    await until(() => q.queued === 0);
    assert.equal(r.attempts.length, 2, 'nothing of the forgotten rooms was sent');
    q.close();
  });

  it('an event that can no longer be signed (no active key) is given up without an attempt', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log);
    q.push('p', 'a', { ...event('a1'), authorization: () => null });
    assert.equal(r.attempts.length, 0);
    assert.equal(q.stats.failed, 1);
    assert.equal(q.queued, 0);
    q.close();
  });
});

describe('webhook queues: projects do not hurt each other', () => {
  it('a project whose receiver never answers holds at most its cap of the slots; another project\'s events go at once', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log, { ...QUEUE_LIMITS, concurrency: 16, projectConcurrency: 4 });
    for (let room = 0; room < 40; room++) q.push('dead', `r${room}`, event(`d${room}`, 'http://dead/'));
    assert.equal(r.attempts.length, 4, 'the dead project is at its cap, 12 slots free');
    for (const room of ['x', 'y', 'z']) q.push('live', room, event(`l-${room}`, 'http://live/'));
    assert.deepEqual(r.attempts.slice(4).map((a) => a.body), ['l-x', 'l-y', 'l-z'], 'sent without waiting for the dead receiver');
    q.push('live', 'x', event('l-x2', 'http://live/'));
    r.attempts[4]!.settle({ ok: true });
    await until(() => r.attempts.length === 8);
    assert.equal(r.attempts[7]!.body, 'l-x2');
    assert.equal(r.attempts.filter((a) => a.url === 'http://dead/').length, 4);
    q.close();
  });

  it('projects take the free slots in turn: a project with many rooms ready does not go before one that just queued', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log, { ...QUEUE_LIMITS, concurrency: 2, projectConcurrency: 2 });
    for (let room = 0; room < 10; room++) q.push('busy', `r${room}`, event(`b${room}`));
    q.push('quiet', 'r', event('q1'));
    assert.deepEqual(r.attempts.map((a) => a.body), ['b0', 'b1']);
    r.attempts[0]!.settle({ ok: true });
    await until(() => r.attempts.length === 3);
    assert.equal(r.attempts[2]!.body, 'q1', 'the quiet project\'s turn, not the busy project\'s eight other rooms');
    q.close();
  });

  it('at the relay-wide bound a project\'s backlog drops its own oldest events, never those of a project with fewer waiting', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log, { ...QUEUE_LIMITS, total: 10, perRoom: 100 });
    q.push('live', 'a', event('l1'));
    q.push('live', 'a', event('l2'));
    for (let i = 1; i <= 20; i++) q.push('dead', 'b', event(`d${i}`));
    assert.equal(q.queued, 10);
    assert.equal(q.stats.dropped, 12, 'the dead project\'s own');
    q.push('live', 'a', event('l3'));
    assert.equal(q.queued, 10);
    assert.equal(q.stats.dropped, 13);
    assert.deepEqual(r.attempts.map((a) => a.body), ['l1', 'd1']);
    r.attempts[0]!.settle({ ok: true });
    await until(() => r.attempts.length === 3);
    r.attempts[2]!.settle({ ok: true });
    await until(() => r.attempts.length === 4);
    assert.deepEqual(r.attempts.slice(2).map((a) => a.body), ['l2', 'l3'], 'every event of the live project kept');
    r.attempts[1]!.settle({ ok: true });
    await until(() => r.attempts.length === 5);
    assert.equal(r.attempts[4]!.body, 'd15', 'd2 to d14 were the dead project\'s oldest waiting (d14 for l3)');
    q.close();
  });
});

describe('webhook queues: the retry policy', () => {
  /** One event refused at every attempt: the delays the queue chose, each checked to be when the next attempt came. */
  const delaysWith = async (random: number, attempts = 8) => {
    const time = fakeClock();
    const receiver = refusing(time);
    const limits = { ...QUEUE_LIMITS, maxAttempts: attempts, maxAgeMs: 1e9, baseDelayMs: 1000, maxDelayMs: 20_000 };
    const q = new WebhookQueues(receiver.post, log, limits, { random: () => random, clock: time.clock });
    q.push('p', 'a', event('a1'));
    await flush();
    for (let n = 1; n < attempts; n++) {
      assert.equal(time.delays.length, n, `a retry scheduled after attempt ${n}`);
      const delay = time.delays[n - 1]!;
      await time.advance(Math.ceil(delay) - 1);
      assert.equal(receiver.at.length, n, `no attempt before ${delay} ms`);
      await time.advance(1);
      assert.equal(receiver.at.length, n + 1, `attempt ${n + 1} after ${delay} ms`);
    }
    assert.equal(time.pending(), 0, 'nothing scheduled after the last attempt');
    assert.deepEqual(q.stats, { delivered: 0, failed: 1, dropped: 0 });
    q.close();
    return time.delays.map(Math.round);
  };

  it('delays start at the base delay and double up to the longest delay; jitter spans 0.5 to 1.5 times, never past the longest', async () => {
    assert.deepEqual(await delaysWith(0.5), [1000, 2000, 4000, 8000, 16_000, 20_000, 20_000], 'random 0.5: no jitter');
    assert.deepEqual(await delaysWith(0), [500, 1000, 2000, 4000, 8000, 10_000, 10_000], 'random 0: half');
    assert.deepEqual(await delaysWith(1 - Number.EPSILON), [1500, 3000, 6000, 12_000, 20_000, 20_000, 20_000], 'random just under 1: one and a half, capped');
  });

  it('an event is attempted maxAttempts times, then given up, and the room\'s next event goes at once', async () => {
    const time = fakeClock();
    const attempts: string[] = [];
    const post = (_url: string, body: string) => {
      attempts.push(body);
      return Promise.resolve<PostOutcome>(body === 'a1' ? { ok: false, why: 'answered 503' } : { ok: true });
    };
    const q = new WebhookQueues(post, log, { ...QUEUE_LIMITS, maxAttempts: 5 }, { random: () => 0.5, clock: time.clock });
    q.push('p', 'a', event('a1'));
    q.push('p', 'a', event('a2'));
    await flush();
    await time.advance(1000 + 2000 + 4000 + 8000 - 1);
    assert.deepEqual(attempts, ['a1', 'a1', 'a1', 'a1']);
    await time.advance(1);
    await flush();
    assert.deepEqual(attempts, ['a1', 'a1', 'a1', 'a1', 'a1', 'a2'], 'five attempts, then the next event without a delay');
    assert.equal(time.pending(), 0);
    assert.deepEqual(q.stats, { delivered: 1, failed: 1, dropped: 0 });
    q.close();
  });

  it('an event is not tried again when its next attempt would start more than maxAgeMs after it was queued', async () => {
    // attempts at 0, 1, 3, 7 and 15 s (random 0.5); the sixth would be at 31 s
    const run = async (maxAgeMs: number, inFlightMs = 0) => {
      const time = fakeClock();
      const at: number[] = [];
      const post = () => {
        at.push(time.now);
        return new Promise<PostOutcome>((resolve) => time.clock.later(() => resolve({ ok: false, why: 'no answer' }), inFlightMs));
      };
      const q = new WebhookQueues(post, log, { ...QUEUE_LIMITS, maxAttempts: 100, maxAgeMs }, { random: () => 0.5, clock: time.clock });
      q.push('p', 'a', event('a1'));
      await flush();
      await time.advance(60_000);
      await flush();
      assert.equal(q.queued, 0, 'given up');
      assert.equal(q.stats.failed, 1);
      q.close();
      return at;
    };
    assert.deepEqual(await run(15_000), [0, 1000, 3000, 7000, 15_000], 'a retry due exactly at the age limit is made');
    assert.deepEqual(await run(14_999), [0, 1000, 3000, 7000], 'one due past it is not');
    assert.deepEqual(await run(20_000, 2000), [0, 3000, 7000, 13_000], 'the time attempts take counts: 2 s each, the fifth would start at 23 s');
  });
});
