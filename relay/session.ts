import type { Socket } from 'node:net';
import type { RawData, WebSocket } from 'ws';
import { CloseCode, wireError, type ErrorReason } from '../src/protocol/codes.ts';
import { PROTOCOL_VERSION, type ErrorFrame, type JoinFrame, type RequestFrame, type ResumeFrame, type ServerFrame, type WireError } from '../src/protocol/messages.ts';
import { parseClientFrame, type Parsed } from '../src/protocol/validate.ts';
import { Serialized, type RelayContext, type RequestScope } from './context.ts';
import { RelayError, toWireError } from './errors.ts';
import type { LogFields } from './log.ts';
import { HANDLERS, type Handler } from './handlers/index.ts';
import { enter, judge, snapshot, type Verdict } from './join.ts';
import { FrameGate, rawLength } from './frame-gate.ts';
import { Outbox, type OutFrame } from './delivery.ts';
import { waitInLobby, type LobbyJoiner } from './lobby-wait.ts';
import { AwayLink } from './seats.ts';
import type { Waiting } from './rooms/lobby.ts';
import { TokenBucket } from './data/token-bucket.ts';
import type { Member, MemberLink, Room } from './rooms/types.ts';

/** What the resume of a member closed while away is told, by the close code it got. */
const AWAY_ENDINGS: Record<number, WireError> = {
  [CloseCode.REMOVED]: { code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth', reason: 'removed', message: 'you were removed from this room' },
  [CloseCode.ROOM_ENDED]: { code: 'ROOM_ENDED', kind: 'State', reason: 'room-ended', message: 'the room has ended' },
  [CloseCode.DUPLICATE_IDENTITY]: { code: 'UNAUTHORIZED_PARTICIPANT', kind: 'Auth', reason: 'duplicate-identity', message: 'you joined this room from elsewhere' },
};

/** What the server learns of a session's life. */
export interface SessionHooks {
  /** It left the pre-authentication state (joined, waits in a lobby, was refused, or closed). */
  authenticated(session: Session): void;
  /** Its socket closed. */
  ended(session: Session): void;
}

/** Frames up to this many times the frame limit are read and answered PAYLOAD_TOO_LARGE; larger ones close the socket (1009). */
export const OVERSIZE_FACTOR = 4;

/** Before the join, ws's receiver refuses a frame whose header announces more than the join-frame limit. */
function limitPayload(ws: WebSocket, bytes: number): void {
  const receiver = (ws as unknown as { _receiver?: { _maxPayload?: unknown } })._receiver;
  if (receiver && typeof receiver._maxPayload === 'number') receiver._maxPayload = bytes;
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data as ArrayBuffer).toString('utf8');
}

/** The request id of a frame too large to parse, if it starts the way the SDK writes requests. */
function leadingRequestId(text: string): number | undefined {
  const m = /^\{"type":"request","id":(\d{1,15})[,}]/.exec(text.slice(0, 64));
  return m ? Number(m[1]) : undefined;
}

/**
 * One WebSocket connection: unauthenticated until its join frame is accepted (at most
 * `maxJoinFrameBytes` read from the socket meanwhile), then a member of one room whose
 * requests are dispatched through the handler table, at the pace of its frame budget.
 */
export class Session implements MemberLink, LobbyJoiner {
  private state: 'pending' | 'waiting' | 'joined' | 'closed' = 'pending';
  private waitingIn: { room: Room; waiting: Waiting } | null = null;
  private joinTimer: ReturnType<typeof setTimeout> | null;
  private scope: Omit<RequestScope, 'after'> | null = null;
  private refusals = 0;
  private refusalWindow = 0;
  private readonly gate: FrameGate;
  /** What is sent to this connection, in order: a fan-out is delivered in slices. */
  private readonly outbox: Outbox;
  /** Bytes read from the socket before the join was accepted. */
  private preAuthBytes = 0;
  private readonly countPreAuth: (chunk: Buffer) => void;
  /** Cleared by each heartbeat, set by each pong. */
  alive = true;

