import type { RawData, WebSocket } from 'ws';
import { TokenBucket } from './data/token-bucket.ts';
import type { Budget } from './budget.ts';

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
 * token for it (and, for a text frame, which is parsed as JSON, its bytes). Over budget, the socket stops being read (TCP pushes back on the sender) and
 * the frames the WebSocket parser already had are held in order and handled as the budget
 * refills, so a burst costs latency, never correctness. A sender that keeps going past what
 * one read can explain (thousands of frames, megabytes) is flooding and `onFlood` ends it.
 */
export class FrameGate {
  private readonly text: TokenBucket;
  private readonly textBytes: TokenBucket;
  private readonly binary: TokenBucket;
  private held: Array<{ data: RawData; isBinary: boolean; bytes: number }> = [];
  private heldBytes = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;

  /**
   * @param held the relay-wide budget of held bytes: a connection that would pass it is
   *   treated as flooding, so all connections together never hold more
   */
  constructor(
    private readonly ws: WebSocket,
    budget: FrameBudget,
    private readonly handle: FrameHandler,
    private readonly onFlood: () => void,
    private readonly held_: Budget,
  ) {
    this.text = new TokenBucket(budget.frameRate, budget.frameRate * 2);
    this.textBytes = new TokenBucket(budget.textByteRate, budget.textByteBurst);
    this.binary = new TokenBucket(budget.binaryFrameRate, budget.binaryFrameRate * 2);
  }

  /** Frames waiting for budget (for tests and metrics). */
  get holding(): number {
    return this.held.length;
  }

  /** Take what a frame costs: a frame token, and for text (parsed as JSON) its bytes. */
  private admit(isBinary: boolean, bytes: number): boolean {
    if (isBinary) return this.binary.take();
    if (this.text.msUntilToken() > 0 || this.textBytes.msUntilToken(bytes) > 0) return false;
    return this.text.take() && this.textBytes.take(bytes);
  }

  private wait(isBinary: boolean, bytes: number): number {
    return isBinary ? this.binary.msUntilToken() : Math.max(this.text.msUntilToken(), this.textBytes.msUntilToken(bytes));
  }

  /** A frame arrived from the parser. */
  push(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    const bytes = rawLength(data);
    if (this.held.length === 0 && this.admit(isBinary, bytes)) return this.handle(data, isBinary);
    if (this.held.length >= MAX_HELD_FRAMES || this.heldBytes + bytes > MAX_HELD_BYTES || !this.held_.take(bytes)) {
      this.close();
      this.onFlood();
      return;
    }
    this.held.push({ data, isBinary, bytes });
    this.heldBytes += bytes;
    if (!this.timer) {
      this.ws.pause();
      this.schedule();
    }
  }

  private schedule(): void {
    const next = this.held[0]!;
    this.timer = setTimeout(() => this.drain(), Math.max(1, Math.ceil(this.wait(next.isBinary, next.bytes))));
  }

  private drain(): void {
    this.timer = null;
    while (!this.closed && this.held.length > 0) {
      const next = this.held[0]!;
      if (!this.admit(next.isBinary, next.bytes)) return this.schedule();
      this.held.shift();
      this.heldBytes -= next.bytes;
      this.held_.give(next.bytes);
      this.handle(next.data, next.isBinary);
    }
    if (!this.closed) this.ws.resume();
  }

  /** The connection ended: drop what is held, stop the timer. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.held_.give(this.heldBytes);
    this.held = [];
    this.heldBytes = 0;
  }
}
