/**
 * Cheap checks of the values the relay sends, for the SDK (the relay's own input goes through
 * `validate.ts`). They check shapes and types, not the relay's bounds. Elements of arrays (a
 * page of 1000 participants, pubsub history, a board of shapes) are checked in place, in one
 * pass and without copies; small objects are copied field by field, keeping only the fields
 * this SDK knows. Fields it does not know are ignored (a newer relay may send more).
 */
import type { WireError } from './codes.ts';
import { OUTPUTS, type LobbyDecision, type LobbyRequest, type OutputInfo, type OutputName, type OutputState, type OutputStatus, type OutputStatuses, type Shape, type ShapeInput } from './control.ts';
import { GRANT_FLAGS, SOURCES, type EffectiveGrant } from './grant.ts';
import type { TrackInfo } from './media.ts';
import type { JsonValue, ParticipantCounts, ParticipantInfo, ParticipantSummary, PubSubMessage, SelfInfo, StreamInfo } from './messages.ts';
import { bad, isRecord, ok, type Parsed } from './parse.ts';

/** A check that narrows. */
export type Guard<T> = (value: unknown) => value is T;
/** A guard per field of `T`; an optional field's guard also accepts `undefined`. */
export type Spec<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? Guard<T[K] | undefined> : Guard<T[K]> };
/** A parser of one value. */
export type ValueParser<T> = (value: unknown) => Parsed<T>;

export const isString = (v: unknown): v is string => typeof v === 'string';
/** JSON has no NaN nor Infinity: a parsed number is finite. */
export const isNumber = (v: unknown): v is number => typeof v === 'number';
export const isBoolean = (v: unknown): v is boolean => typeof v === 'boolean';
/** Any JSON value (a pubsub payload): only a missing one is wrong. */
export const isJson = (v: unknown): v is JsonValue => v !== undefined;
export const optional = <T>(guard: Guard<T>): Guard<T | undefined> => (v): v is T | undefined => v === undefined || guard(v);
export const oneOf = <T extends string>(values: readonly T[]): Guard<T> => (v): v is T => values.includes(v as T);
/** An array of which every element fits, checked in place. */
export const arrayOf = <T>(guard: Guard<T>): Guard<T[]> => (v): v is T[] => Array.isArray(v) && v.every((e) => guard(e));
export const isSource = oneOf(SOURCES);

/** True when `key` is an own key of `table` (not `toString`, `__proto__`...). */
export const has = <K extends string>(table: Record<K, unknown>, key: unknown): key is K => typeof key === 'string' && Object.prototype.hasOwnProperty.call(table, key);

/** A guard of an object with these fields (more are allowed; nothing is copied). */
export function guard<T>(spec: Spec<T>): Guard<T> {
  const keys = Object.keys(spec) as Array<keyof T & string>;
  return (v): v is T => {
    if (!isRecord(v)) return false;
    for (const key of keys) if (!(spec[key] as Guard<unknown>)(v[key])) return false;
    return true;
  };
}

/** A parser of an object with these fields: a copy of them, or which one is wrong. */
export function record<T>(spec: Spec<T>): ValueParser<T> {
  const keys = Object.keys(spec) as Array<keyof T & string>;
  return (v) => {
    if (!isRecord(v)) return bad('must be an object');
    const out: Record<string, unknown> = {};
    for (const key of keys) {
      const field = v[key];
      if (!(spec[key] as Guard<unknown>)(field)) return bad(`${key} is malformed`);
      if (field !== undefined) out[key] = field;
    }
    return ok(out as T);
  };
}

/** A parser from a guard: the value itself when it fits. */
export const checked = <T>(guard: Guard<T>): ValueParser<T> => (v) => (guard(v) ? ok(v) : bad('is malformed'));

/** An array of which every element fits `guard`: one pass, no copy; the problem names the first misfit. */
export function list<T>(what: string, value: unknown, guard: Guard<T>): Parsed<T[]> {
  if (!Array.isArray(value)) return bad(`${what} must be an array`);
  for (let i = 0; i < value.length; i++) if (!guard(value[i])) return bad(`${what}[${i}] is malformed`);
  return ok(value as T[]);
}

/**
 * The wire form of an error, loosely: a newer relay may send a code, reason or kind this SDK
 * does not know. Typed as {@link WireError}, read only through `SdkError.fromWire`, which
 * keeps an unknown code's string and drops an unknown reason or kind.
 */
interface LooseWireError {
  code: string;
  message: string;
  reason?: string;
  kind?: string;
}
const WIRE_ERROR: Spec<LooseWireError> = { code: isString, message: isString, reason: optional(isString), kind: optional(isString) };
export const isWireError = guard(WIRE_ERROR) as unknown as Guard<WireError>;
export const parseWireError = record(WIRE_ERROR) as unknown as ValueParser<WireError>;