  constructor(
    private readonly ws: WebSocket,
    readonly relay: RelayContext,
    private readonly hooks: SessionHooks,
    private readonly socket?: Socket,
  ) {
    const { config } = relay;
    const budget = { ...config, textByteBurst: Math.max(config.textByteBurst, config.maxFrameBytes * OVERSIZE_FACTOR) };
    this.outbox = new Outbox(relay.delivery, (frames) => this.write(frames));
    this.gate = new FrameGate(ws, budget, (data, isBinary) => this.onFrameGuarded(data, isBinary), () => this.cut(CloseCode.FLOODING, 'flooding'), relay.budgets.held, relay.frames, () => this.scope?.member.fanout.msUntilToken(0) ?? 0);
    limitPayload(ws, config.maxJoinFrameBytes);
    // the budget before authentication is kept on the socket itself: frames, pings, partial frames alike
    const overBudget = () => {
      // ws refuses an oversized frame from its header (1009) and then only discards: allow for that
      const limit = (config.maxJoinFrameBytes + 1024) * (ws.readyState === ws.OPEN ? 1 : 4);
      if (this.preAuthBytes <= limit || this.state === 'joined' || this.state === 'waiting') return;
      relay.log.info('connection refused before join', { reason: 'pre-auth-bytes', bytes: this.preAuthBytes });
      this.setState('closed');
      ws.terminate();
    };
    this.countPreAuth = (chunk) => {
      this.preAuthBytes += chunk.length;
      // checked after ws has parsed this chunk (its own errors are emitted on the next tick)
      if (this.preAuthBytes > config.maxJoinFrameBytes + 1024) setImmediate(overBudget);
    };
    socket?.on('data', this.countPreAuth);
    this.joinTimer = setTimeout(() => this.refuseFrame(CloseCode.JOIN_TIMEOUT, 'no join frame arrived in time', 'join-timeout'), config.joinTimeoutMs);
    ws.on('message', (data, isBinary) => this.gate.push(data, isBinary));
    ws.on('pong', () => (this.alive = true));
    ws.on('error', (err) => relay.log.debug('socket error', { error: err.message }));
    ws.on('close', (code) => this.ended(code));
  }

  private setState(next: 'waiting' | 'joined' | 'closed'): void {
    if (this.state === 'pending') this.hooks.authenticated(this);
    this.state = next;
  }

  /** A connection that has not sent its join frame gives its place to a newer one (the relay is at `--max-pending`). */
  evict(): void {
    this.refuseFrame(CloseCode.JOIN_TIMEOUT, 'the relay needed the place of a connection that had not joined', 'evicted');
    this.ws.terminate();
  }

  /** A socket refused before it joined gets a moment for the closing handshake, not the 30 s ws would wait. */
  private closeSoon(code: number, reason: string): void {
    this.outbox.flush();
    this.ws.close(code, reason);
    setTimeout(() => this.ws.terminate(), 1000).unref();
  }

  /** The member, once joined. */
  get member(): Member | null {
    return this.scope?.member ?? null;
  }

  send(frame: ServerFrame): void {
    this.sendOwn(Buffer.from(JSON.stringify(frame)));
  }

  /** A frame for this connection alone (an answer, an event of its own): not part of a fan-out. */
  private sendOwn(data: Buffer): void {
    if (this.admitSend(false)) this.outbox.send(data, false, false);
  }

  /** Unsent bytes: queued for the delivery, and in the socket. */
  get bufferedAmount(): number {
    return this.ws.bufferedAmount + this.outbox.pendingBytes;
  }

  sendRaw(data: Buffer, optional = false): void {
    if (this.admitSend(optional)) this.outbox.send(data, false, true);
  }

  sendBinary(data: Uint8Array): void {
    if (this.admitSend(false)) this.outbox.send(data, true, true);
  }

