import { randomBytes } from 'node:crypto';
import type { RawData, WebSocket } from 'ws';
import { CloseCode } from '../src/protocol/codes.ts';
import { PROTOCOL_VERSION, type ErrorFrame, type JoinFrame, type RequestFrame, type ResumeFrame, type ServerFrame, type WireError } from '../src/protocol/messages.ts';
import { parseClientFrame, type Parsed } from '../src/protocol/validate.ts';
import { RelayError, type CursorTable, type RelayContext, type RequestScope } from './context.ts';
import { HANDLERS, type Handler } from './handlers/index.ts';
import { capacity, enter, judge, snapshot, type Verdict } from './join.ts';
import { AwayLink } from './seats.ts';
import type { Waiting } from './rooms/lobby.ts';
import { TokenBucket } from './data/token-bucket.ts';
import type { Member, MemberLink, Room } from './rooms/types.ts';

const MAX_CURSORS = 32;

/** What the resume of a member closed while away is told, by the close code it got. */
const AWAY_ENDINGS: Record<number, WireError> = {
  [CloseCode.REMOVED]: { code: 'UNAUTHORIZED_PARTICIPANT', reason: 'removed', message: 'you were removed from this room' },
  [CloseCode.ROOM_ENDED]: { code: 'ROOM_ENDED', reason: 'room-ended', message: 'the room has ended' },
  [CloseCode.DUPLICATE_IDENTITY]: { code: 'UNAUTHORIZED_PARTICIPANT', reason: 'duplicate-identity', message: 'you joined this room from elsewhere' },
};
/** How long a connection over its frame budget is not read. */
const THROTTLE_MS = 100;

/** Opaque cursor strings of one client, mapped to relay-side positions; the oldest are dropped. */
class Cursors implements CursorTable {
  private readonly table = new Map<string, unknown>();

  put(value: unknown): string {
    const token = randomBytes(12).toString('base64url');
    this.table.set(token, value);
    if (this.table.size > MAX_CURSORS) this.table.delete(this.table.keys().next().value as string);
    return token;
  }

  get(token: string): unknown {
    return this.table.get(token);
  }
}

function rawLength(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((n, b) => n + b.length, 0);
  return data instanceof ArrayBuffer ? data.byteLength : data.length;
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data as ArrayBuffer).toString('utf8');
}

/**
 * One WebSocket connection: unauthenticated until its join frame is accepted, then a member
 * of one room whose requests are dispatched through the handler table.
 */
export class Session implements MemberLink {
  private state: 'pending' | 'waiting' | 'joined' | 'closed' = 'pending';
  private waitingIn: { room: Room; waiting: Waiting } | null = null;
  private joinTimer: ReturnType<typeof setTimeout> | null;
  private scope: Omit<RequestScope, 'after'> | null = null;
  private refusals = 0;
  private refusalWindow = 0;
  /** Frame budgets checked before any parsing; over budget, the socket is not read for a while. */
  private readonly textFrames: TokenBucket;
  private readonly binaryFrames: TokenBucket;
  private throttled: ReturnType<typeof setTimeout> | null = null;
  /** Cleared by each heartbeat, set by each pong. */
  alive = true;

  constructor(
    private readonly ws: WebSocket,
    private readonly relay: RelayContext,
    private readonly onEnd: (session: Session) => void,
  ) {
    this.textFrames = new TokenBucket(relay.config.frameRate, relay.config.frameRate * 2);
    this.binaryFrames = new TokenBucket(relay.config.binaryFrameRate, relay.config.binaryFrameRate * 2);
    this.joinTimer = setTimeout(() => this.refuseFrame(CloseCode.JOIN_TIMEOUT, 'no join frame arrived in time', 'join-timeout'), relay.config.joinTimeoutMs);
    ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    ws.on('pong', () => (this.alive = true));
    ws.on('error', (err) => relay.log.debug(`socket error: ${err.message}`));
    ws.on('close', (code) => this.ended(code));
  }

  /** The member, once joined. */
  get member(): Member | null {
    return this.scope?.member ?? null;
  }