export const TRACK_INFO: Spec<TrackInfo> = { source: isSource, kind: oneOf(['audio', 'video']), muted: isBoolean };
export const PARTICIPANT_INFO: Spec<ParticipantInfo> = { id: isString, name: isString, joinedAt: isNumber, tracks: optional(arrayOf(guard(TRACK_INFO))) };
export const isParticipantInfo = guard(PARTICIPANT_INFO);
export const isParticipantSummary = guard<ParticipantSummary>({ ...PARTICIPANT_INFO, tier: oneOf(['speaker', 'viewer']) });
export const parseCounts = record<ParticipantCounts>({ speaker: isNumber, viewer: isNumber, total: isNumber });
export const LOBBY_REQUEST: Spec<LobbyRequest> = { participantId: isString, name: isString, requestedAt: isNumber };
export const isLobbyRequest = guard(LOBBY_REQUEST);
export const PUBSUB_MESSAGE: Spec<PubSubMessage> = { id: isString, topic: isString, payload: isJson, from: isString, timestamp: isNumber };
export const isPubSubMessage = guard(PUBSUB_MESSAGE);
export const STREAM_INFO: Spec<StreamInfo> = {
  streamId: isNumber,
  from: isString,
  timestamp: isNumber,
  size: isNumber,
  kind: oneOf(['text', 'bytes', 'blob']),
  topic: optional(isString),
  mimeType: optional(isString),
  name: optional(isString),
};

export const isLobbyDecision = (v: unknown): v is LobbyDecision =>
  isRecord(v) && isString(v.participantId) && (v.ok === true || (v.ok === false && isWireError(v.error)));

const isNumbers = (v: unknown): v is number[] => {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'number') return false;
  return true;
};
const optionalNumber = optional(isNumber);
const isBox = (s: Record<string, unknown>) => isNumber(s.x) && isNumber(s.y) && isNumber(s.w) && isNumber(s.h) && optionalNumber(s.width);
/** What each kind of shape carries besides its id, author and colour. */
const SHAPE_KINDS: { [K in ShapeInput['kind']]: (shape: Record<string, unknown>) => boolean } = {
  stroke: (s) => isNumbers(s.points) && optionalNumber(s.width),
  line: isBox,
  rect: isBox,
  ellipse: isBox,
  text: (s) => isNumber(s.x) && isNumber(s.y) && isString(s.text) && optionalNumber(s.size),
};
/** A shape as the board keeps it (stamped with `id` and `by`). */
export const isShape = (v: unknown): v is Shape =>
  isRecord(v) && isString(v.id) && isString(v.by) && (v.color === undefined || isString(v.color)) && has(SHAPE_KINDS, v.kind) && SHAPE_KINDS[v.kind](v);

const isGrant = (v: unknown): v is EffectiveGrant => {
  if (!isRecord(v)) return false;
  for (const flag of GRANT_FLAGS) if (typeof v[flag] !== 'boolean') return false;
  return arrayOf(isSource)(v.canPublishSources);
};
export const parseSelf = record<SelfInfo>({ id: isString, name: isString, isViewer: isBoolean, grant: isGrant, joinedAt: isNumber });

/** What each output tells about its product while active. */
const OUTPUT_INFO: { [O in OutputName]: Guard<OutputInfo[O]> } = {
  recording: guard({ recording: isString, file: isString, url: isString }),
  hls: guard({ playlist: isString }),
  livestream: guard({ server: isString, key: isString }),
  transcription: guard({ language: isString }),
  whiteboard: guard({ maxBytes: isNumber }),
};
const STATES: readonly OutputState[] = ['stopped', 'starting', 'active', 'stopping', 'failed'];
const status = <O extends OutputName>(info: Guard<OutputInfo[O]>) =>
  record<OutputStatus<O>>({ state: oneOf(STATES), by: optional(isString), error: optional(isWireError), info: optional(info) });
/** One status parser per output, each checking its own `info`. */
const STATUS = Object.fromEntries(OUTPUTS.map((o) => [o, status(OUTPUT_INFO[o])])) as { [O in OutputName]: ValueParser<OutputStatus<O>> };
/** The status of an output this SDK does not know (a newer relay): its `info` is not checked. */
const OTHER_STATUS = status<OutputName>(isRecord as Guard<OutputInfo[OutputName]>);

/** The status of `output`. */
export function parseOutputStatus(output: string, value: unknown): Parsed<OutputStatus> {
  return (has(STATUS, output) ? STATUS[output] : OTHER_STATUS)(value);
}

/** The state of every output (each one this SDK knows must be there). */
export function parseOutputStatuses(value: unknown): Parsed<OutputStatuses> {
  if (!isRecord(value)) return bad('must be an object');
  const out: Partial<Record<OutputName, OutputStatus>> = {};
  for (const output of OUTPUTS) {
    const parsed = STATUS[output](value[output]);
    if (!parsed.ok) return bad(`${output}: ${parsed.problem}`);
    out[output] = parsed.value;
  }
  return ok(out as OutputStatuses);
}