  /** Frames the outbox lets go, in one write to the socket when there are several. */
  private write(frames: readonly OutFrame[]): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    const socket = frames.length > 1 ? this.socket : undefined;
    socket?.cork();
    for (const { data, binary } of frames) this.ws.send(data, { binary });
    socket?.uncork();
  }

  /**
   * A member that is not keeping up first stops getting optional traffic (pubsub, whiteboard),
   * so nobody can aim enough of it at a victim to get the victim cut; what it must get (answers,
   * roster, outputs) still queues, up to the hard cap, past which it is dropped rather than grow
   * the relay's memory.
   */
  private admitSend(optional: boolean): boolean {
    if (this.state === 'closed') return false;
    const queued = this.bufferedAmount;
    const { sendSoftLimitBytes, maxBufferedBytes } = this.relay.config;
    if (optional && queued > sendSoftLimitBytes) {
      this.relay.counters.dropped++;
      return false;
    }
    if (queued <= maxBufferedBytes) return true;
    this.relay.log.warn('participant dropped: slow consumer', { participant: this.member?.id, room: this.member ? this.scope?.room.id : undefined, unsent: queued });
    this.cut(CloseCode.SLOW_CONSUMER, 'slow-consumer');
    return false;
  }

  /** End the session now, with `code` (slow consumer, flooding, over the relay-wide budget). */
  cut(code: number, reason: string): void {
    if (this.state === 'closed') return;
    this.relay.counters.cut++;
    this.close(code, reason);
    this.ws.terminate();
  }

  /** Leave the room (if joined) and close the socket with `code`. */
  close(code: number, reason: string): void {
    if (this.state === 'closed') return;
    this.leaveRoom();
    this.setState('closed');
    this.gate.close();
    // what was sent before the close frame arrives before it
    this.outbox.flush();
    this.ws.close(code, reason);
  }

  /** Heartbeat tick: drop a peer that did not answer the previous ping. */
  heartbeat(): void {
    if (!this.alive) {
      // cut like a dropped network: the member keeps its seat for the grace period
      this.relay.log.info('participant dropped: heartbeat timeout', { participant: this.member?.id });
      this.ws.terminate();
      return;
    }
    this.alive = false;
    this.ws.ping();
  }

  /**
   * The last line, not the design: a fault while handling one frame is a bug of this relay; it
   * costs that frame (answered `INTERNAL_ERROR`, and a join in progress is refused), never the
   * process and every room in it.
   */
  private onFrameGuarded(data: RawData, isBinary: boolean): void {
    try {
      this.onFrame(data, isBinary);
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

  private onFrame(data: RawData, isBinary: boolean): void {
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
    this.dispatch(request).catch((err: unknown) => this.fault('request failed after its answer', err, { method: request.method }));
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
    this.socket?.off('data', this.countPreAuth);
    // its frames now use its token's share of the relay: every connection of one token shares one
    this.gate.moveTo(`${member.project}\n${member.tokenKey}`);
    limitPayload(this.ws, config.maxFrameBytes * OVERSIZE_FACTOR);
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
    if (waiting) this.dropRoomIfEmpty(waiting.room);
  }

  get waitingForLobby(): boolean {
    return this.state === 'waiting';
  }

  /** Come back to a held seat on this connection. */
  private resume(frame: ResumeFrame): void {
    const { relay } = this;
    if (frame.v !== PROTOCOL_VERSION) {
      return this.refuseJoin({ code: 'INVALID_ARGUMENT', kind: 'Request', reason: 'unsupported-version', message: `this relay speaks protocol version ${PROTOCOL_VERSION}` }, 'resume');
    }
    const seat = relay.seats.take(frame.credential);
    if (!('member' in seat)) return this.refuseJoin(seat, 'resume');
    const { member, room } = seat;
    if (!relay.keys.isActive(seat.apiKey)) {
      relay.seats.forget(member);
      member.link = this;
      room.remove(member);
      this.dropRoomIfEmpty(room);
      return this.refuseJoin({ code: 'INVALID_API_KEY', kind: 'Auth', reason: 'revoked-api-key', message: 'the API key of this session has been revoked' }, 'resume');
    }
    // the old connection may still look open (the client gave up on it first): it is replaced
    const old = member.link;
    member.link = this;
    if (old instanceof Session) old.replaced();
    // media transports and data streams belonged to the old connection: the SDK starts them again
    room.media.memberLeft(member);
    room.streams.memberLeft(member);
    this.becomeMember(member, room);
    relay.log.info('resumed', { participant: member.id, room: room.id, project: room.project });
    this.send({ ...snapshot(relay, room, member), resumed: true });
  }

  /** Another connection took this member over (a resume): end quietly, the member lives on. */
  private replaced(): void {
    this.scope = null;
    this.setState('closed');
    this.gate.close();
    this.outbox.clear();
    this.ws.terminate();
  }

  private refuseJoin(refusal: WireError, frame: JoinFrame | 'resume'): void {
    const { refusals } = this.relay.counters;
    refusals.set(refusal.code, (refusals.get(refusal.code) ?? 0) + 1);
    const who = frame === 'resume' ? { resume: true } : { room: frame.roomId, participant: frame.participantId };
    this.relay.log.info('join refused', { code: refusal.code, reason: refusal.reason, ...who });
    this.send({ type: 'join-error', error: wireError(refusal.code, refusal.message, refusal.reason) });
    this.setState('closed');
    this.gate.close();
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
      this.relay.log.warn('participant cut off: flooding', { participant: this.member?.id });
      this.cut(CloseCode.FLOODING, 'flooding');
    }
  }

  private onBinary(data: RawData): void {
    const scope = this.scope;
    if (!scope) return;
    const frame = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    scope.room.streams.chunk(scope.member, frame);
  }

  private async dispatch(request: RequestFrame): Promise<void> {
    if (!this.scope) return;
    // between `session.leave` (or a removal) and the socket's close, the member is no longer in its room
    if (this.scope.room.get(this.scope.member.id) !== this.scope.member) {
      return this.send({ type: 'response', id: request.id, error: { code: 'NOT_CONNECTED', kind: 'State', message: 'this session has left the room', reason: 'left' } });
    }
    const deferred: Array<() => void> = [];
    const scope: RequestScope = { ...this.scope, after: (fn) => deferred.push(fn) };
    let result: unknown;
    try {
      const handler = HANDLERS[request.method] as Handler<typeof request.method>;
      result = await handler(scope, request.params);
    } catch (err) {
      // answered first: a fault below (even the log's) must not leave the call waiting
      this.send({ type: 'response', id: request.id, error: toWireError(err) });
      if (!(err instanceof RelayError)) this.fault('request failed', err, { method: request.method });
      return;
    }
    if (result instanceof Serialized) this.sendOwn(Buffer.concat([Buffer.from(`{"type":"response","id":${request.id},"result":`), result.json, Buffer.from('}')]));
    else this.send({ type: 'response', id: request.id, result });
    for (const fn of deferred) fn();
  }

  /** Count and log a fault of the relay's own; a logger that throws does not make it worse. */
  private fault(message: string, err: unknown, fields: LogFields = {}): void {
    this.relay.counters.faults++;
    try {
      this.relay.log.error(message, { ...fields, state: this.state, error: err instanceof Error ? (err.stack ?? err.message) : typeof err });
    } catch {
      // nothing more to do: the fault is counted in /metrics
    }
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
    this.gate.close();
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
      this.dropRoomIfEmpty(waiting.room);
    }
    const scope = this.scope;
    if (!scope) return;
    this.scope = null;
    const { room, member, relay } = scope;
    relay.seats.forget(member);
    if (room.remove(member)) relay.log.info('left', { participant: member.id, room: room.id });
    this.dropRoomIfEmpty(room);
  }

  /**
   * The connection dropped (no closing handshake, or a dead heartbeat): the member keeps its
   * seat for the grace period, reached through nothing, so that a resume finds it and the
   * others see no blip. Returns false when there is no seat to hold.
   */
  private holdSeat(): boolean {
    const scope = this.scope;
    if (!scope) return false;
    const { room, member, relay } = scope;
    const away = new AwayLink((code) => {
      // closed while away: removed, room ended, replaced by a new join of the identity
      relay.seats.endWhileAway(member, AWAY_ENDINGS[code] ?? { code: 'NOT_FOUND', kind: 'Request', reason: 'resume-unknown', message: 'the session ended' });
      if (member.link === away) room.remove(member);
      this.dropRoomIfEmpty(room);
    });
    member.link = away;
    const held = relay.seats.hold(member, relay.config.resumeGraceMs, () => {
      if (member.link !== away) return;
      if (room.remove(member)) relay.log.info('left: did not come back', { participant: member.id, room: room.id });
      this.dropRoomIfEmpty(room);
    });
    if (!held) {
      member.link = this;
      return false;
    }
    this.scope = null;
    relay.log.info('away: seat held', { participant: member.id, room: room.id, graceMs: relay.config.resumeGraceMs });
    return true;
  }

  private dropRoomIfEmpty(room: Room): void {
    if (room.size === 0 && room.lobby.size === 0) this.relay.rooms.delete(room);
  }

  private ended(code: number): void {
    this.clearJoinTimer();
    this.gate.close();
    this.outbox.clear();
    this.socket?.off('data', this.countPreAuth);
    // 1006: no closing handshake, the network or the peer died; anything else was meant
    if (!(this.state === 'joined' && code === 1006 && this.holdSeat())) this.leaveRoom();
    this.setState('closed');
    this.hooks.ended(this);
  }
}
