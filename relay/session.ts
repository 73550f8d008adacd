import type { Socket } from 'node:net';
import type { RawData, WebSocket } from 'ws';
import { CloseCode, wireError, type ErrorReason } from '../src/protocol/codes.ts';
import type { ErrorFrame, JoinFrame, ResumeFrame, WireError } from '../src/protocol/messages.ts';
import { parseClientFrame, type Parsed } from '../src/protocol/validate.ts';
import type { RelayContext, RequestScope } from './context.ts';
import { Connection, rawText } from './connection.ts';
import { dispatch } from './dispatch.ts';
import type { LogFields } from './log.ts';
import { enter, judge, snapshot, type Verdict } from './join.ts';
import { rawLength } from './frame-gate.ts';
import { waitInLobby, type LobbyJoiner } from './lobby-wait.ts';
import { holdSeat, takeSeat } from './resume.ts';
import type { Waiting } from './rooms/lobby.ts';
import { TokenBucket } from './data/token-bucket.ts';
import type { Member, Room } from './rooms/types.ts';

export { OVERSIZE_FACTOR } from './connection.ts';

/** What the server learns of a session's life. */
export interface SessionHooks {
  /** It left the pre-authentication state (joined, waits in a lobby, was refused, or closed). */
  authenticated(session: Session): void;
  /** Its socket closed. */
  ended(session: Session): void;
}

/** The request id of a frame too large to parse, if it starts the way the SDK writes requests. */
function leadingRequestId(text: string): number | undefined {
  const m = /^\{"type":"request","id":(\d{1,15})[,}]/.exec(text.slice(0, 64));
  return m ? Number(m[1]) : undefined;
}

/**
 * What is said on one connection: unauthenticated until its join (or resume) frame is accepted,
 * waiting in a lobby, or a member of one room whose requests are dispatched through the handler
 * table. How its bytes come and go, within their budgets, is the {@link Connection}'s.
 */
export class Session extends Connection implements LobbyJoiner {
  private state: 'pending' | 'waiting' | 'joined' | 'closed' = 'pending';
  private waitingIn: { room: Room; waiting: Waiting } | null = null;
  private joinTimer: ReturnType<typeof setTimeout> | null;
  private scope: Omit<RequestScope, 'after'> | null = null;
  private refusals = 0;
  private refusalWindow = 0;

  constructor(
    ws: WebSocket,
    relay: RelayContext,
    private readonly hooks: SessionHooks,
    socket?: Socket,
  ) {
    super(ws, relay, socket, () => this.scope?.member.fanout.msUntilToken(0) ?? 0);
    this.joinTimer = setTimeout(() => this.refuseFrame(CloseCode.JOIN_TIMEOUT, 'no join frame arrived in time', 'join-timeout'), relay.config.joinTimeoutMs);
    ws.on('close', (code) => this.ended(code));
  }

  protected get preAuth(): boolean {
    return this.state === 'pending' || this.state === 'closed';
  }

  protected get over(): boolean {
    return this.state === 'closed';
  }

  protected get who(): LogFields {
    return this.scope ? { participant: this.scope.member.id, room: this.scope.room.id } : {};
  }

  protected refusedBeforeJoin(): void {
    this.setState('closed');
  }

  private setState(next: 'waiting' | 'joined' | 'closed'): void {
    if (this.state === 'pending') this.hooks.authenticated(this);
    this.state = next;
  }

  /** A connection that has not sent its join frame gives its place to a newer one (the relay is at `--max-pending`). */
  evict(): void {
    this.refuseFrame(CloseCode.JOIN_TIMEOUT, 'the relay needed the place of a connection that had not joined', 'evicted');
    this.terminate();
  }

  /** The member, once joined. */
  get member(): Member | null {
    return this.scope?.member ?? null;
  }

  /** Leave the room (if joined) and close the socket with `code`; what was sent before goes first. */
  close(code: number, reason: string): void {
    if (this.state === 'closed') return;
    this.leaveRoom();
    this.setState('closed');
    this.closeSocket(code, reason);
  }

  /**
   * The last line, not the design: a fault while handling one frame is a bug of this relay; it
   * costs that frame (answered `INTERNAL_ERROR`, and a join in progress is refused), never the
   * process and every room in it.
   */
  protected onFrame(data: RawData, isBinary: boolean): void {
    try {
      this.onFrameUnguarded(data, isBinary);
    } catch (err) {
      this.fault('frame handling failed', err);
      if (this.state === 'closed') return;
      const error = wireError('INTERNAL_ERROR', 'the relay could not handle this frame', 'internal');
      // a request is answered as a request, so that its caller does not wait for its timeout
      let id: number | undefined;
      try {
        id = isBinary ? undefined : leadingRequestId(rawText(data));
      } catch {
        id = undefined;
      }
      if (id === undefined) this.sendError(error);
      else this.send({ type: 'response', id, error });
      if (this.state === 'pending') this.closeSoon(CloseCode.JOIN_REFUSED, 'internal');
    }
  }

