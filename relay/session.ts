import type { Socket } from 'node:net';
import type { RawData, WebSocket } from 'ws';
import { CloseCode, wireError, type ErrorReason } from '../src/protocol/codes.ts';
import type { ErrorFrame, JoinFrame, RequestFrame, ResumeFrame, WireError } from '../src/protocol/messages.ts';
import { parseEntryFrame } from '../src/protocol/validate.ts';
import type { RelayContext } from './context.ts';
import { Connection, rawText } from './connection.ts';
import type { LogFields } from './log.ts';
import { judge } from './join.ts';
import { rawLength } from './frame-gate.ts';
import { release } from './data/own-bytes.ts';
import { AheadFrames } from './ahead-frames.ts';
import { readMemberText, unhandledAnswer } from './text-frames.ts';
import type { Entered, LobbyJoiner, LobbyPlace, MemberConnection, PortMember, RoomPort, RoomSeam } from './seam.ts';
import type { Refusal } from './token/verify.ts';

export { OVERSIZE_FACTOR } from './connection.ts';

/** What the server learns of a session's life. */
export interface SessionHooks {
  /** It left the pre-authentication state (joined, waits in a lobby, was refused, or closed). */
  authenticated(session: Session): void;
  /** Its socket closed. */
  ended(session: Session): void;
}

/**
 * A connection is closed for want of a join between 1 and 1 + this times the join timeout, at
 * random: a thousand sockets opened together by one client, each closed together ten seconds
 * later and reconnected at once, closed and accepted a thousand at a time every cycle, and each
 * time held the event loop 50–90 ms (socket teardown and accept are Node's own work, outside
 * the scheduler's turns). Spread, the next cycle's connections arrive spread too.
 */
export const JOIN_TIMEOUT_SPREAD = 0.25;

/** Frames a client may send between its join frame and the answer (the SDK sends none). */
const EARLY_FRAMES = 16;

/**
 * What is said on one connection: unauthenticated until its join (or resume) frame is accepted,
 * waiting in a lobby, or a member of one room whose requests are dispatched through the handler
 * table. How its bytes come and go, within their budgets, is the {@link Connection}'s.
 */
export class Session extends Connection implements LobbyJoiner, MemberConnection {
  /** `entering`: its join or resume went to the room seam and is not answered yet. */
  private state: 'pending' | 'entering' | 'waiting' | 'joined' | 'closed' = 'pending';
  private lobbyPlace: LobbyPlace | null = null;
  private joinFrame: JoinFrame | null = null;
  private joinTimer: ReturnType<typeof setTimeout> | null;
  private port: RoomPort | null = null;
  /** Frames that came while entering: handled once in (at most {@link EARLY_FRAMES}). */
  private early: Array<{ data: RawData; isBinary: boolean }> = [];
  /** Frames the room sent while entering, before the answer: they follow `joined` (or `lobby`). */
  private readonly ahead = new AheadFrames();
  /** The answer to this connection's entry waits for its token's turn (the member is seated). */
  private answering = false;
  private refusals = 0;
  private refusalWindow = 0;

  constructor(
    ws: WebSocket,
    relay: RelayContext,
    private readonly seam: RoomSeam,
    private readonly hooks: SessionHooks,
    socket: Socket,
  ) {
    super(ws, relay, socket, () => this.port?.owes() ?? 0);
    // in the pre-auth flow's turn: sockets opened together time out together
    this.joinTimer = setTimeout(() => {
      this.joinTimer = null;
      if (this.state === 'pending') relay.frames.runInTurn(this.gate.flow, () => this.refuseFrame(CloseCode.JOIN_TIMEOUT, 'no join frame arrived in time', 'join-timeout'));
    }, relay.config.joinTimeoutMs * (1 + JOIN_TIMEOUT_SPREAD * Math.random()));
    ws.on('close', (code) => this.ended(code));
  }

  protected get preAuth(): boolean {
    return this.state !== 'joined' && this.state !== 'waiting';
  }

  protected get over(): boolean {
    return this.state === 'closed';
  }

  protected get who(): LogFields {
    return this.port ? { participant: this.port.member.id, room: this.port.roomId } : {};
  }

  /** What this connection's member is reached through (itself). */
  get link(): MemberConnection {
    return this;
  }

  protected refusedBeforeJoin(): void {
    this.setState('closed');
  }

  private setState(next: 'entering' | 'waiting' | 'joined' | 'closed'): void {
    if (this.state === 'pending') this.hooks.authenticated(this);
    this.state = next;
  }

  override sendRaw(data: Buffer, optional = false, lazy = false): void {
    if (this.state !== 'entering') return super.sendRaw(data, optional, lazy);
    this.ahead.keep(data, false, optional);
  }

  override sendBinary(data: Uint8Array): void {
    if (this.state !== 'entering') return super.sendBinary(data);
    this.ahead.keep(data, true, false);
  }

