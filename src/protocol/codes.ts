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
  INTERNAL_ERROR: ErrorKind.Network,
  INVALID_ARGUMENT: ErrorKind.Request,
  NOT_FOUND: ErrorKind.Request,
  PAYLOAD_TOO_LARGE: ErrorKind.Request,
  RATE_LIMITED: ErrorKind.Request,
  NOT_CONNECTED: ErrorKind.State,
  ROOM_ENDED: ErrorKind.State,
  INVALID_STATE: ErrorKind.State,
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

/** True when `value` is one of the error kinds. */
export function isErrorKind(value: unknown): value is ErrorKind {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(ErrorKind, value);
}

/**
 * Every machine-readable `reason` an error may carry, on the wire and in the SDK. Both sides
 * use this one list: the relay cannot send a reason that is not here, and the SDK's own logic
 * (resume, publication state) keys on these values. `docs/errors.md` says what each means.
 */
export const ERROR_REASONS = [
  // token and join (Auth)
  'missing', 'malformed', 'unsupported-algorithm', 'unsupported-header', 'missing-issuer', 'unknown-api-key',
  'revoked-api-key', 'bad-signature', 'expired', 'not-yet-valid', 'lifetime-too-long', 'bad-claim', 'room-mismatch', 'participant-mismatch',
  'identity-in-use', 'identity-reserved', 'removed', 'duplicate-identity', 'source-not-allowed',
  'missing-canPublish', 'missing-canSubscribe', 'missing-canPublishData', 'missing-canSubscribeData',
  'missing-canModerate', 'missing-canRecord', 'missing-canHls', 'missing-canLivestream', 'missing-canTranscribe',
  'missing-canWhiteboard',
  // minting (`tessera/server`)
  'privileged-grant-needs-room', 'ask-with-moderate',
  // lobby
  'denied', 'ttl', 'aborted', 'replaced', 'not-waiting', 'lobby-full', 'lobby-cooldown',
  // budgets (RATE_LIMITED, PAYLOAD_TOO_LARGE)
  'message-rate', 'byte-rate', 'fanout-rate', 'join-rate', 'too-many-rooms', 'room-full', 'stage-full', 'too-many-topics', 'too-many-subscriptions',
  'subscriptions-full', 'media-full', 'downloads-full', 'http-sockets', 'http-sockets-per-address', 'too-many-streams', 'streams-full', 'history-budget', 'history-full', 'board-full', 'whiteboards-full', 'disk-full', 'disk-quota', 'output-rate',
  'frame-too-large', 'payload-too-large', 'stream-too-large', 'topic-too-long',
  // requests (INVALID_ARGUMENT, NOT_FOUND)
  'bad-frame', 'not-json', 'bad-join-frame', 'join-timeout', 'evicted', 'pre-auth-bytes', 'bad-chunk', 'bad-cursor', 'bad-sdp', 'bad-url', 'private-target', 'unsupported-version',
  'room-required', 'self', 'viewer-cannot-publish', 'wrong-kind', 'unknown-stream', 'unknown-subscription',
  'unknown-participant', 'unknown-recording', 'not-configured', 'not-published',
  // state conflicts (INVALID_STATE)
  'waiting', 'already-joined', 'already-published', 'output-already-active', 'output-not-active',
  'output-stopped', 'recording-active', 'media-disabled', 'already-read',
  // faults of the relay or its providers (INTERNAL_ERROR)
  'internal', 'provider-failed', 'write-failed', 'start-timeout', 'unsafe-storage', 'unreachable', 'refused',
  'rtmp-failed', 'rtmp-closed', 'ffmpeg-missing', 'ffmpeg-failed', 'asr-model-missing',
  // connections and streams (Network, NOT_CONNECTED)
  'resume-unknown', 'no-websocket', 'media-not-connected', 'connection-dropped', 'left', 'room-ended', 'connection-lost',
  'server-shutdown', 'sender-left', 'slow-recipient', 'stream-idle', 'stream-incomplete', 'truncated', 'out-of-order',
  // media in the browser
  'no-webrtc', 'no-devices', 'no-display-capture', 'no-track', 'no-sender', 'media-transport-failed', 'ended',
  'force-unpublished',
  // the server API and webhooks (`tessera/server`, `/api/v1`)
  'admin-token', 'admin-required', 'bad-body-hash', 'unknown-event', 'unknown-room', 'unknown-route', 'method-not-allowed',
  'bad-content-type', 'body-too-large', 'body-timeout', 'bad-body', 'bad-query', 'api-rate', 'bad-response', 'answer-lost',
] as const;

/** One of {@link ERROR_REASONS}. */
export type ErrorReason = (typeof ERROR_REASONS)[number];

