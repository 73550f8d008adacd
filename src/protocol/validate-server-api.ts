/**
 * `tessera/server`'s parsers of what the relay's HTTP server API answers and of the `data` of
 * its webhooks: one per answer, and one per event in a typed table. They check as the SDK checks
 * the relay's frames (`validate-server-values.ts`): what does not fit means whatever answered
 * broke the API, not the caller; what this version does not know (an output, a state) is told
 * apart from it.
 */
import { OUTPUTS, type OutputName, type OutputStatus } from './control.ts';
import { bad, isRecord, ok, type Parsed } from './parse.ts';
import type { RoomPage, RoomSummary, WebhookEventData, WebhookEventName } from './server-api.ts';
import {
  fitList,
  fitOf,
  fitParticipantSummary,
  isCount,
  isNumber,
  isRecordingInfo,
  isString,
  LOBBY_REQUEST,
  parseCounts,
  parseOutputChange,
  parseOutputStatus,
  parseOutputStatuses,
  record,
  type ValueParser,
} from './validate-server-values.ts';

export { parseParticipantPage, parsePublished } from './validate-server-values.ts';

/** The answer of a route that answers `{}` (a removal, an end, a deletion): any object. */
export const parseDone = (value: unknown): Parsed<Record<string, never>> => (isRecord(value) ? ok({}) : bad('must be an object'));

/** A room as `GET /rooms` and `GET /rooms/:room` tell it. */
export const parseRoomSummary = record<RoomSummary>({ roomId: isString, createdAt: isNumber, counts: fitOf(parseCounts), lobby: isCount, outputs: fitOf(parseOutputStatuses) });
const roomSummary = fitOf(parseRoomSummary).fit;

/** A page of `GET /rooms`. */
export function parseRoomPage(value: unknown): Parsed<RoomPage> {
  if (!isRecord(value)) return bad('must be an object');
  const { nextCursor } = value;
  if (nextCursor !== null && !isString(nextCursor)) return bad('nextCursor must be a string or null');
  const rooms = fitList('rooms', value.rooms, roomSummary);
  return rooms.ok ? ok({ rooms: rooms.value, nextCursor }) : rooms;
}

const isOutput = (name: string): name is OutputName => (OUTPUTS as readonly string[]).includes(name);

/**
 * What starting or stopping `output` answers: its status. Of an output this version does not
 * know (called from plain JavaScript: the relay refuses it unless it is newer), any object.
 */
export function parseOutputAnswer<O extends OutputName>(output: O, value: unknown): Parsed<OutputStatus<O>> {
  if (isOutput(output)) return parseOutputStatus(output, value);
  return isRecord(value) ? ok(value as unknown as OutputStatus<O>) : bad('must be an object');
}

const participant = record({ participant: { fit: fitParticipantSummary } });
const createdAt = record({ createdAt: isNumber });

/** One parser per webhook event's `data` (`null`: an output or state this version does not know). */
const WEBHOOK_DATA: { [E in WebhookEventName]: ValueParser<WebhookEventData[E] | null> } = {
  'room-started': createdAt,
  'room-finished': createdAt,
  'participant-joined': participant,
  'participant-left': participant,
  'lobby-request': record(LOBBY_REQUEST),
  'output-changed': parseOutputChange,
  'recording-ready': record({ recording: isRecordingInfo }),
};

/** Validate the `data` of a webhook event this version knows; `null` for one of an output or state it does not. */
export function parseWebhookData<E extends WebhookEventName>(event: E, data: unknown): Parsed<WebhookEventData[E] | null> {
  return (WEBHOOK_DATA[event] as ValueParser<WebhookEventData[E] | null>)(data);
}
