import type { Socket } from 'node:net';
import type { RawData, WebSocket } from 'ws';
import { CloseCode } from '../src/protocol/codes.ts';
import type { ServerFrame } from '../src/protocol/messages.ts';
import type { RelayContext } from './context.ts';
import type { LogFields } from './log.ts';
import { Outbox, type OutFrame } from './delivery.ts';
import { writeFrames } from './ws-frame.ts';
import { FrameGate } from './frame-gate.ts';
import type { MemberLink } from './rooms/types.ts';
import { UNFINISHED_FREE_BYTES, unfinishedBytes } from './unfinished.ts';

/** Frames up to this many times the frame limit are read and answered PAYLOAD_TOO_LARGE; larger ones close the socket (1009). */
export const OVERSIZE_FACTOR = 4;

/** Before the join, ws's receiver refuses a frame whose header announces more than the join-frame limit. */
export function limitPayload(ws: WebSocket, bytes: number): void {
  const receiver = (ws as unknown as { _receiver?: { _maxPayload?: unknown } })._receiver;
  if (receiver && typeof receiver._maxPayload === 'number') receiver._maxPayload = bytes;
}

/** A text frame's text (decoded from its bytes where they are: `Buffer.from` a Buffer would copy them first). */
export function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  return Buffer.from(data).toString('utf8');
}

/**
 * One WebSocket as the relay holds it, whatever is said on it: what goes out (through its
 * outbox, within its byte caps), what comes in (through its frame gate, within its budgets,
 * and before authentication within the pre-auth byte budget), its heartbeat and its end. What
 * the frames mean is the {@link Session}'s.
 */
export abstract class Connection implements MemberLink {
  /** Whether it has not joined (and is not waiting in a lobby): the pre-auth budget applies. */
  protected abstract get preAuth(): boolean;
  /** Whether it is over: nothing more is sent. */
  protected abstract get over(): boolean;
  /** A frame its budgets let through. */
  protected abstract onFrame(data: RawData, isBinary: boolean): void;
  /** Its socket was refused before it joined (over the pre-auth budget). */
  protected abstract refusedBeforeJoin(): void;
  /** Whom it speaks for, if anyone (for logs). */
  protected abstract get who(): LogFields;
  /** Leave the room (if joined) and close with `code`. */
  abstract close(code: number, reason: string): void;

  protected readonly gate: FrameGate;
  /** What is sent to this connection, in order: a fan-out is delivered in slices. */
  protected readonly outbox: Outbox;
  /** Bytes read from the socket before the join was accepted. */
  private preAuthBytes = 0;
  private readonly countPreAuth: (chunk: Buffer) => void;
  /** Bytes ws holds of its messages still arriving past what a socket holds free, counted in the relay's budget under `token` (once joined or waiting in a lobby). */
  private unfinished = 0;
  private token = '';
  private readonly countUnfinished = () => this.recountUnfinished();
  /** Cleared by each heartbeat, set by each frame and pong. */
  alive = true;
  /**
   * Whether the socket holds this turn's writes for one write at its end: the answers to a
   * connection's frames handled in one turn of the event loop (a member's frames read in one
   * chunk, handled in one slice of the scheduler) go out in one syscall, not one each; a flood
   * of cheap requests cost the relay a syscall per answer, as much as a room of a thousand's chat.
   */
  private corked = false;
  private readonly uncork = () => {
    if (!this.corked) return;
    this.corked = false;
    this.socket.uncork();
  };

  /**
   * Drop the socket now, after handing it what this turn wrote (a destroyed socket discards what
   * a cork still holds: the error and close frames written just before a cut).
   */
  private terminateNow(): void {
    this.uncork();
    this.ws.terminate();
  }

  /** @param owes how long until the member it speaks for has paid for its binary frames (see {@link FrameGate}) */
  constructor(
    protected readonly ws: WebSocket,
    readonly relay: RelayContext,
    protected readonly socket: Socket,
    owes: () => number,
  ) {
    const { config } = relay;
    const budget = { ...config, textByteBurst: Math.max(config.textByteBurst, config.maxFrameBytes * OVERSIZE_FACTOR) };
    this.outbox = new Outbox(relay.delivery, (frames, own) => this.write(frames, own));
    this.gate = new FrameGate(ws, budget, (data, isBinary) => this.onFrame(data, isBinary), () => this.cut(CloseCode.FLOODING, 'flooding'), relay.budgets.held, relay.frames, owes);
    limitPayload(ws, config.maxJoinFrameBytes);
    // the budget before authentication is kept on the socket itself: frames, pings, partial frames alike
    const overBudget = () => {
      // ws refuses an oversized frame from its header (1009) and then only discards: allow for that
      const limit = (config.maxJoinFrameBytes + 1024) * (ws.readyState === ws.OPEN ? 1 : 4);
      if (this.preAuthBytes <= limit || !this.preAuth) return;
      relay.log.info('connection refused before join', { reason: 'pre-auth-bytes', bytes: this.preAuthBytes });
      this.refusedBeforeJoin();
      this.terminateNow();
    };
    this.countPreAuth = (chunk) => {
      this.preAuthBytes += chunk.length;
      // checked after ws has parsed this chunk (its own errors are emitted on the next tick)
      if (this.preAuthBytes > config.maxJoinFrameBytes + 1024) setImmediate(overBudget);
    };
    socket.on('data', this.countPreAuth);
    ws.on('message', (data, isBinary) => this.gate.push(data, isBinary));
    ws.on('pong', () => (this.alive = true));
    ws.on('error', (err) => relay.log.debug('socket error', { error: err.message }));
  }

