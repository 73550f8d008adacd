import { SdkError } from './errors.ts';
import { reasonForClose, type DisconnectReason } from './protocol/codes.ts';
import type {
  EventFrame,
  JoinFrame,
  JoinedFrame,
  Method,
  Params,
  Result,
  ServerFrame,
  WireError,
} from './protocol/messages.ts';
import { isRecord } from './protocol/parse.ts';
import { call } from './emitter.ts';

const reportError = (error: unknown) => call(() => { throw error; }, undefined);

/** What the connection reports to the room that owns it. */
export interface ConnectionHandlers {
  event(frame: EventFrame): void;
  /** A binary frame (a data stream chunk). */
  binary(frame: Uint8Array): void;
  closed(reason: DisconnectReason): void;
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: SdkError): void;
  timer: ReturnType<typeof setTimeout>;
}

/** Options of {@link Connection.open}. */
export interface OpenOptions {
  url: string;
  join: JoinFrame;
  timeoutMs: number;
  /** Heartbeat interval: a ping after this long without a frame; dead after 2.5 intervals. */
  heartbeatMs: number;
  signal?: AbortSignal;
  /** Called when the relay holds the join in the lobby. */
  onWaiting?: (info: { requestedAt: number; ttl: number }) => void;
}

const FRAME_TYPES = new Set<string>(['joined', 'lobby', 'join-error', 'response', 'event', 'error', 'pong']);

function parseServerFrame(data: unknown): ServerFrame | null {
  if (typeof data !== 'string') return null;
  try {
    const frame: unknown = JSON.parse(data);
    return isRecord(frame) && typeof frame.type === 'string' && FRAME_TYPES.has(frame.type) ? (frame as unknown as ServerFrame) : null;
  } catch {
    return null;
  }
}

/**
 * The signalling WebSocket of one room session: the join handshake, then requests matched to
 * responses by id, and pushed events handed to the room.
 */
export class Connection {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private handlers: ConnectionHandlers | null = null;
  private closedReason: DisconnectReason | null = null;
  private readonly whenClosed: Array<() => void> = [];
  /** Frames that arrived between `joined` and the room attaching its handlers. */
  private early: Array<EventFrame | Uint8Array> = [];

  private lastFrameAt = Date.now();
  private heartbeat: ReturnType<typeof setInterval> | null = null;

  private constructor(private readonly ws: WebSocket) {}

  /**
   * The relay's silence is noticed: a ping after `interval` without any frame, and a socket
   * silent for 2.5 intervals is taken for dead (`connection-lost`), whatever TCP believes.
   */
  private startHeartbeat(interval: number): void {
    this.heartbeat = setInterval(() => {
      const silent = Date.now() - this.lastFrameAt;
      if (silent > interval * 2.5) {
        this.ws.close(4008, 'heartbeat-timeout');
        this.onSocketClose(4008, 'connection-lost');
      } else if (silent >= interval && this.ws.readyState === 1) this.ws.send('{"type":"ping"}');
    }, interval);
    (this.heartbeat as { unref?: () => void }).unref?.();
  }

