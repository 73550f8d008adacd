/**
 * Error kinds, error codes, disconnect reasons and WebSocket close codes.
 * Defined once here and imported by the SDK and the relay alike.
 */

/**
 * The class of an error. Catch a whole class by testing `error.kind`.
 *
 * @example
 * ```ts
 * if (err instanceof SdkError && err.kind === ErrorKind.Auth) showLogin();
 * ```
 */
export const ErrorKind = Object.freeze({
  Auth: 'Auth',
  Lobby: 'Lobby',
  Network: 'Network',
  Request: 'Request',
  State: 'State',
} as const);
/** One of the values of {@link ErrorKind}. */
export type ErrorKind = (typeof ErrorKind)[keyof typeof ErrorKind];

/** The kind of every code; the single source from which `ErrorCode` is derived. */
const CODE_KINDS = {
  INVALID_API_KEY: ErrorKind.Auth,
  INVALID_TOKEN: ErrorKind.Auth,
  INVALID_PERMISSIONS: ErrorKind.Auth,
  UNAUTHORIZED_ROOM: ErrorKind.Auth,
  UNAUTHORIZED_PARTICIPANT: ErrorKind.Auth,
  INVALID_ENTRY_CLAIM: ErrorKind.Auth,
  ENTRY_DENIED: ErrorKind.Lobby,
  ENTRY_TIMEOUT: ErrorKind.Lobby,
  ENTRY_CANCELLED: ErrorKind.Lobby,
  CONNECTION_FAILED: ErrorKind.Network,
  CONNECTION_LOST: ErrorKind.Network,
  TIMEOUT: ErrorKind.Network,
  INVALID_ARGUMENT: ErrorKind.Request,
  NOT_FOUND: ErrorKind.Request,
  PAYLOAD_TOO_LARGE: ErrorKind.Request,
  RATE_LIMITED: ErrorKind.Request,
  NOT_CONNECTED: ErrorKind.State,
  ROOM_ENDED: ErrorKind.State,
} as const satisfies Record<string, ErrorKind>;

/** Every error code, each as its own string value. */
export type ErrorCode = keyof typeof CODE_KINDS;

/**
 * Every error code as its own string value (`ErrorCode.INVALID_TOKEN === 'INVALID_TOKEN'`).
 * `docs/errors.md` says, for each one, its kind, its cause and what the caller should do.
 *
 * @example
 * ```ts
 * switch (err.code) {
 *   case ErrorCode.INVALID_TOKEN: return refreshToken();
 *   case ErrorCode.UNAUTHORIZED_ROOM: return showWrongRoom();
 * }
 * ```
 */
export const ErrorCode = Object.freeze(
  Object.fromEntries(Object.keys(CODE_KINDS).map((code) => [code, code])) as {
    readonly [C in ErrorCode]: C;
  },
);

/** The kind of an error code. */
export function kindOf(code: ErrorCode): ErrorKind {
  return CODE_KINDS[code];
}

/** True when `value` is one of the known error codes. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(CODE_KINDS, value);
}

/** Why a room session ended, as carried by the `disconnected` event. */
export type DisconnectReason =
  | 'left'
  | 'removed'
  | 'room-ended'
  | 'duplicate-identity'
  | 'server-shutdown'
  | 'connection-lost';

/**
 * WebSocket close codes used by the relay (the 4xxx range is the application's).
 * `docs/protocol.md` lists them with their meaning.
 */
export const CloseCode = Object.freeze({
  /** The join was refused; the `join-error` frame before the close says why. */
  JOIN_REFUSED: 4001,
  /** No valid join frame arrived within the pre-authentication window. */
  JOIN_TIMEOUT: 4002,
  /** A frame before the join was not a valid join frame (or was too large). */
  PROTOCOL_ERROR: 4003,
  /** A moderator removed this participant. */
  REMOVED: 4004,
  /** A moderator ended the room. */
  ROOM_ENDED: 4005,
  /** The same identity joined again with a token that pins it. */
  DUPLICATE_IDENTITY: 4006,
  /** The relay is shutting down. */
  SERVER_SHUTDOWN: 4007,
  /** The peer stopped answering heartbeats. */
  HEARTBEAT_TIMEOUT: 4008,
  /** The peer could not keep up with what it was sent; its send queue hit its cap. */
  SLOW_CONSUMER: 4009,
  /** The client left the room. */
  LEFT: 4010,
  /** The client kept sending far beyond its rate limit. */
  FLOODING: 4011,
} as const);
/** One of the values of {@link CloseCode}. */
export type CloseCode = (typeof CloseCode)[keyof typeof CloseCode];

/** The disconnect reason a client reports for a close code it receives. */
export function reasonForClose(code: number): DisconnectReason {
  switch (code) {
    case CloseCode.REMOVED:
      return 'removed';
    case CloseCode.ROOM_ENDED:
      return 'room-ended';
    case CloseCode.DUPLICATE_IDENTITY:
      return 'duplicate-identity';
    case CloseCode.SERVER_SHUTDOWN:
      return 'server-shutdown';
    case CloseCode.LEFT:
      return 'left';
    default:
      return 'connection-lost';
  }
}
