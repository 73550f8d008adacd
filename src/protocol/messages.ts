/**
 * The wire protocol: JSON text frames, each an object with a `type`.
 * Version 1. `docs/protocol.md` describes the exchange.
 */
import type { ErrorCode } from './codes.ts';
import type { EffectiveGrant } from './grant.ts';

/** The protocol version a client announces in its join frame. */
export const PROTOCOL_VERSION = 1;

/** A participant's tier: on stage (`speaker`) or in the audience (`viewer`). */
export type Tier = 'speaker' | 'viewer';

/** An error as it travels on the wire. */
export interface WireError {
  code: ErrorCode;
  message: string;
  /** A machine-readable detail, e.g. `expired` or `bad-signature`. */
  reason?: string;
}

/** An on-stage participant as the relay describes it. */
export interface ParticipantInfo {
  id: string;
  name: string;
  /** Unix milliseconds at which the participant joined the room. */
  joinedAt: number;
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
export interface Methods {
  'participants.list': {
    params: { tier: Tier; limit?: number; cursor?: string | null };
    result: { participants: ParticipantSummary[]; nextCursor: string | null };
  };
  'room.end': { params: Record<string, never>; result: Record<string, never> };
  'participant.remove': { params: { participantId: string }; result: Record<string, never> };
}
/** The name of a request method. */
export type Method = keyof Methods;
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
export type ClientFrame = JoinFrame | RequestFrame;

// ---- relay → client ------------------------------------------------------------------

/** Room events pushed by the relay, and their payloads. */
export interface ServerEvents {
  'participant-joined': ParticipantInfo;
  'participant-left': { id: string };
  'participant-count-changed': ParticipantCounts;
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
}

/** The relay's answer to a refused join; the socket is closed right after. */
export interface JoinErrorFrame {
  type: 'join-error';
  error: WireError;
}

/** The answer to one request. */
export type ResponseFrame =
  | { type: 'response'; id: number; result: unknown }
  | { type: 'response'; id: number; error: WireError };

/** A pushed room event. */
export interface EventFrame<E extends ServerEventName = ServerEventName> {
  type: 'event';
  name: E;
  data: ServerEvents[E];
}

/** An error not tied to a request (e.g. a frame that could not be parsed). */
export interface ErrorFrame {
  type: 'error';
  error: WireError;
}

/** Every frame the relay may send. */
export type ServerFrame = JoinedFrame | JoinErrorFrame | ResponseFrame | EventFrame | ErrorFrame;
