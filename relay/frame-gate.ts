import type { RawData, WebSocket } from 'ws';
import { TokenBucket } from './data/token-bucket.ts';
import type { RateTicket, RateWaiter, SharedRate } from './data/shared-rate.ts';
import type { Budget } from './budget.ts';
import { FrameScheduler, PRE_AUTH_FLOW, type Flow, type Turn } from './scheduler.ts';

/** What the gate does with a frame it lets through. */
export type FrameHandler = (data: RawData, isBinary: boolean) => void;

/** Budgets of one connection's inbound frames. */
export interface FrameBudget {
  /** Text frames per second (bursts of twice that). */
  frameRate: number;
  /** Binary frames per second (bursts of twice that). */
  binaryFrameRate: number;
  /** Bytes of text frames per second: every one of them is parsed as JSON. */
  textByteRate: number;
  /** ...in a burst (at least the largest text frame read). */
  textByteBurst: number;
}

/** Frames held while a connection is over its budget; past either bound it is flooding. */
const MAX_HELD_FRAMES = 4096;
const MAX_HELD_BYTES = 2 * 1024 * 1024;
/** {@link FrameGate}'s admit: the frame waits its turn of a shared rate. */
const IN_LINE = -1;
const NOT_TRIED = -2;

export function rawLength(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((n, b) => n + b.length, 0);
  return data instanceof ArrayBuffer ? data.byteLength : data.length;
}


/**
 * The frame budget of one connection, enforced: a frame is handled only when the budget has a
 * token for it (and, for a text frame, which is parsed as JSON, its bytes), and, while the relay
 * is busy, only in its flow's turn ({@link FrameScheduler}). Frames that wait are held in order;
 * the socket is not read meanwhile (TCP pushes back on the sender), so a burst costs latency,
 * never correctness. A sender that keeps going past what one read can explain (thousands of
 * frames, megabytes) is flooding and `onFlood` ends it.
 */
export class FrameGate implements Turn, RateWaiter {
  private readonly text: TokenBucket;
  private readonly textBytes: TokenBucket;
  /** Text bytes shared with other connections (a project's domain-wide tokens), if any. */
  private sharedText: SharedRate | null = null;
  /** Its place in the shared rate's line, while the next frame waits for its turn there. */
  private inLine: RateTicket | null = null;
  /** Shared bytes already taken for the next frame (its turn in line came). */
  private prepaid = 0;
  private readonly binary: TokenBucket;
  private held: Array<{ data: RawData; isBinary: boolean; bytes: number }> = [];
  private heldBytes = 0;
  /**
   * How long the flow had been quiet when the first of the held frames arrived (ms; 0 once one of
   * them has been handled): its credit when its turn of a shared rate comes (see `granted`).
   */
  private arrivedQuiet = 0;
  /** Set while the next frame waits for this connection's own budget to refill. */
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  queued = false;
  flow: Flow;

  /**
   * @param heldBudget the relay-wide budget of held bytes: a connection that would pass it is
   *   treated as flooding, so all connections together never hold more
   * @param binaryDebtMs how long until the member has paid for what its binary frames cost
   *   (its fan-out budget): until then its binary frames wait and its socket is not read
   */
  constructor(
    private readonly ws: WebSocket,
    budget: FrameBudget,
    private readonly handle: FrameHandler,
    private readonly onFlood: () => void,
    private readonly heldBudget: Budget,
    private readonly scheduler: FrameScheduler,
    private readonly binaryDebtMs: () => number = () => 0,
  ) {
    this.text = new TokenBucket(budget.frameRate, budget.frameRate * 2);
    this.textBytes = new TokenBucket(budget.textByteRate, budget.textByteBurst);
    this.binary = new TokenBucket(budget.binaryFrameRate, budget.binaryFrameRate * 2);
    this.flow = scheduler.join(PRE_AUTH_FLOW);
  }

  /** Frames waiting (for tests and metrics). */
  get holding(): number {
    return this.held.length;
  }

  /** From now on this connection's frames use the share of `key` (its token, once joined). */
  moveTo(key: string): void {
    if (this.closed || key === this.flow.key) return;
    this.scheduler.leave(this.flow);
    this.flow = this.scheduler.join(key);
  }

  /**
   * From now on this connection's text bytes also spend `rate`, shared with other connections
   * (a project's domain-wide tokens): a crowd of them, each within its own rate, together are
   * parsed at that rate, in turn, the rest waiting unread.
   */
  shareText(rate: SharedRate): void {
    this.sharedText = rate;
  }

