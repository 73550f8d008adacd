import { closeSocket } from './close-socket.ts';
import { SdkError } from './errors.ts';
import { badFrame, handshake, inbound, reportError, type Handshake, type Inbound } from './handshake.ts';
import { reasonForClose, type DisconnectReason, type ErrorReason } from './protocol/codes.ts';
import {
  decodeChunkHeader,
  PROTOCOL_VERSION,
  type EventFrame,
  type JoinFrame,
  type JoinedFrame,
  type Method,
  type Params,
  type Result,
  type ServerFrame,
} from './protocol/messages.ts';
import { parseResult } from './protocol/validate-server.ts';

/** What the connection reports to the room that owns it. */
export interface ConnectionHandlers {
  event(frame: EventFrame): void;
  /**
   * Something went wrong that no call is waiting for: a malformed frame from the relay (not
   * tied to a request), or the relay's own `error` frame.
   */
  error(error: SdkError): void;
  /** A binary frame (a data stream chunk). */
  binary(frame: Uint8Array): void;
  /** The connection dropped; it is being re-established. */
  reconnecting(): void;
  /** A reconnection's rejoin waits in the relay's lobby (it had lost the session; the token asks for entry). */
  waiting(info: { requestedAt: number; ttl: number }): void;
  /** The connection is back: the relay's fresh view of the room (`resumed`: the same session). */
  reconnected(joined: JoinedFrame): void;
  /** The session is over. */
  closed(reason: DisconnectReason): void;
}

/** How a dropped connection is retried. */
export interface ReconnectPolicy {
  /**
   * Give up after trying this long (ms, default 30000; an attempt under way is cut there). Drops within 5 s of coming back count
   * as one reconnection: the time away adds up and the backoff goes on growing. A rejoin the
   * relay holds in its lobby (it lost the session, and the token asks for entry) waits there
   * until the lobby's `ttl` or this runs out, whichever comes first: then the session ends
   * (`connection-lost`; `denied` if a moderator denied it).
   */
  maxTimeMs?: number;
  /** First delay (ms, default 250, at least 10); each next one doubles, with ±30% jitter. */
  initialDelayMs?: number;
  /** Longest delay between attempts (ms, default 5000, at least 10). */
  maxDelayMs?: number;
}

/** Options of {@link Connection.open}. */
export interface OpenOptions {
  /** The relay's URLs (the nodes of one cluster), tried in order. */
  urls: readonly string[];
  join: JoinFrame;
  timeoutMs: number;
  /** Heartbeat interval: a ping after this long without a frame; dead after 2.5 intervals. */
  heartbeatMs: number;
  /** `false`: a dropped connection ends the session. */
  reconnect: ReconnectPolicy | false;
  signal?: AbortSignal;
  /** Called when the relay holds the join in the lobby. */
  onWaiting?: (info: { requestedAt: number; ttl: number }) => void;
}

interface Pending {
  /** What the request was: its result is checked against the method. */
  method: Method;
  params: unknown;
  resolve(value: unknown): void;
  reject(error: SdkError): void;
  timer: ReturnType<typeof setTimeout>;
}

interface Queued extends Pending {
  frame: string;
  id: number;
}

/** Bytes of a string's UTF-8, without encoding it. */
function utf8Length(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) n += c >= 0x800 && (c < 0xd800 || c > 0xdfff) ? 2 : 1;
  }
  return n;
}

/**
 * A connection that drops sooner than this after it came back goes on with the same
 * reconnection: its backoff and the time already spent away count on, so a relay that takes the
 * session and drops it at once is not retried for ever. One that held longer starts afresh (at
 * most one reconnection every few seconds: no loop to worry about).
 */
const STABLE_MS = 5000;

/** Disconnect reasons a refused resume or rejoin ends the session with. */
const FINAL_REASONS: Partial<Record<ErrorReason, DisconnectReason>> = { removed: 'removed', 'room-ended': 'room-ended', 'duplicate-identity': 'duplicate-identity', denied: 'denied' };


/**
 * The signalling WebSocket of one room session: the join handshake, requests matched to
 * responses by id, pushed events handed to the room — and, when the socket drops, reconnection
 * with the relay's resume credential: calls made meanwhile wait and go out once it is back;
 * calls in flight at the drop fail with `CONNECTION_LOST` (they may or may not have run, and
 * are never sent twice).
 */
