/**
 * Webhook deliveries: one queue per room, so a room's events arrive in the order they happened
 * (the next is sent once the previous is delivered or given up). A failed attempt is retried
 * with exponential backoff and jitter, for a bounded number of attempts and time. Queues are
 * bounded per room and in total: past a bound the oldest waiting event is dropped (logged and
 * counted). A bounded number of attempts run at once, each with a deadline; pushing an event
 * never waits for anything, so a slow or dead receiver cannot slow the relay.
 *
 * Projects share the relay's bounds fairly, so that one project's receiver cannot cost another
 * project its webhooks: each project has a cap on its attempts in flight, projects take the free
 * slots in turn, and when the relay-wide bound is full the project with the most events waiting
 * loses its oldest (a project's backlog drops its own events, never those of a project with
 * fewer waiting).
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
  /** An event is not tried again when its next attempt would start later than this after it was queued (ms). */
  maxAgeMs: number;
  /** The first retry's delay (ms), doubled at each retry, within ±50 % jitter. */
  baseDelayMs: number;
  /** The longest delay between two attempts (ms), jitter included. */
  maxDelayMs: number;
  /** Events waiting per room. */
  perRoom: number;
  /** Events waiting on the relay, all projects together. */
  total: number;
  /** Attempts in flight at once, all projects together. */
  concurrency: number;
  /** Attempts in flight at once for one project's events. */
  projectConcurrency: number;
}

/** The defaults: 5 attempts within 60 s, 100 events per room, 10,000 in all, 16 at once and 4 of one project. */
export const QUEUE_LIMITS: QueueLimits = Object.freeze({
  maxAttempts: 5,
  maxAgeMs: 60_000,
  baseDelayMs: 1000,
  maxDelayMs: 20_000,
  perRoom: 100,
  total: 10_000,
  concurrency: 16,
  projectConcurrency: 4,
});

/** The time the queues go by: a clock, and timers for retries. */
export interface QueueClock {
  now(): number;
  /** Call `fn` in `ms`, without keeping the process alive; returns what cancels it. */
  later(fn: () => void, ms: number): () => void;
}

/** Wall-clock time and Node's timers. */
export const SYSTEM_CLOCK: QueueClock = Object.freeze({
  now: () => Date.now(),
  later(fn: () => void, ms: number): () => void {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
});

/** What the queues may be given instead of the system's randomness and time (tests). */
export interface QueueDeps {
  /** A number in [0, 1): the jitter of a retry's delay. */
  random?: () => number;
  clock?: QueueClock;
}

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
  readonly room: RoomQueue;
}

interface RoomQueue {
  readonly key: string;
  readonly project: ProjectQueues;
  items: Item[];
  /** `sending`: its head is in flight; `waiting`: for a retry's timer; `ready`: in its project's line for a slot. */
  state: 'idle' | 'ready' | 'sending' | 'waiting';
  cancel?: () => void;
}

interface ProjectQueues {
  readonly name: string;
  /** Its events not yet delivered, given up or dropped, oldest first across its rooms. */
  readonly items: Set<Item>;
  /** Its rooms whose head waits for a slot, in turn. */
  readonly ready: RoomQueue[];
  /** Its room queues (it is forgotten at 0). */
  rooms: number;
  inFlight: number;
  /** In the relay's line of projects waiting for a slot. */
  inLine: boolean;
}

/** The webhook queues of a relay. */
export class WebhookQueues {
  private readonly rooms = new Map<string, RoomQueue>();
  private readonly projects = new Map<string, ProjectQueues>();
  /** Projects with a room ready and an attempt to spare, each once: they take free slots in turn. */
  private readonly line: ProjectQueues[] = [];
  private inFlight = 0;
  private waiting = 0;
  private closed = false;
  private readonly random: () => number;
  private readonly clock: QueueClock;
  readonly stats: WebhookStats = { delivered: 0, failed: 0, dropped: 0 };

  constructor(
    private readonly post: Post,
    private readonly log: Logger,
    private readonly limits: QueueLimits = QUEUE_LIMITS,
    deps: QueueDeps = {},
  ) {
    this.random = deps.random ?? Math.random;
    this.clock = deps.clock ?? SYSTEM_CLOCK;
  }

  /** Events not yet delivered or given up. */
  get queued(): number {
    return this.waiting;
  }

  /** Queue an event of `project` behind the others of its room. */
  push(project: string, room: string, event: Pending): void {
    if (this.closed) return;
    const key = `${project}\u0000${room}`;
    let queue = this.rooms.get(key);
    if (!queue) {
      let owner = this.projects.get(project);
      if (!owner) this.projects.set(project, (owner = { name: project, items: new Set(), ready: [], rooms: 0, inFlight: 0, inLine: false }));
      owner.rooms++;
      this.rooms.set(key, (queue = { key, project: owner, items: [], state: 'idle' }));
    }
    const roomFull = queue.items.length >= this.limits.perRoom;
    if (roomFull || this.waiting >= this.limits.total) {
      const victim = roomFull ? oldestWaiting(queue.items) : oldestWaiting(this.largest(queue.project).items);
      if (!victim) {
        // everything older is in flight: the newcomer is the one that goes
        this.dropped(project, event.id);
        if (queue.items.length === 0) this.retire(queue);
        return;
      }
      this.drop(victim);
    }
    const item: Item = { ...event, attempts: 0, since: this.clock.now(), room: queue };
    queue.items.push(item);
    queue.project.items.add(item);
    this.waiting++;
    if (queue.state === 'idle') this.enqueue(queue);
  }

