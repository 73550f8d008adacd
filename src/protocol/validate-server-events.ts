/**
 * The SDK's parsers of the data of every pushed event: one per event, in a typed table. An
 * event this SDK does not know (a newer relay) is ignored, and so is a known event whose
 * discriminating value (an output, an output state, a source, a track kind, a lobby outcome) is
 * one it does not know: both parse to `null`. A known event with malformed data is a protocol
 * error.
 */
import type { LobbyOutcome } from './control.ts';
import { SOURCES } from './grant.ts';
import type { EventFrame, ServerEventName, ServerEvents } from './messages.ts';
import { bad, isRecord, ok, type Parsed } from './parse.ts';
import {
  checked,
  has,
  isBoolean,
  isNumber,
  isShape,
  isSource,
  isString,
  LOBBY_REQUEST,
  newerThan,
  oneOf,
  optional,
  parseCounts,
  parseOutputChange,
  parseParticipant,
  PUBSUB_MESSAGE,
  receivedError,
  record,
  STREAM_INFO,
  TRACK_INFO,
  TRACK_KINDS,
  type ValueParser,
} from './validate-server-values.ts';

const OUTCOMES: readonly LobbyOutcome[] = ['admitted', 'denied', 'timeout', 'cancelled'];

/**
 * `parse`, except that data whose field holds a value this SDK does not know (a string none of
 * those it knows: a newer relay's) is `null`, to ignore, not malformed. Looked at only once the
 * strict parse failed: nothing more on the path of a valid event.
 */
function unlessNewer<T>(parse: ValueParser<T>, fields: { [K in keyof T]?: readonly string[] }): ValueParser<T | null> {
  const newer = Object.entries<readonly string[] | undefined>(fields).map(([field, known]) => [field, newerThan(known ?? [])] as const);
  return (data) => {
    const parsed = parse(data);
    return parsed.ok || !isRecord(data) || !newer.some(([field, isNewer]) => isNewer(data[field])) ? parsed : ok(null);
  };
}
const BY_SOURCE = { source: SOURCES } as const;

/** One parser per event (`null`: data to ignore): the typed dispatch table of event validation. */
const EVENTS: { [E in ServerEventName]: ValueParser<ServerEvents[E] | null> } = {
  'participant-joined': parseParticipant,
  'participant-left': record({ id: isString }),
  'participant-count-changed': parseCounts,
  'pubsub.message': record(PUBSUB_MESSAGE),
  'stream.open': record(STREAM_INFO),
  'stream.end': record({ streamId: isNumber }),
  'stream.abort': record({ streamId: isNumber, error: receivedError }),
  'stream.ack': record({ streamId: isNumber, seq: isNumber }),
  'lobby-request': record(LOBBY_REQUEST),
  'lobby-resolved': unlessNewer(record({ participantId: isString, outcome: oneOf(OUTCOMES), by: optional(isString) }), { outcome: OUTCOMES }),
  'unpublish-requested': unlessNewer(record({ source: isSource, by: isString }), BY_SOURCE),
  'output-changed': parseOutputChange,
  'whiteboard-shape': checked(isShape),
  'whiteboard-cleared': record({ by: isString }),
  'track-published': unlessNewer(record({ participantId: isString, ...TRACK_INFO }), { source: SOURCES, kind: TRACK_KINDS }),
  'track-unpublished': unlessNewer(record({ participantId: isString, source: isSource }), BY_SOURCE),
  'track-mute': unlessNewer(record({ participantId: isString, source: isSource, muted: isBoolean }), BY_SOURCE),
  'subscription-ended': record({ subscriptionId: isString }),
  'force-unpublished': unlessNewer(record({ source: isSource, by: isString }), BY_SOURCE),
  transcription: record({ participantId: isString, text: isString, final: isBoolean, language: isString, startedAt: isNumber, endedAt: isNumber }),
};

/** True when `name` is an event this SDK knows. */
export function isServerEventName(name: unknown): name is ServerEventName {
  return has(EVENTS, name);
}

/** Validate an event frame and its data; `null`: an event to ignore (unknown, or of a value this SDK does not know). */
export function parseEventFrame(frame: Record<string, unknown>): Parsed<EventFrame | null> {
  const name = frame.name;
  if (!isString(name)) return bad('event: name must be a string');
  if (!isServerEventName(name)) return ok(null);
  const data = (EVENTS[name] as ValueParser<unknown>)(frame.data);
  if (!data.ok) return bad(`event ${name}: data ${data.problem}`);
  return data.value === null ? ok(null) : ok({ type: 'event', name, data: data.value } as EventFrame);
}