export class Connection {
  private nextId = 1;
  private ws!: WebSocket;
  private state: 'open' | 'reconnecting' | 'closed' = 'open';
  private readonly pending = new Map<number, Pending>();
  private readonly queued: Queued[] = [];
  private handlers: ConnectionHandlers | null = null;
  private closedReason: DisconnectReason | null = null;
  private readonly whenClosed: Array<() => void> = [];
  /** Frames that arrived before the room attached its handlers. */
  private early: Inbound[] = [];
  private credential = '';
  /** `leave()` was called: calls that fail from now on fail because of it. */
  private leaving = false;
  /** The relay's largest accepted frame (from `joined.limits`); larger requests are refused here. */
  private maxFrameBytes = Infinity;
  private lastFrameAt = Date.now();
  /** When the current socket was adopted. */
  private adoptedAt = 0;
  /** The reconnection under way or last made (none yet: null): time spent away in it, and its next delay. */
  private streak: { awayMs: number; delay: number } | null = null;
  private heartbeat: ReturnType<typeof setInterval> | null = null;
  /** Aborted when the session is over: a reconnection's handshake or backoff under way stops with it (no socket or timer outlives `leave()`). */
  private readonly over = new AbortController();

  /** The index in `options.urls` of the node last joined (tried first when the connection drops). */
  private node = 0;

  private constructor(private readonly options: OpenOptions) {}

  /**
   * `attempt` against each node in turn, starting with the one last joined, until one answers:
   * a node that cannot be reached (or does not answer in time) gives way to the next; any
   * other error is the answer.
   */
  private async anyNode(attempt: (url: string) => Promise<Handshake>): Promise<Handshake> {
    const { urls } = this.options;
    let last: unknown;
    for (let i = 0; i < urls.length; i++) {
      const index = (this.node + i) % urls.length;
      try {
        const result = await attempt(urls[index]!);
        this.node = index;
        return result;
      } catch (err) {
        if (!(err instanceof SdkError && (err.code === 'CONNECTION_FAILED' || err.code === 'TIMEOUT'))) throw err;
        last = err;
      }
    }
    throw last;
  }

  /** Open the socket, send the join frame, and resolve with the relay's `joined` answer. */
  static async open(options: OpenOptions): Promise<{ connection: Connection; joined: JoinedFrame }> {
    const connection = new Connection(options);
    const result = await connection.anyNode((url) => handshake(url, options.join, options));
    connection.adopt(result);
    return { connection, joined: result.joined };
  }

  /** Make a socket that completed its handshake this connection's socket. */
  private adopt({ ws, joined, early }: Handshake): void {
    this.ws = ws;
    this.credential = joined.resume.credential;
    const limit = joined.limits.maxFrameBytes;
    this.maxFrameBytes = limit > 0 ? limit : Infinity;
    this.lastFrameAt = this.adoptedAt = Date.now();
    ws.onerror = null;
    ws.onclose = (event) => {
      if (ws !== this.ws) return;
      try {
        this.onSocketClose(event.code);
      } catch (error) {
        reportError(error);
      }
      for (const fn of this.whenClosed.splice(0)) fn();
    };
    ws.onmessage = (event) => {
      if (ws !== this.ws) return;
      this.lastFrameAt = Date.now();
      this.deliver(inbound(event.data));
    };
    for (const frame of early) this.deliver(frame);
    this.startHeartbeat(this.options.heartbeatMs);
  }

  /**
   * The relay's silence is noticed: a ping after `interval` without any frame, and a socket
   * silent for 2.5 intervals is taken for dead, whatever TCP believes.
   */
  private startHeartbeat(interval: number): void {
    this.stopHeartbeat();
    this.heartbeat = setInterval(() => {
      const silent = Date.now() - this.lastFrameAt;
      if (silent > interval * 2.5) {
        const dead = this.ws;
        this.onSocketClose(4008, 'connection-lost');
        closeSocket(dead, 4008, 'heartbeat-timeout', 0);
      } else if (silent >= interval && this.ws.readyState === 1) this.ws.send('{"type":"ping"}');
    }, interval);
    (this.heartbeat as { unref?: () => void }).unref?.();
  }

  private stopHeartbeat(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }

  /** Attach the room; frames that arrived meanwhile are delivered now. */
  attach(handlers: ConnectionHandlers): void {
    this.handlers = handlers;
    const early = this.early;
    this.early = [];
    for (const frame of early) this.deliver(frame);
    if (this.closedReason) handlers.closed(this.closedReason);
  }

  /** Hand what arrived to whom it concerns. Never throws: it runs in the socket's handler. */
  private deliver(frame: Inbound): void {
    const handlers = this.handlers;
    if (!handlers) {
      this.early.push(frame);
      return;
    }
    try {
      this.dispatch(frame, handlers);
    } catch (cause) {
      // a fault of the SDK's own handling: told to the room, the socket's handler goes on
      try {
        handlers.error(new SdkError('INTERNAL_ERROR', `handling a frame from the relay failed: ${String(cause)}`, { reason: 'internal', cause }));
      } catch (error) {
        reportError(error);
      }
    }
  }

