/**
 * The SDK's parsers of the data of every pushed event: one per event, in a typed table. An
 * event this SDK does not know (a newer relay) is ignored; a known one with malformed data is
 * a protocol error.
 */
import type { LobbyOutcome, OutputChange } from './control.ts';
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
  isWireError,
  LOBBY_REQUEST,
  oneOf,
  optional,
  PARTICIPANT_INFO,
  parseCounts,
  parseOutputStatus,
  PUBSUB_MESSAGE,
  record,
  STREAM_INFO,
  TRACK_INFO,
  type ValueParser,
} from './validate-server-values.ts';

const OUTCOMES: readonly LobbyOutcome[] = ['admitted', 'denied', 'timeout', 'cancelled'];

/** One parser per event: the typed dispatch table of event validation. */
const EVENTS: { [E in ServerEventName]: ValueParser<ServerEvents[E]> } = {
  'participant-joined': record(PARTICIPANT_INFO),
  'participant-left': record({ id: isString }),
  'participant-count-changed': parseCounts,
  'pubsub.message': record(PUBSUB_MESSAGE),
  'stream.open': record(STREAM_INFO),
  'stream.end': record({ streamId: isNumber }),
  'stream.abort': record({ streamId: isNumber, error: isWireError }),
  'stream.ack': record({ streamId: isNumber, seq: isNumber }),
  'lobby-request': record(LOBBY_REQUEST),
  'lobby-resolved': record({ participantId: isString, outcome: oneOf(OUTCOMES), by: optional(isString) }),
  'unpublish-requested': record({ source: isSource, by: isString }),
  // an output this SDK does not know (a newer relay) passes with its status checked; the room ignores it
  'output-changed': (data) => {
    if (!isRecord(data) || !isString(data.output)) return bad('output is malformed');
    const status = parseOutputStatus(data.output, data);
    return status.ok ? ok({ output: data.output, ...status.value } as OutputChange) : status;
  },
  'whiteboard-shape': checked(isShape),
  'whiteboard-cleared': record({ by: isString }),
  'track-published': record({ participantId: isString, ...TRACK_INFO }),
  'track-unpublished': record({ participantId: isString, source: isSource }),
  'track-mute': record({ participantId: isString, source: isSource, muted: isBoolean }),
  'subscription-ended': record({ subscriptionId: isString }),
  'force-unpublished': record({ source: isSource, by: isString }),
};

/** True when `name` is an event this SDK knows. */
export function isServerEventName(name: unknown): name is ServerEventName {
  return has(EVENTS, name);
}

/** Validate an event frame and its data; `null`: an event this SDK does not know, to ignore. */
export function parseEventFrame(frame: Record<string, unknown>): Parsed<EventFrame | null> {
  const name = frame.name;
  if (!isString(name)) return bad('event: name must be a string');
  if (!isServerEventName(name)) return ok(null);
  const data = (EVENTS[name] as ValueParser<unknown>)(frame.data);
  return data.ok ? ok({ type: 'event', name, data: data.value } as EventFrame) : bad(`event ${name}: data ${data.problem}`);
}
