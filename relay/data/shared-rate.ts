import { Fifo } from '../fifo.ts';
import { TokenBucket } from './token-bucket.ts';

/** One waiting for its turn of a {@link SharedRate}. */
export interface RateWaiter {
  /** Its tokens were taken on its behalf: `bytes` of them. */
  granted(bytes: number): void;
}

interface Waiting {
  readonly waiter: RateWaiter;
  readonly bytes: number;
  cancelled: boolean;
}

/** A place in a {@link SharedRate}'s line, to leave it by. */
export interface RateTicket {
  cancel(): void;
}

/**
 * A rate many connections share (a project's domain-wide tokens: what they send is parsed at
 * the project's rate, however many they are), served in turns. One that finds the bucket short,
 * or others already waiting, takes its place in line; one timer serves the line, taking each
 * one's tokens for it in order as they come. So a crowd waiting on the rate costs one timer,
 * not a timer each that wakes to find the tokens taken, and no member of it waits for ever
 * behind luckier ones.
 *
 * A turn is up to `quantum` bytes: the one served keeps it for its next frames as long as it
 * asks again before the next in line could be served. A connection switched away from leaves
 * what it had read past its frame (a piece of the next) waiting in memory for a whole round of
 * the line, long enough for V8 to promote it to the old generation, which only a full
 * collection frees; a frame a turn made a crowd of such leftovers as many bytes as the rate
 * passed. Turns of several frames make them a fraction of it.
 */
export class SharedRate {
  private readonly bucket: TokenBucket;
  private readonly line = new Fifo<Waiting>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** The one whose turn it is, and what is left of its turn (bytes). */
  private holder: RateWaiter | null = null;
  private left = 0;
  /** The holder's next frame, waiting for tokens ahead of the line. */
  private first: Waiting | null = null;

  /**
   * @param quantum the bytes of one turn (at least one frame's: a turn always passes the frame
   *   that starts it)
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
    const cost = this.cost(bytes);
    if (waiter && waiter === this.holder && this.left > 0) {
      if (!this.bucket.take(cost)) return false;
      this.left -= cost;
      return true;
    }
    this.dropCancelled();
    return this.line.length === 0 && !this.first && this.bucket.take(cost);
  }

  /** Wait for `bytes`, in line, or first while `waiter`'s turn lasts; `waiter.granted` is called once they are taken for it. */
  wait(waiter: RateWaiter, bytes: number): RateTicket {
    const waiting: Waiting = { waiter, bytes: this.cost(bytes), cancelled: false };
    if (waiter === this.holder && this.left > 0 && !this.first) this.first = waiting;
    else this.line.push(waiting);
    this.serve();
    return { cancel: () => void (waiting.cancelled = true) };
  }

  /** Give back tokens taken for one that no longer needs them (a connection that closed). */
  refund(bytes: number): void {
    this.bucket.give(bytes);
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.serve();
  }

  /** How many wait (cancelled places included until the line reaches them). */
  get waiting(): number {
    return this.line.length;
  }

  /** A frame larger than the burst costs the whole burst: otherwise it could never pass. */
  private cost(bytes: number): number {
    return Math.min(bytes, this.burst);
  }

  private dropCancelled(): void {
    if (this.first?.cancelled) this.first = null;
    while (this.line.peek()?.cancelled) this.line.shift();
  }

  private serve(): void {
    if (this.timer) return;
    for (;;) {
      this.dropCancelled();
      const head = this.first ?? this.line.peek();
      if (!head) return;
      const ms = this.bucket.msUntilToken(head.bytes);
      if (ms > 0) {
        this.timer = setTimeout(() => {
          this.timer = null;
          this.serve();
        }, Math.max(1, Math.ceil(ms)));
        return;
      }
      this.bucket.take(head.bytes);
      if (head === this.first) {
        this.first = null;
        this.left -= head.bytes;
      } else {
        this.line.shift();
        this.holder = head.waiter;
        this.left = this.quantum - head.bytes;
      }
      head.waiter.granted(head.bytes);
    }
  }
}
