/**
 * Opening a session's socket: the join (or resume) frame sent, and the relay's answer read —
 * `joined`, a refusal, the lobby's wait — into what the connection then adopts.
 */
import { closeSocket } from './close-socket.ts';
import { SdkError } from './errors.ts';
import { call } from './emitter.ts';
import type { JoinFrame, JoinedFrame, ResumeFrame, ServerFrame } from './protocol/messages.ts';
import { bad, type Parsed } from './protocol/parse.ts';
import { parseServerFrame } from './protocol/validate-server.ts';

export const reportError = (error: unknown) => call(() => { throw error; }, undefined);

/** The relay broke the protocol: not the caller's fault. */
export const badFrame = (problem: string) => new SdkError('INTERNAL_ERROR', `the relay sent a malformed frame: ${problem}`, { reason: 'bad-frame' });

/**
 * What arrived on the socket: a binary frame, or a text frame parsed (`null`: a frame to
 * ignore, e.g. an event a newer relay knows and this SDK does not).
 */
export type Inbound = Uint8Array | Parsed<ServerFrame | null>;

/** Parse what a socket delivered; never throws. */
export function inbound(data: unknown): Inbound {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (typeof data !== 'string') return bad('a frame neither text nor binary');
  return parseServerFrame(data);
}

/** What a join (or resume) handshake gives the connection. */
export interface Handshake {
  ws: WebSocket;
  joined: JoinedFrame;
  /** Frames that came right behind `joined`, before anyone listened. */
  early: Inbound[];
}

/** The longest delay a timer takes (browsers and Node fire a longer one at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** WebSocket's close code for a message too big to process (RFC 6455 §7.4.1). */
const MESSAGE_TOO_BIG = 1009;

/**
 * Why the join failed when the relay closed the socket before answering it. Before the join the
 * only frame sent is the join (or resume) frame, so a 1009 refuses that frame: a token or `name`
 * too long for what the relay reads before authentication (16 KiB by default). Every node would
 * refuse it alike, so it is not a connection failure to retry elsewhere.
 */
function closedBeforeJoin(code: number): SdkError {
  if (code === MESSAGE_TOO_BIG) return new SdkError('PAYLOAD_TOO_LARGE', 'the join frame is larger than the relay reads before a join (16 KiB by default): a shorter token or name', { reason: 'frame-too-large' });
  return new SdkError('CONNECTION_FAILED', `the relay closed the connection before the join completed (code ${code})`);
}

/** Options of {@link handshake}. */
export interface HandshakeOptions {
  /** How long the relay has to answer (a lobby wait has its own time: the relay's `ttl`). */
  timeoutMs: number;
  /** Aborts the handshake: it fails `ENTRY_CANCELLED` (`aborted`), its socket closed, its timer cleared. */
  signal?: AbortSignal;
  onWaiting?: (info: { requestedAt: number; ttl: number }) => void;
  /**
   * When (`Date.now()` ms) a lobby wait ends whatever its `ttl` says: a reconnection's own
   * deadline. Past it the handshake fails `ENTRY_TIMEOUT` without a reason.
   */
  waitUntil?: number;
}

/**
 * The timer of a lobby wait. The relay keeps the lobby's time; ours only guards against a relay
 * gone silent (within what a timer holds: past it, one fires at once) — and, for a
 * reconnection, ends the wait at the reconnection's deadline, which a lobby must not stretch.
 */
function lobbyTimer(ttl: number, waitUntil: number | undefined, settle: (error: SdkError) => void): ReturnType<typeof setTimeout> {
  const ttlMs = Math.max(0, ttl) * 1000 + 10_000;
  const leftMs = waitUntil === undefined ? Infinity : Math.max(0, waitUntil - Date.now());
  const cut = leftMs < ttlMs;
  const expire = () => settle(cut ? new SdkError('ENTRY_TIMEOUT', 'the reconnection ran out of time (maxTimeMs) waiting in the lobby') : new SdkError('ENTRY_TIMEOUT', 'the lobby wait ran out', { reason: 'ttl' }));
  return setTimeout(expire, Math.min(MAX_TIMER_MS, ttlMs, leftMs));
}

/** Open a socket, send the first frame, and resolve with the relay's `joined` answer. */
export function handshake(url: string, first: JoinFrame | ResumeFrame, options: HandshakeOptions): Promise<Handshake> {
  const Impl = (globalThis as { WebSocket?: typeof WebSocket }).WebSocket;
  if (typeof Impl !== 'function') {
    return Promise.reject(new SdkError('CONNECTION_FAILED', 'no WebSocket implementation: in Node, set globalThis.WebSocket (e.g. from the ws package)', { reason: 'no-websocket' }));
  }
  return new Promise((resolve, reject) => {
    let ws: WebSocket;
    try {
      ws = new Impl(url);
    } catch (cause) {
      reject(new SdkError('CONNECTION_FAILED', `cannot open ${url}`, { reason: 'bad-url', cause }));
      return;
    }
    ws.binaryType = 'arraybuffer';
    const early: Handshake['early'] = [];
    let settled = false;
    let waiting = false;
    let timer: ReturnType<typeof setTimeout>;
    const settle = (error: SdkError | null, joined?: JoinedFrame) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      if (!error) return resolve({ ws, joined: joined!, early });
      ws.onopen = ws.onmessage = ws.onclose = null;
      // not null: closing a socket that is still connecting reports an error (in Node's ws an unheard one ends the process)
      ws.onerror = () => undefined;
      closeSocket(ws, 1000, 'left');
      reject(error);
    };
    const onAbort = () => settle(new SdkError('ENTRY_CANCELLED', 'the join was cancelled', { reason: 'aborted', cause: options.signal?.reason }));
    const timeoutMs = options.timeoutMs;
    timer = setTimeout(() => settle(new SdkError('TIMEOUT', `no answer from the relay within ${timeoutMs} ms`)), timeoutMs);
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener('abort', onAbort);
    ws.onopen = () => ws.send(JSON.stringify(first));
    ws.onerror = () => settle(new SdkError('CONNECTION_FAILED', `cannot connect to ${url}`));
    ws.onclose = (event) => settle(closedBeforeJoin(event.code));
    ws.onmessage = (event) => {
      const parsed = inbound(event.data);
      // frames right behind `joined` in the same read, before the connection adopts the socket
      if (settled) return void early.push(parsed);
      if (parsed instanceof Uint8Array) return;
      // a frame of a type this SDK does not know is a newer relay's, ignored; any other that
      // does not parse: the relay broke the protocol before the join completed, no room to tell, the join fails
      if (!parsed.ok) {
        if (!parsed.unknown) settle(badFrame(parsed.problem));
        return;
      }
      const frame = parsed.value;
      if (!frame) return;
      if (frame.type === 'joined') return settle(null, frame);
      if (frame.type === 'lobby') {
        // once: a relay sending it again and again would keep the join pending for ever
        if (waiting) return;
        waiting = true;
        clearTimeout(timer);
        timer = lobbyTimer(frame.ttl, options.waitUntil, settle);
        if (options.onWaiting) {
          try {
            options.onWaiting({ requestedAt: frame.requestedAt, ttl: frame.ttl });
          } catch (error) {
            reportError(error);
          }
        }
        return;
      }
      if (frame.type === 'join-error' || frame.type === 'error') settle(SdkError.fromWire(frame.error));
    };
  });
}