  /**
   * Take what a frame costs: a frame token, and for text (parsed as JSON) its bytes, from its
   * own budget and then from the shared rate, if any. Returns 0 when taken, else how long its own
   * budget needs (ms), or {@link IN_LINE} when it waits its turn of the shared rate (its
   * {@link granted} comes then). What is taken is taken whole or not at all.
   */
  private admit(isBinary: boolean, bytes: number): number {
    if (isBinary) {
      const ms = Math.max(this.binaryDebtMs(), this.binary.msUntilToken());
      return ms > 0 || !this.binary.take() ? Math.max(ms, 1) : 0;
    }
    const ms = Math.max(this.text.msUntilToken(), this.textBytes.msUntilToken(bytes));
    if (ms > 0) return ms;
    const shared = this.sharedText;
    if (shared) {
      if (this.inLine) return IN_LINE;
      if (this.prepaid === 0 && !shared.take(bytes, this)) {
        const ticket = shared.wait(this, bytes, this.flow.key);
        // its turn may have come at once: then it is enqueued already, with its bytes prepaid
        if (this.prepaid === 0) this.inLine = ticket;
        return IN_LINE;
      }
      this.prepaid = 0;
    }
    this.text.take();
    this.textBytes.take(bytes);
    return 0;
  }

  /** The shared rate's turn came: its bytes are taken for the frame that waits. */
  granted(bytes: number): void {
    this.inLine = null;
    if (this.closed) return this.sharedText?.refund(bytes);
    this.prepaid = bytes;
    // the wait was the other tokens' use of the rate: the quiet it arrived with is kept
    this.scheduler.enqueue(this, this.arrivedQuiet);
  }

  /** A frame arrived from the parser. */
  push(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    const bytes = rawLength(data);
    let wait = NOT_TRIED;
    if (this.held.length === 0) this.arrivedQuiet = this.scheduler.quietFor(this.flow);
    if (this.held.length === 0 && this.scheduler.open) {
      wait = this.admit(isBinary, bytes);
      if (wait === 0) {
        this.scheduler.runNow(this.flow, () => this.handle(data, isBinary));
        return;
      }
    }
    if (this.held.length >= MAX_HELD_FRAMES || this.heldBytes + bytes > MAX_HELD_BYTES || !this.heldBudget.take(bytes)) {
      this.close();
      this.onFlood();
      return;
    }
    this.held.push({ data, isBinary, bytes });
    this.heldBytes += bytes;
    if (this.held.length === 1) {
      this.ws.pause();
      if (wait > 0) this.sleep(wait);
      else if (wait === NOT_TRIED && !this.timer) this.scheduler.enqueue(this);
    }
  }

  /** Come back to the scheduler in `ms`, when its own budget has what the next frame needs. */
  private sleep(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      // held to its own budget: not quiet, whatever the time it waited
      if (!this.closed) this.scheduler.enqueue(this, 0);
    }, Math.max(1, Math.ceil(ms)));
  }

  /**
   * The scheduler's turn: handle the next frame if the budget allows. Returns whether this
   * connection has more frames its budget allows now.
   */
  step(): boolean {
    if (this.closed) return false;
    const next = this.held[0];
    if (!next) {
      this.ws.resume();
      return false;
    }
    const wait = this.admit(next.isBinary, next.bytes);
    if (wait > 0) this.sleep(wait);
    if (wait !== 0) return false;
    this.held.shift();
    this.heldBytes -= next.bytes;
    this.heldBudget.give(next.bytes);
    this.arrivedQuiet = 0;
    this.handle(next.data, next.isBinary);
    if (this.closed) return false;
    if (this.held.length > 0) return true;
    this.ws.resume();
    return false;
  }

  /**
   * The connection ended: drop what is held, stop the timer, give back its share, and read the
   * socket again: what still comes is dropped, but its closing handshake and its end must be
   * seen, or a connection closed while its frames waited would stay open until ws gives up.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.held.length > 0) this.ws.resume();
    this.scheduler.leave(this.flow);
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.inLine?.cancel();
    this.inLine = null;
    if (this.prepaid > 0) this.sharedText?.refund(this.prepaid);
    this.prepaid = 0;
    this.heldBudget.give(this.heldBytes);
    this.held = [];
    this.heldBytes = 0;
  }
}
