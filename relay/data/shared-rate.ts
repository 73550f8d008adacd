import { Fifo } from '../fifo.ts';
import { TokenBucket } from './token-bucket.ts';

/** One waiting for its turn of a {@link SharedRate}. */
export interface RateWaiter {
  /** Its tokens were taken on its behalf: `bytes` of them (never 0). */
  granted(bytes: number): void;
}

/** A place in a {@link SharedRate}'s line, to leave it by. */
export interface RateTicket {
  cancel(): void;
}

/** One place in a line: a doubly linked list, so that leaving it costs nothing whatever its length. */
interface Waiting {
  waiter: RateWaiter | null;
  readonly bytes: number;
  line: Line | null;
  prev: Waiting | null;
  next: Waiting | null;
}

/** The places of one key (one token's connections), oldest first. */
interface Line {
  readonly key: string;
  head: Waiting | null;
  tail: Waiting | null;
}

/**
 * A rate many connections share (a project's domain-wide tokens: what they send is parsed at
 * the project's rate, however many they are), served in turns. One that finds the bucket short,
 * or others already waiting, takes its place in the line of its key (its token); one timer
 * serves the lines round the ring, a turn each, taking each one's tokens for it as they come. So
 * a crowd waiting on the rate costs one timer, not a timer each that wakes to find the tokens
 * taken; a token's crowd of connections is one place in the ring, as the scheduler makes it one
 * flow (another token of the project waits one turn of it, not one turn of each of its
 * connections); and nobody waits for ever.
 *
 * A turn is up to `quantum` bytes: the one served keeps it for its next frames as long as it
 * asks again before the next could be served. A connection switched away from leaves what it had
 * read past its frame (a piece of the next) waiting in memory for a whole round, long enough for
 * V8 to promote it to the old generation, which only a full collection frees; a frame a turn made
 * a crowd of such leftovers as many bytes as the rate passed. Turns of several frames make them a
 * fraction of it.
 *
 * A frame larger than the burst passes once the bucket is full and leaves it in debt for the
 * rest: the rate holds on average, and no frame waits for ever.
 */
export class SharedRate {
  private readonly bucket: TokenBucket;
  private readonly lines = new Map<string, Line>();
  /** The lines in turn order; a line emptied by its places leaving stays until the ring reaches it. */
  private readonly ring = new Fifo<Line>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** The one whose turn it is, and what is left of its turn (bytes). */
  private holder: RateWaiter | null = null;
  private left = 0;
  /** The holder's next frame, waiting for tokens ahead of the ring. */
  private first: Waiting | null = null;
  /** Places taken, in the lines and first. */
  private count = 0;

  /**
   * @param quantum the bytes of one turn (a turn always passes the frame that starts it)
   */
  constructor(
    rate: number,
    private readonly burst: number,
    now?: () => number,
    private readonly quantum = 0,
  ) {
    this.bucket = new TokenBucket(rate, burst, now);
  }

  /** Take `bytes` for `waiter` now: when it holds the turn, or nobody is waiting, and the bucket has them. */
  take(bytes: number, waiter?: RateWaiter): boolean {
    const cost = Math.max(1, bytes);
    if (waiter && waiter === this.holder && this.left > 0) {
      if (!this.pay(cost)) return false;
      this.left -= cost;
      return true;
    }
    return this.waiting === 0 && this.pay(cost);
  }

  /**
   * Wait for `bytes` in the line of `key` (or first, while `waiter`'s turn lasts); `waiter.granted`
   * is called once they are taken for it.
   */
  wait(waiter: RateWaiter, bytes: number, key = ''): RateTicket {
    const waiting: Waiting = { waiter, bytes: Math.max(1, bytes), line: null, prev: null, next: null };
    this.count++;
    if (waiter === this.holder && this.left > 0 && !this.first) this.first = waiting;
    else this.enter(waiting, key);
    this.serve();
    return { cancel: () => this.leave(waiting) };
  }

  /** Give back tokens taken for one that no longer needs them (a connection that closed). */
  refund(bytes: number): void {
    this.bucket.give(bytes);
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.serve();
  }

  /** How many wait. */
  get waiting(): number {
    return this.count;
  }

  /** Tokens for `cost` if the bucket has them, or its whole burst for a larger one (the rest as debt). */
  private pay(cost: number): boolean {
    if (this.bucket.msUntilToken(Math.min(cost, this.burst)) > 0) return false;
    this.bucket.spend(cost);
    return true;
  }

  private enter(waiting: Waiting, key: string): void {
    let line = this.lines.get(key);
    if (!line) {
      line = { key, head: null, tail: null };
      this.lines.set(key, line);
      this.ring.push(line);
    }
    waiting.line = line;
    waiting.prev = line.tail;
    if (line.tail) line.tail.next = waiting;
    else line.head = waiting;
    line.tail = waiting;
  }

  private unlink(waiting: Waiting): void {
    const line = waiting.line;
    if (!line) return;
    if (waiting.prev) waiting.prev.next = waiting.next;
    else line.head = waiting.next;
    if (waiting.next) waiting.next.prev = waiting.prev;
    else line.tail = waiting.prev;
    waiting.line = waiting.prev = waiting.next = null;
  }

  /** A place given up: out of its line at once (nothing of a closed connection stays reachable from here). */
  private leave(waiting: Waiting): void {
    if (!waiting.waiter) return;
    waiting.waiter = null;
    this.count--;
    if (this.first === waiting) this.first = null;
    this.unlink(waiting);
    // the timer may have been set for it: the next one may need less
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
      this.serve();
    }
  }

  /** The next to serve: the holder's next frame, else the head of the first line round the ring. */
  private next(): Waiting | null {
    if (this.first) return this.first;
    for (;;) {
      const line = this.ring.peek();
      if (!line) return null;
      if (line.head) return line.head;
      this.ring.shift();
      this.lines.delete(line.key);
    }
  }

  private serve(): void {
    if (this.timer) return;
    for (;;) {
      const head = this.next();
      if (!head) return;
      const ms = this.bucket.msUntilToken(Math.min(head.bytes, this.burst));
      if (ms > 0) {
        this.timer = setTimeout(() => {
          this.timer = null;
          this.serve();
        }, Math.max(1, Math.ceil(ms)));
        return;
      }
      this.bucket.spend(head.bytes);
      const waiter = head.waiter!;
      head.waiter = null;
      this.count--;
      if (head === this.first) {
        this.first = null;
        this.left -= head.bytes;
      } else {
        // its line's turn: the line goes round to the back of the ring
        const line = head.line!;
        this.unlink(head);
        this.ring.shift();
        if (line.head) this.ring.push(line);
        else this.lines.delete(line.key);
        this.holder = waiter;
        this.left = this.quantum - head.bytes;
      }
      waiter.granted(head.bytes);
    }
  }
}
