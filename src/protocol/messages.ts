/**
 * The wire protocol: JSON text frames, each an object with a `type`.
 * Version 1. `docs/protocol.md` describes the exchange.
 */
import type { ReceivedError } from './codes.ts';
import type { ControlEvents, ControlMethods, LobbyRequest, OutputStatuses } from './control.ts';
import type { EffectiveGrant } from './grant.ts';
import type { MediaEvents, MediaMethods, TrackInfo } from './media.ts';
import type { TranscriptEvents } from './transcript.ts';

/** The protocol version a client announces in its join frame. */
export const PROTOCOL_VERSION = 1;

export type { ReceivedError, WireError } from './codes.ts';

/** A participant's tier: on stage (`speaker`) or in the audience (`viewer`). */
export type Tier = 'speaker' | 'viewer';

/** An on-stage participant as the relay describes it. */
export interface ParticipantInfo {
  id: string;
  name: string;
  /** Unix milliseconds at which the participant joined the room. */
  joinedAt: number;
  /** What it publishes now (in `joined` and `participant-joined`); absent when nothing. */
  tracks?: TrackInfo[];
}

/** One entry of a page of `participants.list`. */
export interface ParticipantSummary extends ParticipantInfo {
  tier: Tier;
}

/** The counts of a room, you included. */
export interface ParticipantCounts {
  speaker: number;
  viewer: number;
  total: number;
}

/** What the relay tells a participant about itself at join. */
export interface SelfInfo {
  id: string;
  name: string;
  isViewer: boolean;
  grant: EffectiveGrant;
  joinedAt: number;
}

/** Any JSON value: what a pubsub payload may be. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A pubsub message as delivered and as kept in history; `id`, `from`, `timestamp` are the relay's. */
export interface PubSubMessage {
  id: string;
  topic: string;
  payload: JsonValue;
  /** The sender's participant id, stamped by the relay. */
  from: string;
  /** Unix milliseconds at which the relay accepted it. */
  timestamp: number;
}

/** What a data stream is, announced before its bytes. */
export interface StreamOpenParams {
  /** Total bytes that will follow. */
  size: number;
  /** How the receiver should read the bytes. */
  kind: 'text' | 'bytes' | 'blob';
  topic?: string;
  to?: string[];
  mimeType?: string;
  name?: string;
}

/** A data stream as its receivers see it. */
export interface StreamInfo extends Omit<StreamOpenParams, 'to'> {
  streamId: number;
  from: string;
  timestamp: number;
}

// ---- client → relay ------------------------------------------------------------------

/** The first frame of every connection. */
export interface JoinFrame {
  type: 'join';
  v: number;
  token: string;
  roomId?: string;
  participantId: string;
  name?: string;
}

/** Request methods, their parameters and their results. */
export interface Methods extends ControlMethods, MediaMethods {
  'participants.list': {
    params: { tier: Tier; limit?: number; cursor?: string | null };
    result: { participants: ParticipantSummary[]; nextCursor: string | null };
  };
  'room.end': { params: Record<string, never>; result: Record<string, never> };
  'participant.remove': { params: { participantId: string }; result: Record<string, never> };
  /** Leave: the relay removes the member, answers, then closes the socket (4010). */
  'session.leave': { params: Record<string, never>; result: Record<string, never> };
  'pubsub.publish': {
    params: { topic: string; payload: JsonValue; to?: string[]; persist?: boolean };
    /** `recipients`: how many subscribers it was delivered to, live. */
    result: { id: string; timestamp: number; recipients: number };
  };
  'pubsub.subscribe': { params: { topic: string }; result: Record<string, never> };
  'pubsub.unsubscribe': { params: { topic: string }; result: Record<string, never> };
  'pubsub.history': { params: { topic: string; limit?: number }; result: { messages: PubSubMessage[] } };
  'stream.open': { params: StreamOpenParams; result: { streamId: number; chunkBytes: number; window: number } };
  'stream.close': { params: { streamId: number }; result: Record<string, never> };
  /** One stream, or several at once (at most {@link MAX_LEAVE_IDS}): a member told of many streams it does not want leaves them in one frame. */
  'stream.leave': { params: { streamId: number } | { streamIds: number[] }; result: Record<string, never> };
}
/** The name of a request method. */
export type Method = keyof Methods;
/** Streams one `stream.leave` may name. */
export const MAX_LEAVE_IDS = 256;
/**
 * The largest chunk a relay may answer `stream.open` with (its default: 64 KiB): the SDK refuses
 * more, since chunk and window decide how much of a source it reads ahead.
 */
export const MAX_STREAM_CHUNK_BYTES = 1024 * 1024;
/** The largest window, in chunks, a relay may answer `stream.open` with (its default: 16). */
export const MAX_STREAM_WINDOW = 256;
/** The parameters of a method. */
export type Params<M extends Method> = Methods[M]['params'];
/** The result of a method. */
export type Result<M extends Method> = Methods[M]['result'];