  private onFrameUnguarded(data: RawData, isBinary: boolean): void {
    if (this.state === 'closed') return;
    this.alive = true;
    if (this.state === 'pending') return this.onJoinFrame(data, isBinary);
    if (this.state === 'waiting') {
      return this.sendError({ code: 'INVALID_STATE', kind: 'State', message: 'waiting in the lobby: nothing can be done before a moderator admits you', reason: 'waiting' });
    }
    if (isBinary) return this.onBinary(data);
    const text = rawText(data);
    const { maxFrameBytes } = this.relay.config;
    if (Buffer.byteLength(text) > maxFrameBytes) {
      const error: WireError = { code: 'PAYLOAD_TOO_LARGE', kind: 'Request', message: `frames are at most ${maxFrameBytes} bytes (announced in joined.limits)`, reason: 'frame-too-large' };
      const id = leadingRequestId(text);
      return id === undefined ? this.sendError(error) : this.send({ type: 'response', id, error });
    }
    const parsed = parseClientFrame(text);
    if (!parsed.ok) return this.answerBadFrame(parsed);
    if (parsed.value.type === 'join' || parsed.value.type === 'resume') {
      return this.sendError({ code: 'INVALID_STATE', kind: 'State', message: 'this connection has already joined', reason: 'already-joined' });
    }
    if (parsed.value.type === 'ping') return this.send({ type: 'pong' });
    const request = parsed.value;
    if (!this.scope) return;
    dispatch(this.scope, request, this).catch((err: unknown) => this.fault('request failed after its answer', err, { method: request.method }));
  }

  private onJoinFrame(data: RawData, isBinary: boolean): void {
    if (isBinary || rawLength(data) > this.relay.config.maxJoinFrameBytes) {
      return this.refuseFrame(CloseCode.PROTOCOL_ERROR, `the join frame must be a text frame of at most ${this.relay.config.maxJoinFrameBytes} bytes`, 'bad-join-frame');
    }
    const parsed = parseClientFrame(rawText(data));
    if (parsed.ok && parsed.value.type === 'resume') {
      this.clearJoinTimer();
      return this.resume(parsed.value);
    }
    if (!parsed.ok || parsed.value.type !== 'join') {
      const problem = parsed.ok ? 'the first frame must be a join or resume frame' : parsed.problem;
      return this.refuseFrame(CloseCode.PROTOCOL_ERROR, problem, 'bad-join-frame');
    }
    this.clearJoinTimer();
    const verdict = judge(this.relay, parsed.value);
    if (!('claims' in verdict)) return this.refuseJoin(verdict, parsed.value);
    if (!verdict.ask) {
      this.enterRoom(verdict);
      return;
    }
    const held = waitInLobby(this.relay, verdict, this);
    if ('code' in held) return this.refuseJoin(held, parsed.value);
    this.waitingIn = held;
    this.setState('waiting');
  }

  /** Enter the room now; returns why it could not, if it could not (the join is then refused). */
  enterRoom(verdict: Verdict): WireError | null {
    this.waitingIn = null;
    const outcome = enter(this.relay, verdict, this);
    if (!('member' in outcome)) {
      this.refuseJoin(outcome, verdict.frame);
      return wireError(outcome.code, outcome.message, outcome.reason);
    }
    const { member, room, joined } = outcome;
    this.becomeMember(member, room);
    this.relay.counters.joins++;
    this.relay.log.info('joined', { participant: member.id, room: room.id, project: room.project, tier: member.tier });
    this.send(joined);
    return null;
  }

  /** From now on the connection speaks for `member`: larger frames, the member's budgets. */
  private becomeMember(member: Member, room: Room): void {
    const { config } = this.relay;
    this.setState('joined');
    // its frames now use its token's share of the relay: every connection of one token shares one
    this.authenticated(`${member.project}\n${member.tokenKey}`);
    this.scope = {
      relay: this.relay,
      member,
      room,
      limiter: new TokenBucket(config.messageRate, config.messageBurst),
      bytes: new TokenBucket(config.dataByteRate, Math.max(config.dataByteBurst, config.maxPayloadBytes)),
      flooding: () => this.flooding(),
    };
  }

  /** The lobby ended this joiner's wait with an error: its join fails with it. */
  leaveLobby(error: WireError, frame: JoinFrame): void {
    if (this.state !== 'waiting') return;
    const waiting = this.waitingIn;
    this.waitingIn = null;
    this.refuseJoin(error, frame);
    if (waiting) this.relay.rooms.release(waiting.room);
  }