const REASONS: ReadonlySet<string> = new Set(ERROR_REASONS);

/** True when `value` is one of the known reasons. */
export function isErrorReason(value: unknown): value is ErrorReason {
  return typeof value === 'string' && REASONS.has(value);
}

/**
 * An error as it travels on the wire. `kind` is the code's kind, sent so that a client that
 * does not know a newer code still knows its class.
 */
export type WireError = {
  [C in ErrorCode]: {
    code: C;
    /** Always the kind of `code` (the type ties them: a mismatch does not compile). */
    kind: (typeof CODE_KINDS)[C];
    message: string;
    /** A machine-readable detail, e.g. `expired` or `bad-signature`. */
    reason?: ErrorReason;
  };
}[ErrorCode];

/**
 * An error as a client receives it: what a relay of any version may send, normalised by the
 * SDK's validator. `code` is kept as sent (a newer relay's code keeps its string); `kind` is the
 * code's kind when this SDK knows the code, else the kind the relay sent when it is one of
 * {@link ErrorKind}, else `Request`; a `reason` this SDK does not know is left out. The relay
 * sends {@link WireError}, which is one of these.
 */
export interface ReceivedError {
  code: ErrorCode | (string & {});
  message: string;
  /** A machine-readable detail this SDK knows, e.g. `expired` or `bad-signature`. */
  reason?: ErrorReason;
  kind: ErrorKind;
}

/** The wire form of an error: its kind filled in from its code. */
export function wireError(code: ErrorCode, message: string, reason?: ErrorReason): WireError {
  const error = { code, kind: CODE_KINDS[code], message } as WireError;
  if (reason !== undefined) error.reason = reason;
  return error;
}

/**
 * The relay's WebSocket close codes (the 4xxx range is the application's), each with the
 * disconnect reason a client reports for it. The single definition from which
 * {@link CloseCode}, {@link DisconnectReason} and {@link reasonForClose} are derived;
 * `docs/protocol.md` lists them with their meaning.
 */
const CLOSES = {
  /** The join was refused; the `join-error` frame before the close says why. */
  JOIN_REFUSED: { code: 4001, reason: 'connection-lost' },
  /** No valid join frame arrived within the pre-authentication window. */
  JOIN_TIMEOUT: { code: 4002, reason: 'connection-lost' },
  /** A frame before the join was not a valid join frame (or was too large). */
  PROTOCOL_ERROR: { code: 4003, reason: 'connection-lost' },
  /** A moderator removed this participant. */
  REMOVED: { code: 4004, reason: 'removed' },
  /** A moderator ended the room. */
  ROOM_ENDED: { code: 4005, reason: 'room-ended' },
  /** The same identity joined again with a token that pins it. */
  DUPLICATE_IDENTITY: { code: 4006, reason: 'duplicate-identity' },
  /** The relay is shutting down. */
  SERVER_SHUTDOWN: { code: 4007, reason: 'server-shutdown' },
  /** The peer stopped answering heartbeats. */
  HEARTBEAT_TIMEOUT: { code: 4008, reason: 'connection-lost' },
  /** The peer could not keep up with what it was sent; its send queue hit its cap. */
  SLOW_CONSUMER: { code: 4009, reason: 'connection-lost' },
  /** The client left the room. */
  LEFT: { code: 4010, reason: 'left' },
  /** The client kept sending far beyond its rate limit. */
  FLOODING: { code: 4011, reason: 'connection-lost' },
} as const satisfies Record<string, { code: number; reason: DisconnectReason }>;

/** Why a room session ended, as carried by the `disconnected` event (`denied`: a moderator turned away the rejoin of a reconnection that waited in the lobby). */
export type DisconnectReason = 'left' | 'removed' | 'room-ended' | 'duplicate-identity' | 'denied' | 'server-shutdown' | 'connection-lost';


/** WebSocket close codes used by the relay, by name. */
export const CloseCode = Object.freeze(
  Object.fromEntries(Object.entries(CLOSES).map(([name, { code }]) => [name, code])) as { readonly [N in keyof typeof CLOSES]: (typeof CLOSES)[N]['code'] },
);
/** One of the values of {@link CloseCode}. */
export type CloseCode = (typeof CloseCode)[keyof typeof CloseCode];

const REASON_OF_CLOSE: ReadonlyMap<number, DisconnectReason> = new Map(Object.values(CLOSES).map(({ code, reason }) => [code, reason]));

/** The disconnect reason a client reports for a close code it receives (any other code: the connection was lost). */
export function reasonForClose(code: number): DisconnectReason {
  return REASON_OF_CLOSE.get(code) ?? 'connection-lost';
}
