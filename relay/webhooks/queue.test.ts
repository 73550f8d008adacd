import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../log.ts';
import type { PostOutcome } from './post.ts';
import { QUEUE_LIMITS, WebhookQueues, type Pending } from './queue.ts';

const log = createLogger('silent');
const event = (id: string): Pending => ({ id, url: 'http://receiver/', body: id, authorization: () => 'Bearer x' });

/** A receiver under the test's control: each attempt waits until the test settles it. */
function controlled() {
  const attempts: Array<{ body: string; settle: (o: PostOutcome) => void }> = [];
  const post = (_url: string, body: string) => new Promise<PostOutcome>((settle) => attempts.push({ body, settle }));
  return { attempts, post };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setTimeout(r, 2));
  assert.ok(check(), 'condition reached');
}

describe('webhook queues', () => {
  it('a room sends its next event only after the previous one is delivered; other rooms do not wait', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log, { ...QUEUE_LIMITS, baseDelayMs: 1, maxDelayMs: 2 });
    q.push('a', event('a1'));
    q.push('a', event('a2'));
    q.push('b', event('b1'));
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
    q.push('a', event('a1'));
    q.push('a', event('a2'));
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
    q.push('a', event('a1'));
    r.attempts[0]!.settle({ ok: false, why: 'private', permanent: true });
    await until(() => q.queued === 0);
    assert.equal(r.attempts.length, 1);
    assert.equal(q.stats.failed, 1);
    q.close();
  });

  it('a full room queue drops its oldest waiting event, never the one in flight; the relay-wide bound too', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log, { ...QUEUE_LIMITS, perRoom: 3, total: 4 });
    for (const id of ['a1', 'a2', 'a3', 'a4', 'a5']) q.push('a', event(id));
    assert.equal(q.queued, 3);
    assert.equal(q.stats.dropped, 2);
    q.push('b', event('b1'));
    q.push('b', event('b2'));
    assert.equal(q.queued, 4, 'the relay-wide bound');
    r.attempts[0]!.settle({ ok: true });
    await until(() => r.attempts.filter((a) => a.body.startsWith('a')).length === 2);
    assert.deepEqual(r.attempts.map((a) => a.body), ['a1', 'b1', 'a4']);
    q.close();
  });

  it('an event that can no longer be signed (no active key) is given up without an attempt', async () => {
    const r = controlled();
    const q = new WebhookQueues(r.post, log);
    q.push('a', { ...event('a1'), authorization: () => null });
    assert.equal(r.attempts.length, 0);
    assert.equal(q.stats.failed, 1);
    assert.equal(q.queued, 0);
    q.close();
  });
});
