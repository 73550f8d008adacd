import { Fifo } from './fifo.ts';
import type { Flow, FrameScheduler, Turn } from './scheduler.ts';
import { frame, type OutFrame } from './ws-frame.ts';

export type { OutFrame };

/** The flow outbound frames are delivered in: never a token's, so no sender pays for its audience. */
export const DELIVERY_FLOW = 'delivery';
/**
 * Its share of the scheduler's time while it has frames to write and other work waits, however
 * many flows flood: sending is what the members who are already in are owed. The rest is shared
 * among the tokens' flows, a quiet member's first. (A weight among the flows, 8, left it a third
 * of the relay against twenty flooding tokens, and every member's frames waited behind the floods.
 * Under the hostile benchmark a room of a thousand's own chat takes a third of the relay's core to
 * write: with 70 % its chat's p99 was 100–132 ms, with 90 % 56–75 ms, with 95 % 66 ms.)
 */
export const DELIVERY_SHARE = 0.9;

/** ...or, against a few busy tokens, what this weight gives it against theirs (8/9 against one). */
export const DELIVERY_WEIGHT = 8;

/**
 * Bytes one connection is given per turn of the delivery. On loopback a write's syscall also runs
 * the receiving side's network stack: a backlog of megabytes written at once stalled the event loop.
 */
export const TURN_BYTES = 128 * 1024;

/** Connections of the light line written in one turn of the scheduler (at most {@link LIGHT_BYTES} each). */
export const LIGHT_BATCH = 8;

/** A connection with at most this many bytes queued waits in the light line (see {@link Delivery}). */
export const LIGHT_BYTES = 8 * 1024;

/**
 * While both lines wait, they take turns of this long each (ms): a small frame waits at most one
 * heavy run, and a thousand members' strokes are not starved by a steady chat (given one
 * connection per light run, a stroke's pass over a 1,000-member room took two seconds).
 */
export const LIGHT_RUN_MS = 2;

/**
 * How long a held copy (see {@link Outbox.hold}) may wait for the next frame to its connection
 * before it is written on its own (ms). Room events that are not urgent (arrivals, departures,
 * counts, which the relay already coalesces over half a second, and outputs' status changes)
 * ride in the same write as the room's next chat line: in a room of a thousand, each event
 * written on its own is a thousand more syscalls, the relay's largest cost.
 */
export const HOLD_MS = 50;

/** The array {@link Outbox} hands a single frame's write in, and what it holds between writes (nothing of a frame stays reachable). */
const NO_FRAME: OutFrame = { header: Buffer.alloc(0), data: new Uint8Array(0), bytes: 0, whole: null };
const ONE: OutFrame[] = [NO_FRAME];

/** Tunables of the delivery (tests give their own clock). */
export interface DeliveryOptions {
  /** Time spent writing at once, per turn of the event loop, before frames wait for the delivery's turns (ms). */
  directMs?: number;
  /** How long held copies wait for company (ms; {@link HOLD_MS}). */
  holdMs?: number;
  now?: () => number;
  defer?: (fn: () => void) => void;
  /** Runs `fn` once, `ms` from now. */
  later?: (fn: () => void, ms: number) => void;
}

/**
 * Frames to one connection, in the order they were sent: written at once when nothing of this
 * connection waits (a copy of a fan-out only while the delivery has time left in this turn of
 * the event loop), else queued behind what waits. So a fan-out to a thousand members is never one long step, and no
 * frame ever overtakes one sent to the same connection before it (a response never overtakes
 * a broadcast, a broadcast never a `joined`).
 */
export class Outbox {
  /** Queued frames, oldest first (a ring that is reused: see {@link Fifo}). */
  private readonly frames = new Fifo<OutFrame>(4);
  private bytes = 0;
  /** Whether it is in the delivery's queue (it belongs to the delivery). */
  scheduled = false;
  /** Whether it is in the delivery's list of outboxes holding copies (it belongs to the delivery). */
  held = false;

  /**
   * @param write writes frames to the connection, in order, at once (one batch: it may cork the
   *   socket), and keeps nothing of the array it is given (it is reused); `own` when they end
   *   with a frame for this connection alone (see {@link send})
   */
  constructor(
    private readonly delivery: Delivery,
    readonly write: (frames: readonly OutFrame[], own: boolean) => void,
  ) {}

  /** Bytes queued here and not yet handed to the socket. */
  get pendingBytes(): number {
    return this.bytes;
  }

  /** Whether frames wait here. */
  get waiting(): boolean {
    return this.frames.length > 0;
  }

