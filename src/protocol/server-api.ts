/**
 * Wire types of the relay's HTTP server API (`/api/v1/...`) and of its webhooks: what an
 * integrator's backend sends and receives. Imported by the relay and by `tessera/server`.
 */
import type { ReceivedError, WireError } from './codes.ts';
import type { LobbyRequest, OutputChange, OutputInfo, OutputStatuses } from './control.ts';
import type { ParticipantCounts, ParticipantSummary } from './messages.ts';

/** The path every route of the server API starts with. */
export const API_PREFIX = '/api/v1';

/**
 * Who acted, in `output-changed` (`by`) and in the relay's log, when the server API started or
 * stopped an output, removed a participant or ended a room.
 */
export const ADMIN_ACTOR = 'server-api';

/** A room as the server API lists it. */
export interface RoomSummary {
  roomId: string;
  /** Unix milliseconds at which the relay opened it (its first join or knock). */
  createdAt: number;
  counts: ParticipantCounts;
  /** Joiners waiting in its lobby. */
  lobby: number;
  outputs: OutputStatuses;
}

/** One page of `GET /api/v1/rooms`: the project's rooms in the order of their ids. */
export interface RoomPage {
  rooms: RoomSummary[];
  /** Where the next page starts (`?cursor=`), or `null` after the last room. */
  nextCursor: string | null;
}

/** One page of a tier, exactly as the SDK's `participants.list` answers it (same cursors). */
export interface ParticipantPage {
  /** In join order. */
  participants: ParticipantSummary[];
  /** Where the next page starts, or `null` after the last one. */
  nextCursor: string | null;
}

/** What `POST /api/v1/rooms/:room/data` answers: the message's id and time, and how many received it live. */
export interface PublishResult {
  id: string;
  timestamp: number;
  recipients: number;
}

/** The body of every refusal of the server API, with an HTTP status mapped from `code`. */
export interface ApiErrorBody {
  error: WireError | ReceivedError;
}

/** The events the relay POSTs to a project's webhook URL. */
export const WEBHOOK_EVENTS = ['room-started', 'room-finished', 'participant-joined', 'participant-left', 'lobby-request', 'output-changed', 'recording-ready'] as const;

/** One of {@link WEBHOOK_EVENTS}. */
export type WebhookEventName = (typeof WEBHOOK_EVENTS)[number];

/** The `data` of each webhook event. */
export interface WebhookEventData {
  /** The room opened (its first join, or its first knock at the lobby). */
  'room-started': { createdAt: number };
  /** The room is gone: its last member left, it was ended, or the relay shut down. */
  'room-finished': { createdAt: number };
  /** Someone joined the stage (and, if the project opts in, the audience). */
  'participant-joined': { participant: ParticipantSummary };
  /** Someone left the stage (and, if the project opts in, the audience). */
  'participant-left': { participant: ParticipantSummary };
  /** A joiner waits in the lobby for a moderator. */
  'lobby-request': LobbyRequest;
  /** An output changed state; `by` is a participant id or {@link ADMIN_ACTOR}. */
  'output-changed': OutputChange;
  /** A recording stopped and its files are written: what the relay says of them. */
  'recording-ready': { recording: OutputInfo['recording'] };
}

/**
 * A webhook as the relay POSTs it: one JSON object, signed in its `Authorization` header.
 * `id` is unique per event (a retried delivery keeps it: deduplicate on it); `createdAt` is
 * when the event happened, in unix milliseconds.
 */
export type WebhookEvent = {
  [E in WebhookEventName]: { id: string; event: E; createdAt: number; project: string; roomId: string; data: WebhookEventData[E] };
}[WebhookEventName];
