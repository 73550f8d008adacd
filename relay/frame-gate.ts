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
 * token for it. Over budget, the socket stops being read (TCP pushes back on the sender) and
 * the frames the WebSocket parser already had are held in order and handled as the budget
 * refills, so a burst costs latency, never correctness. A sender that keeps going past what
 * one read can explain (thousands of frames, megabytes) is flooding and `onFlood` ends it.
 */
export class FrameGate {
  private readonly text: TokenBucket;
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
    this.binary = new TokenBucket(budget.binaryFrameRate, budget.binaryFrameRate * 2);
  }

  /** Frames waiting for budget (for tests and metrics). */
  get holding(): number {
    return this.held.length;
  }

  /** A frame arrived from the parser. */
  push(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    if (this.held.length === 0 && (isBinary ? this.binary : this.text).take()) return this.handle(data, isBinary);
    const bytes = rawLength(data);
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
    const next = this.held[0];
    const bucket = next?.isBinary ? this.binary : this.text;
    this.timer = setTimeout(() => this.drain(), Math.max(1, Math.ceil(bucket.msUntilToken())));
  }

  private drain(): void {
    this.timer = null;
    while (!this.closed && this.held.length > 0) {
      const next = this.held[0]!;
      if (!(next.isBinary ? this.binary : this.text).take()) return this.schedule();
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