  /** What the room sent ahead of the answer, now that the answer went. */
  private sendAhead(): void {
    for (const f of this.ahead.take()) {
      if (f.binary) super.sendBinary(f.data);
      else super.sendRaw(Buffer.from(f.data), f.optional);
    }
  }

  /** A connection that has not sent its join frame gives its place to a newer one (the relay is at `--max-pending`). */
  evict(): void {
    this.refuseFrame(CloseCode.JOIN_TIMEOUT, 'the relay needed the place of a connection that had not joined', 'evicted');
    this.terminate();
  }

  /** The member, once joined. */
  get member(): PortMember | null {
    return this.port?.member ?? null;
  }

  /** Leave the room (if joined) and close the socket with `code`; what was sent before goes first. */
  close(code: number, reason: string): void {
    if (this.state === 'closed') return;
    this.clearJoinTimer();
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
    let parsed = false;
    try {
      parsed = this.onFrameUnguarded(data, isBinary);
    } catch (err) {
      this.fault('frame handling failed', err);
      if (this.state === 'closed') return;
      const error = wireError('INTERNAL_ERROR', 'the relay could not handle this frame', 'internal');
      // a request is answered as a request, so that its caller does not wait for its timeout
      this.send(unhandledAnswer(data, isBinary, error));
      if (this.state !== 'pending') return;
      this.clearJoinTimer();
      this.setState('closed');
      this.closeSoon(CloseCode.JOIN_REFUSED, 'internal');
    }
    // a member's text frame, read into a string: its bytes are not read again. A large one that
    // waited for its budget has been promoted by now, so its memory is given back at once
    // rather than at V8's next full collection (see own-bytes.ts)
    if (parsed && Buffer.isBuffer(data)) release(data);
  }

  /** Handle a frame; true when it was a member's text frame, now read (its bytes are not kept). */
  private onFrameUnguarded(data: RawData, isBinary: boolean): boolean {
    if (this.state === 'closed') return false;
    this.alive = true;
    if (this.state === 'pending') {
      this.onJoinFrame(data, isBinary);
      return false;
    }
    if (this.state === 'entering') {
      if (this.early.length < EARLY_FRAMES) this.early.push({ data, isBinary });
      else this.send(unhandledAnswer(data, isBinary, { code: 'INVALID_STATE', kind: 'State', message: 'the join is not answered yet: wait for it', reason: 'waiting' }));
      return false;
    }
    if (this.state === 'waiting') {
      this.send(unhandledAnswer(data, isBinary, { code: 'INVALID_STATE', kind: 'State', message: 'waiting in the lobby: nothing can be done before a moderator admits you', reason: 'waiting' }));
      return false;
    }
    if (isBinary) {
      this.onBinary(data);
      return false;
    }
    const read = readMemberText(data, this.relay.config.maxFrameBytes);
    if ('request' in read) this.request(read.request);
    else this.send(read.answer);
    return true;
  }

  private request(request: RequestFrame): void {
    this.port?.request(request, this).catch((err: unknown) => this.fault('request failed after its answer', err, { method: request.method }));
  }

  private onJoinFrame(data: RawData, isBinary: boolean): void {
    if (isBinary || rawLength(data) > this.relay.config.maxJoinFrameBytes) {
      return this.refuseFrame(CloseCode.PROTOCOL_ERROR, `the join frame must be a text frame of at most ${this.relay.config.maxJoinFrameBytes} bytes`, 'bad-join-frame');
    }
    const parsed = parseEntryFrame(rawText(data));
    if (!parsed.ok) return this.refuseFrame(CloseCode.PROTOCOL_ERROR, parsed.problem, 'bad-join-frame');
    if (parsed.value.type === 'resume') {
      this.clearJoinTimer();
      this.setState('entering');
      this.seam.resume(parsed.value, this).then(
        (entered) => ('port' in entered ? this.inTokenTurn(entered, () => this.entered(entered, 'resumed')) : this.refuseJoin(entered, 'resume')),
        (err: unknown) => this.enterFailed(err, 'resume'),
      );
      return;
    }
    this.clearJoinTimer();
    const frame = parsed.value;
    const verdict = judge(this.relay, frame);
    if (!('claims' in verdict)) return this.refuseJoin(verdict, frame);
    this.joinFrame = frame;
    this.setState('entering');
    if (!verdict.ask) {
      this.seam.enter(verdict, this).then(
        (entered) => ('port' in entered ? this.inTokenTurn(entered, () => this.entered(entered, 'joined')) : this.refuseJoin(entered, frame)),
        (err: unknown) => this.enterFailed(err, frame),
      );
      return;
    }
    this.seam.wait(verdict, this).then(
      (place) => {
        if ('code' in place) return this.refuseJoin(place, frame);
        // admitted before this answer came (a lobby elsewhere): that admission answers the join
        if (this.answering || this.state === 'joined') return;
        if (this.state !== 'entering') return place.cancel(); // gone meanwhile
        this.lobbyPlace = place;
        this.setState('waiting');
        this.chargeUnfinishedTo(`${verdict.project}\n${verdict.tokenKey}`);
        this.early = [];
        this.sendAhead();
      },
      (err: unknown) => this.enterFailed(err, frame),
    );
  }

