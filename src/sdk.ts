import { Connection, type ReconnectPolicy } from './connection.ts';
import { SdkError } from './errors.ts';
import { PROTOCOL_VERSION, type JoinFrame } from './protocol/messages.ts';
import { browserPlatform, type MediaPlatform } from './media/platform.ts';
import { Room } from './room.ts';
import { peekClaims } from './token.ts';

/** The most relay URLs a join takes. */
const MAX_URLS = 16;

/** Options of `Sdk.join()`. */
export interface JoinOptions {
  /**
   * The relay's `ws://` or `wss://` URL, or the URLs of several nodes of one cluster: the first
   * that answers is joined, and when its node is lost the session resumes on the next.
   */
  url: string | readonly string[];
  /** The access token your backend minted. */
  token: string;
  /** The room to join; defaults to the token's `roomId`. */
  roomId?: string;
  /** Display name; defaults to the participant id. */
  name?: string;
  /** Your identity; defaults to the token's `participantId`, else a fresh UUID. */
  participantId?: string;
  /** Cancels a pending join (`ENTRY_CANCELLED`). */
  signal?: AbortSignal;
  /** How long to wait for the relay's answer, in ms (default 15000); the lobby wait has its own ttl. */
  timeoutMs?: number;
  /**
   * Called when the token asks for entry and the relay holds you in the lobby; `join()` stays
   * pending until a moderator admits you (resolves), denies you (`ENTRY_DENIED`), the wait
   * runs out (`ENTRY_TIMEOUT`), or you abort through `signal` (`ENTRY_CANCELLED`).
   */
  onWaiting?: (info: { requestedAt: number; ttl: number }) => void;
  /**
   * Heartbeat interval in ms (default 10000, at least 10): the SDK pings a relay that has been
   * silent this long and takes the connection for lost after 2.5 intervals of silence.
   */
  heartbeatMs?: number;
  /**
   * Re-establish a dropped connection (`reconnecting`, then `reconnected` with the room's state
   * reconciled) before giving up with `connection-lost`. Default: try for 30 s. `false`: a drop
   * ends the session.
   */
  reconnect?: ReconnectPolicy | false;
  /** Subscribe to every publication as it appears (default `true`). */
  autoSubscribe?: boolean;
  /** The WebRTC to use (default: the browser's). In Node, e.g. werift's polyfill. */
  media?: MediaPlatform;
}

function randomId(): string {
  const c = globalThis.crypto;
  if (c && typeof c.randomUUID === 'function') return c.randomUUID();
  const bytes = new Uint8Array(16);
  c.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** A time option: `fallback` when left out; else a number of ms from `min` to what a timer holds. */
function milliseconds(name: string, value: unknown, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > MAX_TIMER_MS) {
    const got = typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean' ? String(value) : typeof value === 'string' ? JSON.stringify(value.slice(0, 40)) : typeof value;
    throw new SdkError('INVALID_ARGUMENT', `${name} must be a number of milliseconds from ${min} to ${MAX_TIMER_MS}, got ${got}`);
  }
  return value;
}

/** The longest delay a timer holds (ms): past it, `setTimeout` fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function buildJoinFrame(options: JoinOptions): JoinFrame {
  const token = typeof options.token === 'string' ? options.token : '';
  const pinned = peekClaims(token).participantId;
  const participantId = options.participantId ?? (typeof pinned === 'string' && pinned ? pinned : randomId());
  return {
    type: 'join',
    v: PROTOCOL_VERSION,
    token,
    participantId,
    ...(options.roomId === undefined ? {} : { roomId: options.roomId }),
    ...(options.name === undefined ? {} : { name: options.name }),
  };
}

/**
 * The entry point of the Tessera SDK.
 *
 * @example
 * ```ts
 * import { Sdk, SdkError, ErrorKind } from 'tessera';
 *
 * try {
 *   const room = await Sdk.join({ url: 'ws://127.0.0.1:7880', token, name: 'Ada' });
 *   console.log('in', room.id, 'as', room.localParticipant.id);
 * } catch (err) {
 *   if (err instanceof SdkError && err.kind === ErrorKind.Auth) console.error(err.code, err.reason);
 * }
 * ```
 */
export const Sdk = Object.freeze({
  /**
   * Join a room. Resolves with the {@link Room} once the relay has accepted the token;
   * rejects with an {@link SdkError} (`kind` `Auth` for token refusals, `Network` when the
   * relay cannot be reached, `Request` for bad options).
   */
  async join(options: JoinOptions): Promise<Room> {
    if (typeof options !== 'object' || options === null) throw new SdkError('INVALID_ARGUMENT', 'join needs an options object');
    const urls: readonly unknown[] = Array.isArray(options.url) ? options.url : [options.url];
    if (urls.length === 0 || urls.length > MAX_URLS || !urls.every((u): u is string => typeof u === 'string' && /^wss?:\/\//i.test(u))) {
      throw new SdkError('INVALID_ARGUMENT', `url must be the relay's ws:// or wss:// URL, or 1 to ${MAX_URLS} of them, got ${JSON.stringify(options.url)}`);
    }
    // `true` (plain JavaScript) is the default policy
    const given: unknown = options.reconnect;
    const reconnect = given === undefined || given === true ? {} : (given as ReconnectPolicy | false);
    if (reconnect !== false && (typeof reconnect !== 'object' || reconnect === null)) throw new SdkError('INVALID_ARGUMENT', `reconnect must be an object of delays or false, got ${String(reconnect)}`);
    const { connection, joined } = await Connection.open({
      urls,
      join: buildJoinFrame(options),
      timeoutMs: milliseconds('timeoutMs', options.timeoutMs, 15_000, 1),
      // a heartbeat of a few ms takes any socket for dead; a retry without delay is a busy loop
      heartbeatMs: milliseconds('heartbeatMs', options.heartbeatMs, 10_000, 10),
      reconnect: reconnect && {
        maxTimeMs: milliseconds('reconnect.maxTimeMs', reconnect.maxTimeMs, 30_000, 0),
        initialDelayMs: milliseconds('reconnect.initialDelayMs', reconnect.initialDelayMs, 250, 10),
        maxDelayMs: milliseconds('reconnect.maxDelayMs', reconnect.maxDelayMs, 5000, 10),
      },
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.onWaiting ? { onWaiting: options.onWaiting } : {}),
    });
    const platform = options.media;
    try {
      return new Room(connection, joined, {
        platform: platform ? () => platform : browserPlatform,
        autoSubscribe: options.autoSubscribe ?? true,
      });
    } catch (error) {
      // a room that could not be made leaves nothing behind: no socket, heartbeat or seat at the relay
      void connection.leave();
      throw error instanceof SdkError ? error : new SdkError('INTERNAL_ERROR', `the room could not be made: ${error instanceof Error ? error.message : String(error)}`, { reason: 'internal' });
    }
  },
});