  /** Open the socket, send the join frame, and resolve with the relay's `joined` answer. */
  static open(options: OpenOptions): Promise<{ connection: Connection; joined: JoinedFrame }> {
    const Impl = (globalThis as { WebSocket?: typeof WebSocket }).WebSocket;
    if (typeof Impl !== 'function') {
      return Promise.reject(
        new SdkError('CONNECTION_FAILED', 'no WebSocket implementation: in Node, set globalThis.WebSocket (e.g. from the ws package)', { reason: 'no-websocket' }),
      );
    }
    return new Promise((resolve, reject) => {
      let ws: WebSocket;
      try {
        ws = new Impl(options.url);
      } catch (cause) {
        reject(new SdkError('CONNECTION_FAILED', `cannot open ${options.url}`, { reason: 'bad-url', cause }));
        return;
      }
      ws.binaryType = 'arraybuffer';
      const connection = new Connection(ws);
      let settled = false;
      let timer: ReturnType<typeof setTimeout>;
      const settle = (error: SdkError | null, joined?: JoinedFrame) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        if (error) {
          connection.shutdown();
          reject(error);
        } else resolve({ connection, joined: joined as JoinedFrame });
      };
      const onAbort = () => settle(new SdkError('ENTRY_CANCELLED', 'the join was cancelled', { reason: 'aborted', cause: options.signal?.reason }));
      timer = setTimeout(() => settle(new SdkError('TIMEOUT', `no answer from the relay within ${options.timeoutMs} ms`)), options.timeoutMs);
      if (options.signal?.aborted) return onAbort();
      options.signal?.addEventListener('abort', onAbort);

      ws.onopen = () => ws.send(JSON.stringify(options.join));
      ws.onerror = () => settle(new SdkError('CONNECTION_FAILED', `cannot connect to ${options.url}`));
      ws.onclose = (event) => {
        if (!settled) settle(new SdkError('CONNECTION_FAILED', `the relay closed the connection before the join completed (code ${event.code})`));
        connection.onSocketClose(event.code);
        connection.socketClosed();
      };
      ws.onmessage = (event) => {
        connection.lastFrameAt = Date.now();
        if (event.data instanceof ArrayBuffer) {
          if (settled) connection.onBinary(new Uint8Array(event.data));
          return;
        }
        const frame = parseServerFrame(event.data);
        if (!frame) return;
        if (settled) return connection.onFrame(frame);
        if (frame.type === 'joined') {
          connection.startHeartbeat(options.heartbeatMs);
          return settle(null, frame);
        }
        if (frame.type === 'lobby') {
          // the relay keeps the lobby's time; ours only guards against a relay gone silent
          clearTimeout(timer);
          timer = setTimeout(() => settle(new SdkError('ENTRY_TIMEOUT', 'the lobby wait ran out', { reason: 'ttl' })), frame.ttl * 1000 + 10_000);
          if (options.onWaiting) {
            try {
              options.onWaiting({ requestedAt: frame.requestedAt, ttl: frame.ttl });
            } catch (error) {
              reportError(error);
            }
          }
          return;
        }
        if (frame.type === 'join-error' || frame.type === 'error') return settle(SdkError.fromWire(frame.error));
      };
    });
  }

  /** Attach the room; events that arrived meanwhile are delivered now. */
  attach(handlers: ConnectionHandlers): void {
    this.handlers = handlers;
    const early = this.early;
    this.early = [];
    for (const frame of early) {
      if (frame instanceof Uint8Array) handlers.binary(frame);
      else handlers.event(frame);
    }
    if (this.closedReason) handlers.closed(this.closedReason);
  }

  /** Send a request and resolve with its result, or reject with the relay's error. */
  request<M extends Method>(method: M, params: Params<M>, timeoutMs = 10_000): Promise<Result<M>> {
    if (this.closedReason || this.ws.readyState !== 1) {
      return Promise.reject(this.endedError(method, false));
    }
    const id = this.nextId++;
    return new Promise<Result<M>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new SdkError('TIMEOUT', `${method}: no answer from the relay within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      this.ws.send(JSON.stringify({ type: 'request', id, method, params }));
    });
  }

  /** Send a binary frame (a stream chunk). */
  sendBinary(frame: Uint8Array): void {
    if (this.closedReason || this.ws.readyState !== 1) throw this.endedError('sending', true);
    this.ws.send(frame);
  }

  /**
   * Leave deliberately: the relay removes the session and answers, then the socket closes.
   * Resolves once it has (or after `timeoutMs` if the relay does not answer).
   */
  async leave(timeoutMs = 2000): Promise<void> {
    if (!this.closedReason && this.ws.readyState === 1) {
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
    if (this.ws.readyState <= 1) this.ws.close(1000, 'left');
    this.onSocketClose(1000, 'left');
    return closed;
  }

  /** @internal The socket has closed. */
  socketClosed(): void {
    for (const fn of this.whenClosed.splice(0)) fn();
  }

  /** The error of a call that cannot complete because the session ended. */
  private endedError(what: string, inFlight: boolean): SdkError {
    const reason = this.closedReason ?? 'connection-lost';
    if (reason === 'room-ended') return new SdkError('ROOM_ENDED', `${what}: the room has ended`);
    if (inFlight && reason === 'connection-lost') return new SdkError('CONNECTION_LOST', `${what}: the connection was lost before the relay answered`);
    return new SdkError('NOT_CONNECTED', `${what}: not connected to the room (${reason})`, { reason });
  }

  private shutdown(): void {
    this.ws.onopen = this.ws.onmessage = this.ws.onerror = null;
    if (this.ws.readyState <= 1) this.ws.close(1000, 'left');
  }

  private onBinary(frame: Uint8Array): void {
    if (this.handlers) this.handlers.binary(frame);
    else this.early.push(frame);
  }

  private onFrame(frame: ServerFrame): void {
    switch (frame.type) {
      case 'response':
        return this.onResponse(frame.id, 'error' in frame ? frame.error : null, 'result' in frame ? frame.result : undefined);
      case 'event':
        if (this.handlers) this.handlers.event(frame);
        else this.early.push(frame);
        return;
      default:
        return; // `error` frames answer malformed frames, which this SDK does not send
    }
  }

  private onResponse(id: number, error: WireError | null, result: unknown): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    this.pending.delete(id);
    clearTimeout(pending.timer);
    if (error) pending.reject(SdkError.fromWire(error));
    else pending.resolve(result);
  }

  private onSocketClose(code: number, reason: DisconnectReason = reasonForClose(code)): void {
    if (this.closedReason) return;
    this.closedReason = reason;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(this.endedError('the request', true));
      this.pending.delete(id);
    }
    this.handlers?.closed(reason);
  }
}