  /**
   * @param fanout a copy of a frame sent to many (see {@link Delivery.copy}: written at once
   *   within the turn's allowance, else queued; its time the delivery's either way); otherwise a
   *   frame for this connection alone (an answer, `joined`), written at once when nothing waits,
   *   its time the sender's
   * @param lazy (a copy only) it may wait for the connection's next frame (see {@link hold})
   */
  send(data: Uint8Array, binary: boolean, fanout: boolean, lazy = false): void {
    if (fanout) return this.delivery.copy(this, data, binary, lazy);
    const framed = frame(data, binary);
    if (this.idle) return this.writeNow(framed, true);
    this.queue(framed);
  }

  /** Behind what waits here: written in the delivery's turns. */
  queue(frame: OutFrame): void {
    this.frames.push(frame);
    this.bytes += frame.bytes;
    this.delivery.schedule(this);
  }

  /**
   * A frame that may wait up to {@link HOLD_MS} for the connection's next frame, to go out in
   * the same write; behind what is queued if the connection is in the delivery's queue anyway.
   */
  hold(frame: OutFrame): void {
    if (this.scheduled) return this.queue(frame);
    this.frames.push(frame);
    this.bytes += frame.bytes;
    this.delivery.holdFor(this);
  }

  /**
   * Nothing of this connection waits in the delivery's queue: a new frame may be written at
   * once (behind the held copies, if any, in the same write; unless they are more than a light
   * turn's bytes, which the delivery writes in its turns).
   */
  get idle(): boolean {
    return !this.scheduled && this.bytes <= LIGHT_BYTES;
  }

  /** Write `frame` now, after what is held (see {@link idle}): one write. `own`: see the constructor. */
  writeNow(frame: OutFrame, own = false): void {
    if (!this.waiting) return this.writeOne(frame, own);
    const batch = this.take(this.frames.length);
    batch.push(frame);
    this.bytes = 0;
    this.write(batch, own);
  }

  /** Write everything queued now, in order (before a close frame). */
  flush(): void {
    this.flushSome(Infinity);
  }

  /**
   * Write the oldest queued frames, in order, up to `maxBytes` (at least one frame): one
   * connection's backlog of megabytes is written over several turns, not in one long syscall.
   * True when frames still wait.
   */
  flushSome(maxBytes: number): boolean {
    if (!this.waiting) return false;
    let n = 0;
    let taken = 0;
    for (let next = this.frames.peek(); next && (n === 0 || taken + next.bytes <= maxBytes); next = this.frames.at(n)) {
      taken += next.bytes;
      n++;
    }
    this.bytes -= taken;
    if (n === 1) this.writeOne(this.frames.shift()!, false);
    else this.write(this.take(n), false);
    return this.waiting;
  }

  /** The connection is gone: what waits is dropped. */
  clear(): void {
    this.frames.clear();
    this.bytes = 0;
  }

  /** The `n` oldest queued frames, taken out. */
  private take(n: number): OutFrame[] {
    const batch = new Array<OutFrame>(n);
    for (let i = 0; i < n; i++) batch[i] = this.frames.shift()!;
    return batch;
  }

  /**
   * One frame written on its own, through an array that is reused (a write does not keep the
   * array it is given): most writes are one frame, and each array of them was garbage. The
   * array is every outbox's: a `write` must read it before anything it calls may write to
   * another outbox (none does: it frames the array into the socket at once).
   */
  private writeOne(frame: OutFrame, own: boolean): void {
    ONE[0] = frame;
    try {
      this.write(ONE, own);
    } finally {
      ONE[0] = NO_FRAME;
    }
  }
}

/**
 * The relay's outbound work, sliced: connections with queued frames wait in line and each
 * turn of the scheduler writes the frames of a few small connections or of one large one (each
 * connection's in one batch). The time it takes is the delivery flow's, not the sender's: a
 * speaker's next request does not wait behind its own chat's fan-out, and a fan-out runs
 * between other work instead of in front of it.
 *
 * Two lines: a connection with little queued (a chat message, an event, an answer) goes ahead of
 * connections with a large backlog (a 36 KB stroke fanned out to a thousand members). Order
 * within a connection is untouched; only which connection is written next changes, shortest
 * first, so one large broadcast's pass over the room no longer delays every small frame sent
 * during it. While both lines wait they take runs of {@link LIGHT_RUN_MS} in turn: each gets
 * half of the delivery's time.
 */
export class Delivery implements Turn {
  queued = false;
  readonly flow: Flow;
  private readonly light = new Fifo<Outbox>(1024);
  private readonly heavy = new Fifo<Outbox>(1024);
  /** Outboxes holding copies (see {@link Outbox.hold}), and whether their release is due. */
  private readonly holding = new Fifo<Outbox>(1024);
  private releaseDue = false;
  /** Which line's run it is while both wait, and how long that run has lasted (ms). */
  private lightsRun = true;
  private run = 0;
  private spent = 0;
  private resetting = false;
  private readonly directMs: number;
  private readonly holdMs: number;
  private readonly now: () => number;
  private readonly defer: (fn: () => void) => void;
  private readonly later: (fn: () => void, ms: number) => void;