  /**
   * `fn` as work of the entering member's token, in that flow's turn: the answer to a join or a
   * resume (the `joined` frame: the whole stage, 805 KB for a thousand long names, 10–15 ms to
   * encode) was sent in a promise's continuation, after the scheduler's turn, charged to nobody
   * and bounded by no slice (waves of 100 joins of the cheapest token held the event loop up to
   * 192 ms a second; one moderator's admission of 100 joiners 1.1 s).
   */
  private inTokenTurn({ port }: Entered, fn: () => void): void {
    const frames = this.relay.frames;
    const flow = frames.join(`${port.member.project}\n${port.member.tokenKey}`);
    this.answering = true;
    frames.runInTurn(flow, () => {
      try {
        this.answering = false;
        fn();
      } catch (err) {
        // run from the scheduler's timer: a fault costs this connection, never the process (and
        // the member leaves, whether or not its session had the room yet)
        this.fault('answering an entry failed', err);
        const seated = this.port !== port;
        this.close(CloseCode.JOIN_REFUSED, 'internal');
        if (seated) port.leave();
      } finally {
        frames.leave(flow);
      }
    });
  }

  /** In the room, through `port` (a join, an admission from the lobby, or a resume). */
  private entered({ port, joined }: Entered, how: 'joined' | 'resumed'): void {
    if (this.state !== 'entering' && this.state !== 'waiting') {
      // the socket went while the room seam was answering. A resumed member leaves too: the
      // credential it would come back with was in the answer it never got (the one it holds
      // is used up), so a held seat would only keep its identity from joining again
      port.leave();
      return;
    }
    this.lobbyPlace = null;
    this.port = port;
    this.setState('joined');
    // its frames now use its token's share of the relay: every connection of one token shares one
    this.authenticated(`${port.member.project}\n${port.member.tokenKey}`);
    // and a domain-wide token's are read at its project's shared rate
    if (port.member.domainWide) this.gate.shareText(this.relay.budgets.domain(port.member.project).text);
    if (how === 'joined') {
      this.relay.counters.joins++;
      this.relay.log.info('joined', { participant: port.member.id, room: port.roomId, project: port.member.project, tier: port.member.tier });
    }
    this.send(joined);
    if (this.ahead.lost) {
      // the room sent it more than was kept while the answer waited: it comes back rather than miss it
      this.ahead.clear();
      this.close(CloseCode.SLOW_CONSUMER, 'slow-consumer');
      return;
    }
    this.sendAhead();
    const early = this.early;
    this.early = [];
    for (const { data, isBinary } of early) this.onFrame(data, isBinary);
  }

  /** The room seam failed (a fault of the relay's, or a lost node): the join is refused, the connection lives no longer. */
  private enterFailed(err: unknown, frame: JoinFrame | 'resume'): void {
    this.fault('entering a room failed', err);
    this.refuseJoin({ code: 'INTERNAL_ERROR', kind: 'Network', reason: 'internal', message: 'the relay could not open this room: try again' }, frame);
  }

  /** A moderator admitted this joiner. */
  admitted(entered: Entered): void {
    // `entering`: a lobby elsewhere may decide before its answer to the wait arrives
    if (this.state !== 'waiting' && this.state !== 'entering') {
      entered.port.leave();
      return;
    }
    // seated: what the room sends it now is kept until its answer, which waits for its token's turn
    this.setState('entering');
    this.inTokenTurn(entered, () => this.entered(entered, 'joined'));
  }

  /** The lobby ended this joiner's wait with an error: its join fails with it. */
  leaveLobby(error: WireError): void {
    if (this.state !== 'waiting' && this.state !== 'entering') return;
    this.lobbyPlace = null;
    this.refuseJoin(error, this.joinFrame ?? 'resume');
  }

  get waitingForLobby(): boolean {
    return this.state === 'waiting';
  }

  replaced(): void {
    this.port = null;
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
  flooded(): void {
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
    const frame = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    this.port?.chunk(frame);
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
    this.early = [];
    const place = this.lobbyPlace;
    this.lobbyPlace = null;
    place?.cancel();
    const port = this.port;
    this.port = null;
    port?.leave();
  }

  private ended(code: number): void {
    this.clearJoinTimer();
    this.detach();
    // 1006: no closing handshake, the network or the peer died; 4008: the client took the link for
    // dead by its heartbeat (it was slow, not gone: a laptop that slept) and resumes; anything else was meant
    const port = this.port;
    if (this.state === 'joined' && (code === 1006 || code === CloseCode.HEARTBEAT_TIMEOUT) && port?.hold()) this.port = null;
    else this.leaveRoom();
    this.setState('closed');
    this.hooks.ended(this);
  }
}
