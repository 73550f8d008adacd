/**
 * Webhook deliveries: one queue per room, so a room's events arrive in the order they happened
 * (the next is sent once the previous is delivered or given up). A failed attempt is retried
 * with exponential backoff and jitter, for a bounded number of attempts and time. Queues are
 * bounded per room and in total: past a bound the oldest waiting event is dropped (logged and
 * counted). A bounded number of attempts run at once, each with a deadline; pushing an event
 * never waits for anything, so a slow or dead receiver cannot slow the relay.
 */
import type { Logger } from '../log.ts';
import type { PostOutcome } from './post.ts';

/** One event waiting to be delivered. */
export interface Pending {
  /** The event's id, for the log. */
  readonly id: string;
  readonly url: string;
  readonly body: string;
  /** The `Authorization` header of an attempt (signed at each attempt), or `null` when it can no longer be signed. */
  authorization(): string | null;
}

/** Sends one attempt. */
export type Post = (url: string, body: string, authorization: string) => Promise<PostOutcome>;

/** The bounds of delivery. */
export interface QueueLimits {
  /** Attempts per event. */
  maxAttempts: number;
  /** An event older than this is not tried again (ms). */
  maxAgeMs: number;
  /** The first retry's delay (ms), doubled at each retry, within ±50 % jitter. */
  baseDelayMs: number;
  /** The longest delay between two attempts (ms). */
  maxDelayMs: number;
  /** Events waiting per room. */
  perRoom: number;
  /** Events waiting on the relay. */
  total: number;
  /** Attempts in flight at once. */
  concurrency: number;
}

/** The defaults: 5 attempts within 60 s, 100 events per room, 10,000 in all, 16 at once. */
export const QUEUE_LIMITS: QueueLimits = Object.freeze({ maxAttempts: 5, maxAgeMs: 60_000, baseDelayMs: 1000, maxDelayMs: 20_000, perRoom: 100, total: 10_000, concurrency: 16 });

/** What the queues have done, for `/metrics`. */
export interface WebhookStats {
  delivered: number;
  /** Given up after their attempts or their time. */
  failed: number;
  /** Dropped from a full queue before any attempt finished them. */
  dropped: number;
}

interface Item extends Pending {
  attempts: number;
  readonly since: number;
}

interface RoomQueue {
  readonly key: string;
  items: Item[];
  /** `sending`: its head is in flight; `waiting`: for a retry's timer; `ready`: in line for a slot. */
  state: 'idle' | 'ready' | 'sending' | 'waiting';
  timer?: NodeJS.Timeout;
}

/** The webhook queues of a relay. */
export class WebhookQueues {
  private readonly queues = new Map<string, RoomQueue>();
  private readonly ready: RoomQueue[] = [];
  private inFlight = 0;
  private waiting = 0;
  private closed = false;
  readonly stats: WebhookStats = { delivered: 0, failed: 0, dropped: 0 };

  constructor(
    private readonly post: Post,
    private readonly log: Logger,
    private readonly limits: QueueLimits = QUEUE_LIMITS,
    private readonly random: () => number = Math.random,
  ) {}

  /** Events not yet delivered or given up. */
  get queued(): number {
    return this.waiting;
  }

  /** Queue an event behind the others of its room (`key`). */
  push(key: string, event: Pending): void {
    if (this.closed) return;
    let queue = this.queues.get(key);
    if (!queue) this.queues.set(key, (queue = { key, items: [], state: 'idle' }));
    if (queue.items.length >= this.limits.perRoom || this.waiting >= this.limits.total) {
      // the head may be in flight: the oldest that is only waiting goes
      const at = queue.state === 'sending' ? 1 : 0;
      const dropped = queue.items.length > at ? queue.items.splice(at, 1)[0]! : event;
      this.stats.dropped++;
      this.log.warn('webhook dropped: its queue is full (is the receiver down?)', { event: dropped.id, queued: this.waiting });
      if (dropped === event) {
        if (queue.items.length === 0) this.queues.delete(key);
        return;
      }
      this.waiting--;
    }
    queue.items.push({ ...event, attempts: 0, since: Date.now() });
    this.waiting++;
    if (queue.state === 'idle') this.enqueue(queue);
  }

  /** Stop: timers cleared, what waits is dropped (and logged), attempts in flight end on their own. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.waiting > 0) this.log.warn('webhooks not delivered at shutdown', { queued: this.waiting });
    for (const queue of this.queues.values()) clearTimeout(queue.timer);
    this.queues.clear();
    this.ready.length = 0;
  }

  private enqueue(queue: RoomQueue): void {
    queue.state = 'ready';
    this.ready.push(queue);
    this.pump();
  }

  private pump(): void {
    while (!this.closed && this.inFlight < this.limits.concurrency && this.ready.length > 0) this.attempt(this.ready.shift()!);
  }

  private attempt(queue: RoomQueue): void {
    const item = queue.items[0];
    if (!item) return this.idle(queue);
    const authorization = item.authorization();
    if (authorization === null) return this.finish(queue, item, false, 'the project has no active API key to sign it');
    queue.state = 'sending';
    item.attempts++;
    this.inFlight++;
    this.post(item.url, item.body, authorization).then(
      (outcome) => this.settled(queue, item, outcome),
      (err: unknown) => this.settled(queue, item, { ok: false, why: (err as Error)?.message ?? 'failed' }),
    );
  }

  private settled(queue: RoomQueue, item: Item, outcome: PostOutcome): void {
    this.inFlight--;
    if (this.closed) return;
    if (outcome.ok) return this.finish(queue, item, true);
    const delay = Math.min(this.limits.maxDelayMs, this.limits.baseDelayMs * 2 ** (item.attempts - 1)) * (0.5 + this.random());
    if (outcome.permanent || item.attempts >= this.limits.maxAttempts || Date.now() + delay - item.since > this.limits.maxAgeMs) {
      return this.finish(queue, item, false, outcome.why);
    }
    this.log.debug('webhook attempt failed, will retry', { event: item.id, attempt: item.attempts, why: outcome.why, retryInMs: Math.round(delay) });
    queue.state = 'waiting';
    queue.timer = setTimeout(() => this.enqueue(queue), delay);
    queue.timer.unref?.();
    this.pump();
  }

  private finish(queue: RoomQueue, item: Item, delivered: boolean, why?: string): void {
    if (queue.items[0] === item) queue.items.shift();
    this.waiting--;
    if (delivered) this.stats.delivered++;
    else {
      this.stats.failed++;
      this.log.warn('webhook given up', { event: item.id, attempts: item.attempts, why });
    }
    if (queue.items.length > 0) this.enqueue(queue);
    else {
      this.idle(queue);
      this.pump();
    }
  }

  private idle(queue: RoomQueue): void {
    queue.state = 'idle';
    if (this.queues.get(queue.key) === queue) this.queues.delete(queue.key);
  }
}