  constructor(
    private readonly scheduler: FrameScheduler,
    options: DeliveryOptions = {},
  ) {
    this.flow = scheduler.join(DELIVERY_FLOW, DELIVERY_WEIGHT, DELIVERY_SHARE);
    this.directMs = options.directMs ?? 1;
    this.holdMs = options.holdMs ?? HOLD_MS;
    this.now = options.now ?? (() => performance.now());
    this.defer = options.defer ?? ((fn) => void setImmediate(fn));
    this.later = options.later ?? ((fn, ms) => void setTimeout(fn, ms).unref());
  }

  /** Connections with frames waiting (for tests and metrics). */
  get backlog(): number {
    return this.light.length + this.heavy.length;
  }

  /** Whether a frame may be written at once: this turn of the event loop has writing time left. */
  mayWriteNow(): boolean {
    return this.spent < this.directMs;
  }

  /**
   * One copy of a fan-out for `outbox`: written at once while this turn of the event loop has
   * writing time left and nothing of that connection waits, else queued. Either way its time is
   * the audience's, not the sender's: a speaker whose chat reaches a thousand members is charged
   * for its request, not for a thousand copies (or its next request would wait behind every
   * flooder's backlog). A `lazy` copy is held (see {@link Outbox.hold}).
   */
  copy(outbox: Outbox, data: Uint8Array, binary: boolean, lazy = false): void {
    const t0 = this.now();
    const framed = frame(data, binary);
    const direct = !lazy && outbox.idle && this.mayWriteNow();
    if (direct) outbox.writeNow(framed);
    else if (lazy) outbox.hold(framed);
    else outbox.queue(framed);
    const ms = this.now() - t0;
    this.scheduler.excuse(ms);
    if (!direct) return;
    this.spent += ms;
    if (!this.resetting) {
      this.resetting = true;
      this.defer(() => {
        this.resetting = false;
        this.spent = 0;
      });
    }
  }

  /** `outbox` holds copies: unless another frame takes them along first, it gets a turn within {@link HOLD_MS}. */
  holdFor(outbox: Outbox): void {
    if (outbox.held) return;
    outbox.held = true;
    this.holding.push(outbox);
    if (this.releaseDue) return;
    this.releaseDue = true;
    this.later(() => this.release(), this.holdMs);
  }

  private release(): void {
    this.releaseDue = false;
    for (let n = this.holding.length; n > 0; n--) {
      const outbox = this.holding.shift()!;
      outbox.held = false;
      // taken along by a later frame, written in a turn since, or cleared: nothing to do
      if (outbox.waiting && !outbox.scheduled) this.schedule(outbox);
    }
  }

  /** `outbox` has frames waiting: it gets a turn, behind those already waiting in its line. */
  schedule(outbox: Outbox): void {
    if (outbox.scheduled) return;
    outbox.scheduled = true;
    (outbox.pendingBytes <= LIGHT_BYTES ? this.light : this.heavy).push(outbox);
    this.scheduler.enqueue(this);
  }

  /**
   * The scheduler's turn: the frames of up to {@link LIGHT_BATCH} connections of the light line, or
   * of one connection of the heavy line, up to `TURN_BYTES`; a connection with more waits again
   * behind the others.
   */
  step(): boolean {
    const both = this.light.length > 0 && this.heavy.length > 0;
    if (!both) {
      // a line alone is not timed; when the other gets work, the light line's run comes first
      this.lightsRun = true;
      this.run = 0;
    } else if (this.run >= LIGHT_RUN_MS) {
      this.lightsRun = !this.lightsRun;
      this.run = 0;
    }
    const useLight = both ? this.lightsRun : this.light.length > 0;
    const t0 = both ? this.now() : 0;
    if (useLight) {
      // a few connections a turn, each once: a light turn writes a light turn's bytes, and a
      // connection with more (it was light when it got in line and has since been given a
      // stroke) gets in line again after this turn, in the heavy line if that is what it is now
      let more: Outbox[] | null = null;
      for (let n = 0; n < LIGHT_BATCH; n++) {
        const outbox = this.light.shift();
        if (!outbox) break;
        outbox.scheduled = false;
        if (outbox.flushSome(LIGHT_BYTES)) (more ??= []).push(outbox);
      }
      if (more) for (const outbox of more) this.schedule(outbox);
    } else {
      const outbox = this.heavy.shift();
      if (outbox) {
        outbox.scheduled = false;
        if (outbox.flushSome(TURN_BYTES)) this.schedule(outbox);
      }
    }
    if (both) this.run += this.now() - t0;
    return this.backlog > 0;
  }
}