  private dispatch(frame: Inbound, handlers: ConnectionHandlers): void {
    if (frame instanceof Uint8Array) {
      if (decodeChunkHeader(frame)) handlers.binary(frame);
      else handlers.error(new SdkError('INTERNAL_ERROR', 'the relay sent a binary frame that is not a stream chunk', { reason: 'bad-chunk' }));
      return;
    }
    if (!frame.ok) {
      // a malformed answer to a request fails that request; anything else is told to the room
      const pending = frame.id === undefined ? undefined : this.pending.get(frame.id);
      if (pending) this.settle(frame.id!, pending, badFrame(frame.problem));
      else handlers.error(badFrame(frame.problem));
      return;
    }
    const value = frame.value;
    if (value?.type === 'response') this.onResponse(value);
    else if (value?.type === 'event') handlers.event(value);
    else if (value?.type === 'error') handlers.error(SdkError.fromWire(value.error));
  }

  /**
   * Send a request and resolve with its result, or reject with the relay's error. While the
   * connection is being re-established the request waits (its timeout running).
   */
  request<M extends Method>(method: M, params: Params<M>, timeoutMs = 10_000): Promise<Result<M>> {
    if (this.state === 'closed') return Promise.reject(this.endedError(method, false));
    const id = this.nextId++;
    let frame: string;
    try {
      frame = JSON.stringify({ type: 'request', id, method, params });
    } catch (err) {
      // a BigInt or a circular object: the caller's mistake, told as the promise's error
      return Promise.reject(new SdkError('INVALID_ARGUMENT', `${method}: the request cannot be sent as JSON (${err instanceof Error ? err.message : String(err)})`, { reason: 'not-json' }));
    }
    // a transport limit, not a grant: the relay would refuse the frame unread
    if (frame.length > this.maxFrameBytes / 3 && utf8Length(frame) > this.maxFrameBytes) {
      return Promise.reject(new SdkError('PAYLOAD_TOO_LARGE', `${method}: the request is ${utf8Length(frame)} bytes; this relay accepts frames of at most ${this.maxFrameBytes} (use dataStream for large data)`, { reason: 'frame-too-large' }));
    }
    return new Promise<Result<M>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        const at = this.queued.findIndex((q) => q.id === id);
        if (at >= 0) this.queued.splice(at, 1);
        reject(new SdkError('TIMEOUT', `${method}: no answer from the relay within ${timeoutMs} ms`));
      }, timeoutMs);
      const entry: Pending = { method, params, resolve: resolve as (value: unknown) => void, reject, timer };
      if (this.state === 'reconnecting') this.queued.push({ ...entry, frame, id });
      else {
        this.pending.set(id, entry);
        this.ws.send(frame);
      }
    });
  }

  /** True once the session is over (left, removed, ended, lost for good). */
  get ended(): boolean {
    return this.state === 'closed';
  }

  /** Send a binary frame (a stream chunk). */
  sendBinary(frame: Uint8Array): void {
    if (this.state !== 'open' || this.ws.readyState !== 1) throw this.endedError('sending', true);
    this.ws.send(frame);
  }

  /**
   * Leave deliberately: the relay removes the session and answers, then the socket closes.
   * Resolves once it has (or after `timeoutMs` if the relay does not answer).
   */
  async leave(timeoutMs = 2000): Promise<void> {
    this.leaving = true;
    if (this.state === 'open' && this.ws.readyState === 1) {
      await this.request('session.leave', {}, timeoutMs).catch(() => undefined);
    }
    const closed = new Promise<void>((resolve) => {
      if (this.ws.readyState === 3) return resolve();
      const timer = setTimeout(resolve, timeoutMs);
      this.whenClosed.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    closeSocket(this.ws, 1000, 'left');
    this.finish('left');
    return closed;
  }

  /** The error of a call that cannot complete because the session ended. */
  private endedError(what: string, inFlight: boolean): SdkError {
    // while a deliberate leave is under way, what stops is stopped by the leave, not by a lost link
    const reason = this.closedReason ?? (this.leaving ? 'left' : 'connection-lost');
    if (reason === 'room-ended') return new SdkError('ROOM_ENDED', `${what}: the room has ended`, { reason });
    if (inFlight && reason === 'connection-lost') return new SdkError('CONNECTION_LOST', `${what}: the connection was lost before the relay answered`);
    return new SdkError('NOT_CONNECTED', `${what}: not connected to the room (${reason})`, { reason });
  }

  /** A response: its request settles with the result, checked against the method, or the relay's error. */
  private onResponse(frame: Extract<ServerFrame, { type: 'response' }>): void {
    const pending = this.pending.get(frame.id);
    if (!pending) return;
    if ('error' in frame) return this.settle(frame.id, pending, SdkError.fromWire(frame.error));
    const result = parseResult(pending.method, frame.result, pending.params as Params<Method>);
    this.settle(frame.id, pending, result.ok ? null : badFrame(`${pending.method} result ${result.problem}`), result.ok ? result.value : undefined);
  }

  private settle(id: number, pending: Pending, error: SdkError | null, result?: unknown): void {
    this.pending.delete(id);
    clearTimeout(pending.timer);
    if (error) pending.reject(error);
    else pending.resolve(result);
  }

  private onSocketClose(code: number, reason: DisconnectReason = reasonForClose(code)): void {
    if (this.state !== 'open') return;
    this.stopHeartbeat();
    // in flight: the relay may or may not have run them; they are never sent twice
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(new SdkError('CONNECTION_LOST', 'the connection was lost before the relay answered'));
      this.pending.delete(id);
    }
    const retry = !this.leaving && this.options.reconnect !== false && (reason === 'connection-lost' || reason === 'server-shutdown');
    if (!retry) return this.finish(reason);
    this.state = 'reconnecting';
    this.handlers?.reconnecting();
    void this.reconnect(this.options.reconnect as ReconnectPolicy, reason);
  }

  /**
   * Try again with backoff and jitter: resume the session, or, if the relay lost it, join anew.
   * A drop soon after the last reconnection continues it ({@link STABLE_MS}).
   */
  private async reconnect(policy: ReconnectPolicy, cause: DisconnectReason): Promise<void> {
    const startedAt = Date.now();
    const streak = this.streak && startedAt - this.adoptedAt < STABLE_MS ? this.streak : { awayMs: 0, delay: policy.initialDelayMs ?? 250 };
    this.streak = streak;
    const deadline = startedAt + (policy.maxTimeMs ?? 30_000) - streak.awayMs;
    while (this.state === 'reconnecting' && Date.now() < deadline) {
      await this.pause(Math.min(deadline - Date.now(), streak.delay * (0.7 + Math.random() * 0.6)));
      streak.delay = Math.min(streak.delay * 2, policy.maxDelayMs ?? 5000);
      if (this.state !== 'reconnecting') return;
      try {
        // each handshake (a node, then a join after a resume the relay no longer knows) has at most
        // what is left of the reconnection's time: a silent relay held it up to 5 s past maxTimeMs a node
        const cap = Math.min(this.options.timeoutMs, 5000);
        const attempt = {
          get timeoutMs() {
            return Math.max(1, Math.min(cap, deadline - Date.now()));
          },
          signal: this.over.signal,
          waitUntil: deadline,
          onWaiting: (info: { requestedAt: number; ttl: number }) => this.handlers?.waiting(info),
        };
        const result = await this.anyNode(async (url) => {
          try {
            return await handshake(url, { type: 'resume', v: PROTOCOL_VERSION, credential: this.credential }, attempt);
          } catch (err) {
            // the relay no longer knows the session (it restarted, or the seat expired): join again
            if (!(err instanceof SdkError && err.reason === 'resume-unknown')) throw err;
            return handshake(url, this.options.join, attempt);
          }
        });
        if (this.state !== 'reconnecting') {
          closeSocket(result.ws, 1000, 'left');
          return;
        }
        this.state = 'open';
        streak.awayMs += Date.now() - startedAt;
        this.adopt(result);
        for (const q of this.queued.splice(0)) {
          this.pending.set(q.id, q);
          this.ws.send(q.frame);
        }
        this.handlers?.reconnected(result.joined);
        return;
      } catch (err) {
        // a budget that refills (the relay full for a moment, the token's arrivals in debt) is worth waiting for
        const transient = err instanceof SdkError && err.code === 'RATE_LIMITED' && (err.reason === 'join-rate' || err.reason === 'room-full' || err.reason === 'too-many-rooms');
        if (err instanceof SdkError && err.code !== 'CONNECTION_FAILED' && err.code !== 'TIMEOUT' && !transient) {
          return this.finish((err.reason && FINAL_REASONS[err.reason]) || cause);
        }
      }
    }
    // out of time: what started it (a lost connection, or the relay shutting down) ends it
    this.finish(cause);
  }

  /** Wait `ms`, or less if the session ends meanwhile. */
  private pause(ms: number): Promise<void> {
    const { signal } = this.over;
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done);
    });
  }

  /** The session is over: everything waiting fails, the room is told once. */
  private finish(reason: DisconnectReason): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.closedReason = reason;
    this.stopHeartbeat();
    this.over.abort();
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(this.endedError('the request', true));
      this.pending.delete(id);
    }
    for (const q of this.queued.splice(0)) {
      clearTimeout(q.timer);
      q.reject(new SdkError('CONNECTION_LOST', 'the connection could not be re-established'));
    }
    this.handlers?.closed(reason);
  }
}