/** A request: answered by exactly one `response` frame with the same `id`. */
export interface RequestFrame<M extends Method = Method> {
  type: 'request';
  id: number;
  method: M;
  params: Params<M>;
}

/** Every frame a client may send. */
/** Instead of a join frame: come back to a session after a dropped connection. */
export interface ResumeFrame {
  type: 'resume';
  v: number;
  credential: string;
}

/** A client's heartbeat; the relay answers `pong`. */
export interface PingFrame {
  type: 'ping';
}

export type ClientFrame = JoinFrame | ResumeFrame | RequestFrame | PingFrame;

// ---- relay → client ------------------------------------------------------------------

/** Room events pushed by the relay, and their payloads. */
export interface ServerEvents extends ControlEvents, MediaEvents, TranscriptEvents {
  'participant-joined': ParticipantInfo;
  'participant-left': { id: string };
  'participant-count-changed': ParticipantCounts;
  'pubsub.message': PubSubMessage;
  /** A data stream starts; its chunks follow as binary frames. */
  'stream.open': StreamInfo;
  /** Every byte of the stream has been sent. */
  'stream.end': { streamId: number };
  /** The stream stopped before its end (e.g. the sender left). */
  'stream.abort': { streamId: number; error: ReceivedError };
  /** The relay has passed on chunks up to `seq` of a stream you send: send more. */
  'stream.ack': { streamId: number; seq: number };
}
/** The name of a pushed event. */
export type ServerEventName = keyof ServerEvents;

/** The relay's answer to a successful join. */
export interface JoinedFrame {
  type: 'joined';
  v: number;
  roomId: string;
  self: SelfInfo;
  /** On-stage participants other than the joiner, in join order. */
  participants: ParticipantInfo[];
  counts: ParticipantCounts;
  /** The state of every output. */
  outputs: OutputStatuses;
  /** For moderators: the joiners waiting in the lobby, oldest first. */
  lobby?: LobbyRequest[];
  /** How to come back on a new connection after a drop: within `graceMs`, send a resume frame with `credential`. */
  resume: { credential: string; graceMs: number };
  /** True when this answers a resume (the same session goes on). */
  resumed?: boolean;
  /** Transport limits of this relay: a larger frame is refused (`PAYLOAD_TOO_LARGE`). */
  limits: RelayLimits;
}

/** Limits the relay announces at join, so that a client can refuse oversized calls before sending them. */
export interface RelayLimits {
  /** Largest text frame (bytes of its UTF-8) the relay accepts after the join. */
  maxFrameBytes: number;
  /** Largest pubsub payload (bytes of its JSON). */
  maxPayloadBytes: number;
}

/** To a joiner whose token asks for entry: it waits in the lobby for a moderator. */
export interface LobbyFrame {
  type: 'lobby';
  requestedAt: number;
  /** Seconds it may wait before ENTRY_TIMEOUT. */
  ttl: number;
}

/** The relay's answer to a refused join; the socket is closed right after. */
export interface JoinErrorFrame {
  type: 'join-error';
  error: ReceivedError;
}

/** The answer to one request. */
export type ResponseFrame =
  | { type: 'response'; id: number; result: unknown }
  | { type: 'response'; id: number; error: ReceivedError };

/** A pushed room event. */
export interface EventFrame<E extends ServerEventName = ServerEventName> {
  type: 'event';
  name: E;
  data: ServerEvents[E];
}

/** An error not tied to a request (e.g. a frame that could not be parsed). */
export interface ErrorFrame {
  type: 'error';
  error: ReceivedError;
}

/** The relay's answer to a `ping`. */
export interface PongFrame {
  type: 'pong';
}

/** Every frame the relay may send. */
export type ServerFrame = JoinedFrame | LobbyFrame | JoinErrorFrame | ResponseFrame | EventFrame | ErrorFrame | PongFrame;

// ---- binary frames: data stream chunks -----------------------------------------------

/** The first byte of a binary frame: what it carries. */
export const BinaryKind = Object.freeze({ StreamChunk: 1 } as const);

/** Header of a stream chunk: kind (1 byte), stream id (u32), sequence number (u32). */
export const CHUNK_HEADER_BYTES = 9;

/** Build a chunk frame: the header followed by `payload`. */
export function encodeChunk(streamId: number, seq: number, payload: Uint8Array): Uint8Array {
  const frame = new Uint8Array(CHUNK_HEADER_BYTES + payload.byteLength);
  const view = new DataView(frame.buffer);
  view.setUint8(0, BinaryKind.StreamChunk);
  view.setUint32(1, streamId);
  view.setUint32(5, seq);
  frame.set(payload, CHUNK_HEADER_BYTES);
  return frame;
}

/** Read a chunk frame's header; `null` when it is not a well-formed chunk frame. */
export function decodeChunkHeader(frame: Uint8Array): { streamId: number; seq: number } | null {
  if (frame.byteLength < CHUNK_HEADER_BYTES || frame[0] !== BinaryKind.StreamChunk) return null;
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  return { streamId: view.getUint32(1), seq: view.getUint32(5) };
}
