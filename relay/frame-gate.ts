import type { RawData, WebSocket } from 'ws';
import { TokenBucket } from './data/token-bucket.ts';
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
export class FrameGate implements Turn {
  private readonly text: TokenBucket;
  private readonly textBytes: TokenBucket;
  /** Text bytes shared with other connections (a project's domain-wide tokens), if any. */
  private sharedText: TokenBucket | null = null;
  private readonly binary: TokenBucket;
  private held: Array<{ data: RawData; isBinary: boolean; bytes: number }> = [];
  private heldBytes = 0;
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
   * From now on this connection's text bytes also spend `bucket`, shared with other connections
   * (a project's domain-wide tokens): a crowd of them, each within its own rate, together are
   * parsed at that rate, the rest waiting unread.
   */
  shareText(bucket: TokenBucket): void {
    this.sharedText = bucket;
  }

  /** Take what a frame costs: a frame token, and for text (parsed as JSON) its bytes. */
  private admit(isBinary: boolean, bytes: number): boolean {
    if (isBinary) return this.binaryDebtMs() <= 0 && this.binary.take();
    if (this.text.msUntilToken() > 0 || this.textBytes.msUntilToken(bytes) > 0 || (this.sharedText?.msUntilToken(bytes) ?? 0) > 0) return false;
    this.sharedText?.take(bytes);
    return this.text.take() && this.textBytes.take(bytes);
  }

  private wait(isBinary: boolean, bytes: number): number {
    return isBinary ? Math.max(this.binaryDebtMs(), this.binary.msUntilToken()) : Math.max(this.text.msUntilToken(), this.textBytes.msUntilToken(bytes), this.sharedText?.msUntilToken(bytes) ?? 0);
  }

  /** A frame arrived from the parser. */
  push(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    const bytes = rawLength(data);
    if (this.held.length === 0 && this.scheduler.open && this.admit(isBinary, bytes)) {
      this.scheduler.runNow(this.flow, () => this.handle(data, isBinary));
      return;
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
      if (!this.timer) this.scheduler.enqueue(this);
    }
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
    if (!this.admit(next.isBinary, next.bytes)) {
      this.timer = setTimeout(() => {
        this.timer = null;
        if (!this.closed) this.scheduler.enqueue(this);
      }, Math.max(1, Math.ceil(this.wait(next.isBinary, next.bytes))));
      return false;
    }
    this.held.shift();
    this.heldBytes -= next.bytes;
    this.heldBudget.give(next.bytes);
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
    this.heldBudget.give(this.heldBytes);
    this.held = [];
    this.heldBytes = 0;
  }
}