  /** Authenticated: larger frames, no pre-auth count, and the frames of `flow` share its part of the relay. */
  protected authenticated(flow: string): void {
    this.socket.off('data', this.countPreAuth);
    this.gate.moveTo(flow);
    limitPayload(this.ws, this.relay.config.maxFrameBytes * OVERSIZE_FACTOR);
    this.chargeUnfinishedTo(flow);
  }

  /**
   * From now on what ws holds of this connection's messages still arriving is charged to `token`
   * (joined, or waiting in a lobby: past the pre-auth count either way).
   */
  protected chargeUnfinishedTo(token: string): void {
    if (this.token) return;
    this.token = token;
    // ws parses each chunk before this listener runs (it was added first): what it then still
    // holds is a message still arriving
    this.socket.on('data', this.countUnfinished);
  }

  /**
   * A member's messages still arriving are paid for by its token: a socket that sends most of a
   * large frame (or the first fragments of a message) and then nothing held up to 1 MiB for as
   * long as it stayed open, whatever its token.
   */
  private recountUnfinished(): void {
    const now = Math.max(0, unfinishedBytes(this.ws) - UNFINISHED_FREE_BYTES);
    if (now === this.unfinished) return;
    if (!this.relay.budgets.unfinished.change(this.token, now - this.unfinished)) {
      this.relay.log.warn('participant cut: messages still arriving over budget', { ...this.who, unfinished: now });
      return this.cut(CloseCode.FLOODING, 'flooding');
    }
    this.unfinished = now;
  }

  /** The socket is gone: nothing more is read or written. */
  protected detach(): void {
    this.gate.close();
    this.outbox.clear();
    this.socket.off('data', this.countPreAuth);
    this.socket.off('data', this.countUnfinished);
    this.relay.budgets.unfinished.change(this.token, -this.unfinished);
    this.unfinished = 0;
  }

  /** A socket refused before it joined gets a moment for the closing handshake, not the 30 s ws would wait. */
  protected closeSoon(code: number, reason: string): void {
    this.gate.close();
    this.outbox.flush();
    this.ws.close(code, reason);
    setTimeout(() => this.terminateNow(), 1000).unref();
  }

  /** Close the socket with `code` once what was sent before has gone out. */
  protected closeSocket(code: number, reason: string): void {
    this.gate.close();
    this.outbox.flush();
    this.ws.close(code, reason);
  }

  send(frame: ServerFrame): void {
    this.sendOwn(Buffer.from(JSON.stringify(frame)));
  }

  /** A frame for this connection alone (an answer, an event of its own): not part of a fan-out. */
  protected sendOwn(data: Buffer): void {
    if (this.admitSend(false)) this.outbox.send(data, false, false);
  }

  /** Unsent bytes: queued for the delivery, and in the socket. */
  get bufferedAmount(): number {
    return this.ws.bufferedAmount + this.outbox.pendingBytes;
  }

  sendRaw(data: Buffer, optional = false, lazy = false): void {
    if (this.admitSend(optional)) this.outbox.send(data, false, true, lazy);
  }

  sendBinary(data: Uint8Array): void {
    if (this.admitSend(false)) this.outbox.send(data, true, true);
  }

  /**
   * Frames the outbox lets go, in one write to the socket. Framed by the relay, not by ws's
   * `send`: a fan-out's frame is built once for all its copies, and a small one goes out in
   * one call (see `writeFrames`): small writes are most of what a room of a thousand members
   * costs the relay. ws's own frames (pings, the close) go to the same socket in order: ws's
   * sender holds frames back only while it compresses (`permessage-deflate` is off) or reads a
   * Blob (the relay sends none), so none of its frames waits to be written after ours
   * (`ws-frame.test.ts` pins this).
   */
  private write(frames: readonly OutFrame[], own: boolean): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    if (own && !this.corked) {
      this.corked = true;
      this.socket.cork();
      process.nextTick(this.uncork);
    }
    writeFrames(this.socket, frames);
  }

  /**
   * A member that is not keeping up first stops getting optional traffic (pubsub, whiteboard),
   * so nobody can aim enough of it at a victim to get the victim cut; what it must get (answers,
   * roster, outputs) still queues, up to the hard cap, past which it is dropped rather than grow
   * the relay's memory.
   */
  private admitSend(optional: boolean): boolean {
    if (this.over) return false;
    const queued = this.bufferedAmount;
    const { sendSoftLimitBytes, maxBufferedBytes } = this.relay.config;
    if (optional && queued > sendSoftLimitBytes) {
      this.relay.counters.dropped++;
      return false;
    }
    if (queued <= maxBufferedBytes) return true;
    this.relay.log.warn('participant dropped: slow consumer', { ...this.who, unsent: queued });
    this.cut(CloseCode.SLOW_CONSUMER, 'slow-consumer');
    return false;
  }

  /** End the session now, with `code` (slow consumer, flooding, over the relay-wide budget). */
  cut(code: number, reason: string): void {
    if (this.over) return;
    this.relay.counters.cut++;
    this.close(code, reason);
    this.terminateNow();
  }

  /**
   * Heartbeat tick: drop a peer that did not answer the previous ping. One whose frames wait for
   * their budget is not read meanwhile, so its pong cannot be seen: the frames it sent are its
   * sign of life (it is read again, and checked, once they are handled).
   */
  heartbeat(): void {
    if (this.gate.holding > 0) this.alive = true;
    if (!this.alive) {
      // cut like a dropped network: the member keeps its seat for the grace period
      this.relay.log.info('participant dropped: heartbeat timeout', this.who);
      this.terminateNow();
      return;
    }
    this.alive = false;
    this.ws.ping();
  }

  /** Another connection took over the member this one spoke for (a resume): end quietly, the member lives on. */
  abstract replaced(): void;

  /** Drop the socket at once, without a closing handshake. */
  protected terminate(): void {
    this.terminateNow();
  }

  drop(): void {
    this.terminateNow();
  }
}