  send(frame: ServerFrame): void {
    this.sendRaw(Buffer.from(JSON.stringify(frame)));
  }

  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }

  sendRaw(data: Buffer): void {
    if (this.admitSend()) this.ws.send(data, { binary: false });
  }

  sendBinary(data: Uint8Array): void {
    if (this.admitSend()) this.ws.send(data, { binary: true });
  }

  /** A member whose unsent data passed the cap is dropped rather than grow the relay's memory. */
  private admitSend(): boolean {
    if (this.state === 'closed') return false;
    if (this.ws.bufferedAmount <= this.relay.config.maxBufferedBytes) return true;
    this.relay.log.warn(`participant ${this.member?.id ?? '?'} dropped: ${this.ws.bufferedAmount} bytes unsent`);
    this.close(CloseCode.SLOW_CONSUMER, 'slow-consumer');
    this.ws.terminate();
    return false;
  }

  /** Leave the room (if joined) and close the socket with `code`. */
  close(code: number, reason: string): void {
    if (this.state === 'closed') return;
    this.leaveRoom();
    this.state = 'closed';
    this.ws.close(code, reason);
  }

  /** Heartbeat tick: drop a peer that did not answer the previous ping. */
  heartbeat(): void {
    if (!this.alive) {
      // cut like a dropped network: the member keeps its seat for the grace period
      this.relay.log.info(`participant ${this.member?.id ?? '(joining)'} dropped: heartbeat timeout`);
      this.ws.terminate();
      return;
    }
    this.alive = false;
    this.ws.ping();
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.state === 'closed') return;
    this.alive = true;
    if (!(isBinary ? this.binaryFrames : this.textFrames).take()) this.throttle();
    if (this.state === 'pending') return this.onJoinFrame(data, isBinary);
    if (this.state === 'waiting') {
      return this.sendError({ code: 'INVALID_ARGUMENT', message: 'waiting in the lobby: nothing can be done before a moderator admits you', reason: 'waiting' });
    }
    if (isBinary) return this.onBinary(data);
    const parsed = parseClientFrame(rawText(data));
    if (!parsed.ok) return this.answerBadFrame(parsed);
    if (parsed.value.type === 'join' || parsed.value.type === 'resume') {
      return this.sendError({ code: 'INVALID_ARGUMENT', message: 'this connection has already joined', reason: 'already-joined' });
    }
    if (parsed.value.type === 'ping') return this.send({ type: 'pong' });
    void this.dispatch(parsed.value);
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
    if (verdict.ask) return this.wait(verdict);
    this.enterRoom(verdict);
  }

  /** Enter the room now; returns why it could not, if it could not (the join is then refused). */
  private enterRoom(verdict: Verdict): WireError | null {
    const outcome = enter(this.relay, verdict, this);
    if (!('member' in outcome)) {
      this.refuseJoin(outcome, verdict.frame);
      return { code: outcome.code, message: outcome.message, reason: outcome.reason };
    }
    const { member, room, joined } = outcome;
    this.state = 'joined';
    const { messageRate, messageBurst } = this.relay.config;
    this.scope = { relay: this.relay, member, room, cursors: new Cursors(), limiter: new TokenBucket(messageRate, messageBurst), flooding: () => this.flooding() };
    this.relay.counters.joins++;
    this.relay.log.info(`joined: ${member.id} room=${room.id} tier=${member.tier}`);
    this.send(joined);
    return null;
  }

  /** Come back to a held seat on this connection. */
  private resume(frame: ResumeFrame): void {
    const { relay } = this;
    if (frame.v !== PROTOCOL_VERSION) {
      return this.refuseJoin({ code: 'INVALID_ARGUMENT', reason: 'unsupported-version', message: `this relay speaks protocol version ${PROTOCOL_VERSION}` }, 'resume');
    }
    const seat = relay.seats.take(frame.credential);
    if (!('member' in seat)) return this.refuseJoin(seat, 'resume');
    const { member, room } = seat;
    if (!relay.keys.isActive(seat.apiKey)) {
      relay.seats.forget(member);
      member.link = this;
      room.remove(member);
      this.dropRoomIfEmpty(room);
      return this.refuseJoin({ code: 'INVALID_API_KEY', reason: 'revoked-api-key', message: 'the API key of this session has been revoked' }, 'resume');
    }
    // the old connection may still look open (the client gave up on it first): it is replaced
    const old = member.link;
    member.link = this;
    if (old instanceof Session) old.replaced();
    // media transports and data streams belonged to the old connection: the SDK starts them again
    room.media.memberLeft(member);
    room.streams.memberLeft(member);
    this.state = 'joined';
    const { messageRate, messageBurst } = relay.config;
    this.scope = { relay, member, room, cursors: new Cursors(), limiter: new TokenBucket(messageRate, messageBurst), flooding: () => this.flooding() };
    relay.log.info(`resumed: ${member.id} room=${room.id}`);
    this.send({ ...snapshot(relay, room, member), resumed: true });
  }

  /** Another connection took this member over (a resume): end quietly, the member lives on. */
  private replaced(): void {
    this.scope = null;
    this.state = 'closed';
    this.ws.terminate();
  }

  private refuseJoin(refusal: WireError, frame: JoinFrame | 'resume'): void {
    const { refusals } = this.relay.counters;
    refusals.set(refusal.code, (refusals.get(refusal.code) ?? 0) + 1);
    const who = frame === 'resume' ? 'resume' : `room=${frame.roomId ?? '-'} participant=${frame.participantId}`;
    this.relay.log.info(`join refused: ${refusal.code} (${refusal.reason ?? '-'}) ${who}`);
    this.send({ type: 'join-error', error: { code: refusal.code, message: refusal.message, ...(refusal.reason ? { reason: refusal.reason } : {}) } });
    this.state = 'closed';
    this.ws.close(CloseCode.JOIN_REFUSED, refusal.code);
  }

  /** Hold the joiner in the room's lobby until a moderator decides, its ttl runs out, or it goes. */
  private wait(verdict: Verdict): void {
    const full = this.relay.rooms.get(verdict.roomId) ? null : capacity(this.relay, verdict.roomId);
    if (full) return this.refuseJoin(full, verdict.frame);
    const room = this.relay.rooms.getOrCreate(verdict.roomId);
    const { frame } = verdict;
    const id = frame.participantId;
    if (room.lobby.has(id) || room.get(id)) {
      if (!verdict.pinned) {
        return this.refuseJoin({ code: 'UNAUTHORIZED_PARTICIPANT', reason: 'identity-in-use', message: 'this participantId is already in the room or its lobby and the token does not pin it' }, frame);
      }
      room.lobby.evict(id, { code: 'ENTRY_CANCELLED', message: 'the same identity asked again from elsewhere', reason: 'replaced' });
    }
    const policy = verdict.claims.joinPolicy;
    const ttl = policy?.mode === 'ask' && policy.ttl !== undefined ? policy.ttl : this.relay.config.lobbyTtl;
    const requestedAt = Date.now();
    const waiting: Waiting = {
      request: { participantId: id, name: frame.name ?? id, requestedAt },
      admit: () => {
        if (this.state !== 'waiting') return { code: 'NOT_FOUND', message: `"${id}" is no longer waiting`, reason: 'not-waiting' };
        this.waitingIn = null;
        return this.enterRoom(verdict);
      },
      refuse: (error) => {
        if (this.state !== 'waiting') return;
        this.waitingIn = null;
        this.refuseJoin(error, frame);
        this.dropRoomIfEmpty(room);
      },
    };
    this.waitingIn = { room, waiting };
    this.state = 'waiting';
    this.relay.log.info(`lobby: ${id} waits in room=${room.id} (ttl ${ttl} s)`);
    room.lobby.hold(waiting, ttl);
    this.send({ type: 'lobby', requestedAt, ttl });
  }

  /**
   * A connection over its frame budget is not read for a moment: its frames wait in the kernel
   * and TCP pushes back on the sender, so a flood costs the relay the budget and nothing more,
   * and everyone else keeps their latency. Reading resumes when the budget has refilled a little.
   */
  private throttle(): void {
    if (this.throttled || this.state === 'closed') return;
    this.ws.pause();
    this.throttled = setTimeout(() => {
      this.throttled = null;
      if (this.state !== 'closed') this.ws.resume();
    }, THROTTLE_MS);
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
      this.relay.log.warn(`participant ${this.member?.id ?? '?'} cut off: flooding`);
      this.close(CloseCode.FLOODING, 'flooding');
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
    const deferred: Array<() => void> = [];
    const scope: RequestScope = { ...this.scope, after: (fn) => deferred.push(fn) };
    try {
      const handler = HANDLERS[request.method] as Handler<typeof request.method>;
      const result = await handler(scope, request.params);
      this.send({ type: 'response', id: request.id, result });
      for (const fn of deferred) fn();
    } catch (err) {
      const error: WireError =
        err instanceof RelayError ? err.toWire() : { code: 'INVALID_ARGUMENT', message: 'the relay could not complete this request', reason: 'internal' };
      if (!(err instanceof RelayError)) this.relay.log.error(`request ${request.method} failed: ${(err as Error).stack ?? String(err)}`);
      this.send({ type: 'response', id: request.id, error });
    }
  }

  private answerBadFrame(parsed: Extract<Parsed<unknown>, { ok: false }>): void {
    const error: WireError = { code: 'INVALID_ARGUMENT', message: parsed.problem, reason: 'bad-frame' };
    if (parsed.id !== undefined) this.send({ type: 'response', id: parsed.id, error });
    else this.sendError(error);
  }

  private sendError(error: WireError): void {
    const frame: ErrorFrame = { type: 'error', error };
    this.send(frame);
  }

  private refuseFrame(code: number, message: string, reason: string): void {
    if (this.state !== 'pending') return;
    this.clearJoinTimer();
    this.relay.log.info(`connection refused before join: ${reason}`);
    this.sendError({ code: 'INVALID_ARGUMENT', message, reason });
    this.state = 'closed';
    this.ws.close(code, reason);
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
      this.relay.log.info(`lobby: ${waiting.waiting.request.participantId} went away`);
      this.dropRoomIfEmpty(waiting.room);
    }
    const scope = this.scope;
    if (!scope) return;
    this.scope = null;
    const { room, member, relay } = scope;
    relay.seats.forget(member);
    if (room.remove(member)) relay.log.info(`left: ${member.id} room=${room.id}`);
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
      relay.seats.endWhileAway(member, AWAY_ENDINGS[code] ?? { code: 'NOT_FOUND', reason: 'resume-unknown', message: 'the session ended' });
      if (member.link === away) room.remove(member);
      this.dropRoomIfEmpty(room);
    });
    member.link = away;
    const held = relay.seats.hold(member, relay.config.resumeGraceMs, () => {
      if (member.link !== away) return;
      if (room.remove(member)) relay.log.info(`left: ${member.id} room=${room.id} (did not come back)`);
      this.dropRoomIfEmpty(room);
    });
    if (!held) {
      member.link = this;
      return false;
    }
    this.scope = null;
    relay.log.info(`away: ${member.id} room=${room.id}, seat held ${relay.config.resumeGraceMs} ms`);
    return true;
  }

  private dropRoomIfEmpty(room: Room): void {
    if (room.size === 0 && room.lobby.size === 0 && this.relay.rooms.get(room.id) === room) this.relay.rooms.delete(room.id);
  }

  private ended(code: number): void {
    this.clearJoinTimer();
    if (this.throttled) clearTimeout(this.throttled);
    this.throttled = null;
    // 1006: no closing handshake, the network or the peer died; anything else was meant
    if (!(this.state === 'joined' && code === 1006 && this.holdSeat())) this.leaveRoom();
    this.state = 'closed';
    this.onEnd(this);
  }
}