  get waitingForLobby(): boolean {
    return this.state === 'waiting';
  }

  /** Come back to a held seat on this connection. */
  private resume(frame: ResumeFrame): void {
    const seat = takeSeat(this.relay, frame, this);
    if (!('member' in seat)) return this.refuseJoin(seat, 'resume');
    const { member, room } = seat;
    this.becomeMember(member, room);
    this.send({ ...snapshot(this.relay, room, member), resumed: true });
  }

  replaced(): void {
    this.scope = null;
    this.setState('closed');
    this.detach();
    this.terminate();
  }

  private refuseJoin(refusal: WireError, frame: JoinFrame | 'resume'): void {
    const { refusals } = this.relay.counters;
    refusals.set(refusal.code, (refusals.get(refusal.code) ?? 0) + 1);
    const who = frame === 'resume' ? { resume: true } : { room: frame.roomId, participant: frame.participantId };
    this.relay.log.info('join refused', { code: refusal.code, reason: refusal.reason, ...who });
    this.send({ type: 'join-error', error: wireError(refusal.code, refusal.message, refusal.reason) });
    this.setState('closed');
    this.closeSoon(CloseCode.JOIN_REFUSED, refusal.code);
  }

  /**
   * Refusals for rate are cheap, but not free: a client refused more than ten bursts' worth
   * within a second is cut off.
   */
  private flooding(): void {
    const now = Date.now();
    if (now - this.refusalWindow > 1000) {
      this.refusalWindow = now;
      this.refusals = 0;
    }
    if (++this.refusals > this.relay.config.messageBurst * 10) {
      this.relay.log.warn('participant cut off: flooding', this.who);
      this.cut(CloseCode.FLOODING, 'flooding');
    }
  }

  private onBinary(data: RawData): void {
    const scope = this.scope;
    if (!scope) return;
    const frame = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    scope.room.streams.chunk(scope.member, frame);
  }

  /** Count and log a fault of the relay's own; a logger that throws does not make it worse. */
  fault(message: string, err: unknown, fields: LogFields = {}): void {
    this.relay.counters.faults++;
    try {
      this.relay.log.error(message, { ...fields, state: this.state, error: err instanceof Error ? (err.stack ?? err.message) : typeof err });
    } catch {
      // nothing more to do: the fault is counted in /metrics
    }
  }

  /** An answer already serialised (see {@link dispatch}). */
  override sendOwn(data: Buffer): void {
    super.sendOwn(data);
  }

  private answerBadFrame(parsed: Extract<Parsed<unknown>, { ok: false }>): void {
    const error: WireError = { code: 'INVALID_ARGUMENT', kind: 'Request', message: parsed.problem, reason: 'bad-frame' };
    if (parsed.id !== undefined) this.send({ type: 'response', id: parsed.id, error });
    else this.sendError(error);
  }

  private sendError(error: WireError): void {
    const frame: ErrorFrame = { type: 'error', error };
    this.send(frame);
  }

  private refuseFrame(code: number, message: string, reason: ErrorReason): void {
    if (this.state !== 'pending') return;
    this.clearJoinTimer();
    this.relay.log.info('connection refused before join', { reason });
    this.sendError({ code: 'INVALID_ARGUMENT', kind: 'Request', message, reason });
    this.setState('closed');
    this.closeSoon(code, reason);
  }

  private clearJoinTimer(): void {
    if (this.joinTimer) clearTimeout(this.joinTimer);
    this.joinTimer = null;
  }

  private leaveRoom(): void {
    const waiting = this.waitingIn;
    if (waiting) {
      this.waitingIn = null;
      waiting.room.lobby.cancel(waiting.waiting.request.participantId, waiting.waiting);
      this.relay.log.info('lobby: joiner went away', { participant: waiting.waiting.request.participantId, room: waiting.room.id });
      this.relay.rooms.release(waiting.room);
    }
    const scope = this.scope;
    if (!scope) return;
    this.scope = null;
    const { room, member, relay } = scope;
    relay.seats.forget(member);
    if (room.remove(member)) relay.log.info('left', { participant: member.id, room: room.id });
    relay.rooms.release(room);
  }

  private ended(code: number): void {
    this.clearJoinTimer();
    this.detach();
    // 1006: no closing handshake, the network or the peer died; anything else was meant
    const scope = this.scope;
    if (this.state === 'joined' && code === 1006 && scope && holdSeat(this.relay, scope.member, scope.room)) this.scope = null;
    else this.leaveRoom();
    this.setState('closed');
    this.hooks.ended(this);
  }
}