  /**
   * Room `room` of `project` has finished, and `started` is the id of its `room-started`: when
   * that event still waits, never attempted (its project's webhooks are backed up), it and every
   * event of the room queued after it are forgotten and true is returned, and the room's
   * `room-finished` is not to be queued: the receiver is not told of a room that opened and
   * closed before it could be (a shared audience token joining fresh rooms and leaving them in a
   * loop filled its project's queue with such rooms, and the project's real events were dropped
   * to make room for them). False when its start went out (or was dropped): its end goes too.
   * Events queued before its start (an earlier room of the same name) are kept.
   */
  forgetUnsent(project: string, room: string, started: string): boolean {
    const queue = this.rooms.get(`${project}\u0000${room}`);
    if (!queue) return false;
    const at = queue.items.findIndex((item) => item.id === started);
    // the head may be in flight (or waiting for its retry): it was attempted
    if (at < 0 || queue.items[at]!.attempts > 0) return false;
    const forgotten = queue.items.splice(at);
    for (const item of forgotten) queue.project.items.delete(item);
    this.waiting -= forgotten.length;
    // an emptied queue in its project's line for a slot finds nothing when its turn comes, and retires then
    return true;
  }

  /** Stop: timers cleared, what waits is dropped (and logged), attempts in flight end on their own. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.waiting > 0) this.log.warn('webhooks not delivered at shutdown', { queued: this.waiting });
    for (const queue of this.rooms.values()) queue.cancel?.();
    this.rooms.clear();
    this.projects.clear();
    this.line.length = 0;
  }

  /** The project with the most events waiting; `pusher` unless another has strictly more. */
  private largest(pusher: ProjectQueues): ProjectQueues {
    let most = pusher;
    for (const project of this.projects.values()) if (project.items.size > most.items.size) most = project;
    return most;
  }

  private drop(item: Item): void {
    const { room } = item;
    room.items.splice(room.items.indexOf(item), 1);
    room.project.items.delete(item);
    this.waiting--;
    this.dropped(room.project.name, item.id);
  }

  private dropped(project: string, id: string): void {
    this.stats.dropped++;
    this.log.warn('webhook dropped: its queue is full (is the receiver down?)', { event: id, project, queued: this.waiting });
  }

  private enqueue(queue: RoomQueue): void {
    queue.state = 'ready';
    queue.project.ready.push(queue);
    this.offer(queue.project);
    this.pump();
  }

  /** Put the project in line for a slot if it has a room ready and is under its cap. */
  private offer(project: ProjectQueues): void {
    if (this.closed || project.inLine || project.ready.length === 0 || project.inFlight >= this.limits.projectConcurrency) return;
    project.inLine = true;
    this.line.push(project);
  }

  private pump(): void {
    while (!this.closed && this.inFlight < this.limits.concurrency && this.line.length > 0) {
      const project = this.line.shift()!;
      project.inLine = false;
      this.attempt(project.ready.shift()!);
      this.offer(project);
    }
  }

  private attempt(queue: RoomQueue): void {
    const item = queue.items[0];
    if (!item) return this.idle(queue);
    const authorization = item.authorization();
    if (authorization === null) return this.finish(queue, item, false, 'the project has no active API key to sign it');
    queue.state = 'sending';
    item.attempts++;
    this.inFlight++;
    queue.project.inFlight++;
    this.post(item.url, item.body, authorization).then(
      (outcome) => this.settled(queue, item, outcome),
      (err: unknown) => this.settled(queue, item, { ok: false, why: (err as Error)?.message ?? 'failed' }),
    );
  }

  private settled(queue: RoomQueue, item: Item, outcome: PostOutcome): void {
    this.inFlight--;
    queue.project.inFlight--;
    if (this.closed) return;
    this.offer(queue.project);
    if (outcome.ok) return this.finish(queue, item, true);
    const nominal = Math.min(this.limits.maxDelayMs, this.limits.baseDelayMs * 2 ** (item.attempts - 1));
    const delay = Math.min(this.limits.maxDelayMs, nominal * (0.5 + this.random()));
    if (outcome.permanent || item.attempts >= this.limits.maxAttempts || this.clock.now() + delay - item.since > this.limits.maxAgeMs) {
      return this.finish(queue, item, false, outcome.why);
    }
    this.log.debug('webhook attempt failed, will retry', { event: item.id, attempt: item.attempts, why: outcome.why, retryInMs: Math.round(delay) });
    queue.state = 'waiting';
    queue.cancel = this.clock.later(() => {
      queue.cancel = undefined;
      this.enqueue(queue);
    }, delay);
    this.pump();
  }

  private finish(queue: RoomQueue, item: Item, delivered: boolean, why?: string): void {
    // the head, in flight or about to be: never dropped, so still in its queues
    queue.items.shift();
    queue.project.items.delete(item);
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
    this.retire(queue);
  }

  private retire(queue: RoomQueue): void {
    if (this.rooms.get(queue.key) !== queue) return;
    this.rooms.delete(queue.key);
    if (--queue.project.rooms === 0) this.projects.delete(queue.project.name);
  }
}

/** The oldest of `items` (oldest first) that is not in flight. */
function oldestWaiting(items: Iterable<Item>): Item | undefined {
  for (const item of items) if (!(item.room.state === 'sending' && item.room.items[0] === item)) return item;
  return undefined;
}
