/**
 * Cheap checks of the values the relay sends, for the SDK (the relay's own input goes through
 * `validate.ts`). They check shapes and types, not the relay's bounds. Elements of arrays (a
 * page of 1000 participants, pubsub history, a board of shapes) are checked in place, in one
 * pass and without copies; small objects are copied field by field, keeping only the fields
 * this SDK knows. Fields it does not know are ignored (a newer relay may send more).
 *
 * Relays of neighbouring versions speak the same protocol version, so what this SDK does not
 * know is not malformed (docs/protocol.md, "Compatibility"): a member of a list it does not
 * know (a source, a track) is left out, an output's `info` that does not fit is left out, and
 * an error's code is kept while its kind and reason are normalised ({@link ReceivedError}).
 * Only what does not fit at all is refused; a value that does fit costs no copy beyond those
 * said above (the repairs happen after a strict check failed).
 */
import { ErrorKind, isErrorCode, isErrorKind, isErrorReason, kindOf, type ReceivedError } from './codes.ts';
import { OUTPUTS, type LobbyDecision, type LobbyRequest, type OutputChange, type OutputInfo, type OutputName, type OutputState, type OutputStatus, type OutputStatuses, type RecordingFile, type RecordingFileKind, type Shape, type ShapeInput } from './control.ts';
import { GRANT_FLAGS, SOURCES, type EffectiveGrant } from './grant.ts';
import type { TrackInfo, TrackKind } from './media.ts';
import { TRANSCRIPTION_ENGINES } from './transcript.ts';
import type { JsonValue, ParticipantCounts, ParticipantInfo, ParticipantSummary, PubSubMessage, SelfInfo, StreamInfo } from './messages.ts';
import { bad, isRecord, ok, type Parsed } from './parse.ts';

/** A check that narrows. */
export type Guard<T> = (value: unknown) => value is T;
/** A guard per field of `T`; an optional field's guard also accepts `undefined`. */
export type Spec<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? Guard<T[K] | undefined> : Guard<T[K]> };
/** A parser of one value. */
export type ValueParser<T> = (value: unknown) => Parsed<T>;

/** What a {@link Fit} makes of a value that does not fit at all. */
export const MALFORMED: unique symbol = Symbol('malformed');
export type Malformed = typeof MALFORMED;
/**
 * A check of a field that may also repair it: the value itself when it fits, a copy without
 * what this SDK does not know, `undefined` to leave an optional field out, or MALFORMED.
 */
export interface Fit<T> {
  readonly fit: (value: unknown) => T | Malformed;
}
/** The check of one field of a {@link record}. */
export type Field<T> = Guard<T> | Fit<T>;
/** A check per field of `T`; an optional field's also accepts (or makes) `undefined`. */
export type RecordSpec<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? Field<T[K] | undefined> : Field<T[K]> };

export const isString = (v: unknown): v is string => typeof v === 'string';
/** JSON has no NaN nor Infinity: a parsed number is finite. */
export const isNumber = (v: unknown): v is number => typeof v === 'number';
/** A count or a size: a whole number, not negative, that a double holds exactly. */
export const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
/** A stream id: what a chunk's header carries (32 bits). */
export const isStreamId = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 0xffffffff;
/** A whole number from `min` to `max`. */
export const intIn = (min: number, max: number) => (v: unknown): v is number => Number.isInteger(v) && (v as number) >= min && (v as number) <= max;
export const isBoolean = (v: unknown): v is boolean => typeof v === 'boolean';
/** Any JSON value (a pubsub payload): only a missing one is wrong. */
export const isJson = (v: unknown): v is JsonValue => v !== undefined;
export const optional = <T>(guard: Guard<T>): Guard<T | undefined> => (v): v is T | undefined => v === undefined || guard(v);
export const oneOf = <T extends string>(values: readonly T[]): Guard<T> => (v): v is T => values.includes(v as T);
/** A string none of `values`: what a newer relay may send where this SDK knows `values` only. */
export const newerThan = (values: readonly string[]) => (v: unknown): boolean => typeof v === 'string' && !values.includes(v);
/** An array of which every element fits, checked in place. */
export const arrayOf = <T>(guard: Guard<T>): Guard<T[]> => (v): v is T[] => Array.isArray(v) && v.every((e) => guard(e));
export const isSource = oneOf(SOURCES);
export const TRACK_KINDS: readonly TrackKind[] = ['audio', 'video'];

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

/** A parser of an object with these fields: a copy of them (each checked, or repaired by its fit), or which one is wrong. */
export function record<T>(spec: RecordSpec<T>): ValueParser<T> {
  const keys = Object.keys(spec) as Array<keyof T & string>;
  return (v) => {
    if (!isRecord(v)) return bad('must be an object');
    const out: Record<string, unknown> = {};
    for (const key of keys) {
      const check = spec[key] as Field<unknown>;
      let field = v[key];
      if (typeof check === 'function' ? !check(field) : (field = check.fit(field)) === MALFORMED) return bad(`${key} is malformed`);
      if (field !== undefined) out[key] = field;
    }
    return ok(out as T);
  };
}

/** A parser from a guard: the value itself when it fits. */
export const checked = <T>(guard: Guard<T>): ValueParser<T> => (v) => (guard(v) ? ok(v) : bad('is malformed'));
/** A fit from a parser. */
export const fitOf = <T>(parse: ValueParser<T>): Fit<T> => ({
  fit: (v) => {
    const parsed = parse(v);
    return parsed.ok ? parsed.value : MALFORMED;
  },
});
export const optionalFit = <T>(fit: Fit<T>): Fit<T | undefined> => ({ fit: (v) => (v === undefined ? undefined : fit.fit(v)) });
/** An optional field kept only when it fits: one that does not (a relay of another version) is left out, never a failure. */
export const ifFits = <T>(guard: Guard<T>): Fit<T | undefined> => ({ fit: (v) => (guard(v) ? v : undefined) });

/** An array of which every element fits `guard`: one pass, no copy; the problem names the first misfit. */
export function list<T>(what: string, value: unknown, guard: Guard<T>): Parsed<T[]> {
  if (!Array.isArray(value)) return bad(`${what} must be an array`);
  for (let i = 0; i < value.length; i++) if (!guard(value[i])) return bad(`${what}[${i}] is malformed`);
  return ok(value);
}

/**
 * An array of which every element fits `fit`: one pass, the array itself when no element needed
 * a repair (no copy), else a copy with the repaired ones; the problem names the first misfit.
 */
export function fitList<T>(what: string, value: unknown, fit: (v: unknown) => T | Malformed): Parsed<T[]> {
  if (!Array.isArray(value)) return bad(`${what} must be an array`);
  let out: T[] | null = null;
  for (let i = 0; i < value.length; i++) {
    const element: unknown = value[i];
    const fitted = fit(element);
    if (fitted === MALFORMED) return bad(`${what}[${i}] is malformed`);
    if (out) out.push(fitted);
    else if (fitted !== element) (out = value.slice(0, i)).push(fitted);
  }
  return ok(out ?? value);
}

/**
 * A list whose members this SDK may not all know (a newer relay's source or track): the array
 * itself when it knows them all (no copy), else a copy without the ones it does not know;
 * MALFORMED when a member is not even `wellFormed`.
 */
export function knownMembers<T>(value: unknown, known: Guard<T>, wellFormed: Guard<unknown>): T[] | Malformed {
  if (!Array.isArray(value)) return MALFORMED;
  for (let i = 0; i < value.length; i++) if (!known(value[i])) return value.every(wellFormed) ? value.filter(known) : MALFORMED;
  return value;
}

/** A kind this SDK does not know is taken from the code when it knows the code, else from the wire's kind, else `Request`. */
const kindOfReceived = (code: string, kind: unknown): ErrorKind => (isErrorCode(code) ? kindOf(code) : isErrorKind(kind) ? kind : ErrorKind.Request);
const optionalString = optional(isString);

/**
 * An error as a relay of any version sends it (in an error frame, a response, a failed output, a
 * lobby decision, an aborted stream), normalised: the code kept as sent, the kind filled in
 * (see {@link ReceivedError}), a reason this SDK does not know left out.
 */
export function parseReceivedError(v: unknown): Parsed<ReceivedError> {
  if (!isRecord(v)) return bad('must be an object');
  const { code, message, reason, kind } = v;
  if (!isString(code)) return bad('code is malformed');
  if (!isString(message)) return bad('message is malformed');
  if (!optionalString(reason)) return bad('reason is malformed');
  if (!optionalString(kind)) return bad('kind is malformed');
  return ok(isErrorReason(reason) ? { code, message, reason, kind: kindOfReceived(code, kind) } : { code, message, kind: kindOfReceived(code, kind) });
}
export const receivedError: Fit<ReceivedError> = fitOf(parseReceivedError);

export const TRACK_INFO: Spec<TrackInfo> = { source: isSource, kind: oneOf(TRACK_KINDS), muted: isBoolean };
export const isTrackInfo = guard(TRACK_INFO);
/** A track, of a source or kind this SDK may not know. */
type AnyTrack = { source: string; kind: string; muted: boolean };
const isAnyTrack = guard<AnyTrack>({ source: isString, kind: isString, muted: isBoolean });
/** What a participant publishes: a track of a source or kind this SDK does not know is left out. */
const knownTracks = (tracks: AnyTrack[] = []) => tracks.filter(isTrackInfo);
const tracks: Fit<TrackInfo[] | undefined> = { fit: (v) => (v === undefined ? undefined : knownMembers(v, isTrackInfo, isAnyTrack)) };
type LooseTracks<P> = Omit<P, 'tracks'> & { tracks?: AnyTrack[] };

export const PARTICIPANT_INFO: Spec<ParticipantInfo> = { id: isString, name: isString, joinedAt: isNumber, tracks: optional(arrayOf(isTrackInfo)) };
export const isParticipantInfo = guard(PARTICIPANT_INFO);
const isLooseParticipant = guard<LooseTracks<ParticipantInfo>>({ ...PARTICIPANT_INFO, tracks: optional(arrayOf(isAnyTrack)) });
/** A participant in a list, checked in place; with a track this SDK does not know, a copy without it. */
export const fitParticipant = (v: unknown): ParticipantInfo | Malformed =>
  isParticipantInfo(v) ? v : isLooseParticipant(v) ? { ...v, tracks: knownTracks(v.tracks) } : MALFORMED;
/** A participant, copied field by field (`participant-joined`). */
export const parseParticipant = record<ParticipantInfo>({ ...PARTICIPANT_INFO, tracks });
const TIERS = oneOf(['speaker', 'viewer']);
export const isParticipantSummary = guard<ParticipantSummary>({ ...PARTICIPANT_INFO, tier: TIERS });
const isLooseSummary = guard<LooseTracks<ParticipantSummary>>({ ...PARTICIPANT_INFO, tracks: optional(arrayOf(isAnyTrack)), tier: TIERS });
/** An entry of a page of participants, checked in place; with a track this SDK does not know, a copy without it. */
export const fitParticipantSummary = (v: unknown): ParticipantSummary | Malformed =>
  isParticipantSummary(v) ? v : isLooseSummary(v) ? { ...v, tracks: knownTracks(v.tracks) } : MALFORMED;
/** A page of one tier (`participants.list`, and the server API's): its entries checked in place. */
export function parseParticipantPage(v: unknown): Parsed<{ participants: ParticipantSummary[]; nextCursor: string | null }> {
  if (!isRecord(v)) return bad('must be an object');
  const { nextCursor } = v;
  if (nextCursor !== null && !isString(nextCursor)) return bad('nextCursor must be a string or null');
  const participants = fitList('participants', v.participants, fitParticipantSummary);
  return participants.ok ? ok({ participants: participants.value, nextCursor }) : participants;
}

const countsRecord = record<ParticipantCounts>({ speaker: isCount, viewer: isCount, total: isCount });
/** The room's counts: whole, not negative, and `total` at least the tiers this SDK knows (a newer relay may count more). */
export const parseCounts: ValueParser<ParticipantCounts> = (v) => {
  const parsed = countsRecord(v);
  return parsed.ok && parsed.value.total < parsed.value.speaker + parsed.value.viewer ? bad('total is below speaker + viewer') : parsed;
};
export const LOBBY_REQUEST: Spec<LobbyRequest> = { participantId: isString, name: isString, requestedAt: isNumber };
export const isLobbyRequest = guard(LOBBY_REQUEST);
export const PUBSUB_MESSAGE: Spec<PubSubMessage> = { id: isString, topic: isString, payload: isJson, from: isString, timestamp: isNumber };
export const isPubSubMessage = guard(PUBSUB_MESSAGE);
/** What a publish answers (`pubsub.publish`, and the server API's). */
export const parsePublished = record<{ id: string; timestamp: number; recipients: number }>({ id: isString, timestamp: isNumber, recipients: isNumber });
export const STREAM_INFO: Spec<StreamInfo> = {
  streamId: isStreamId,
  from: isString,
  timestamp: isNumber,
  size: isCount,
  kind: oneOf(['text', 'bytes', 'blob']),
  topic: optional(isString),
  mimeType: optional(isString),
  name: optional(isString),
};

const isAdmitted = guard<{ participantId: string; ok: true }>({ participantId: isString, ok: (v): v is true => v === true });
/** A lobby decision: an admission checked in place, a refusal copied with its error normalised. */
export function fitLobbyDecision(v: unknown): LobbyDecision | Malformed {
  if (isAdmitted(v)) return v;
  if (!isRecord(v) || !isString(v.participantId) || v.ok !== false) return MALFORMED;
  const error = parseReceivedError(v.error);
  return error.ok ? { participantId: v.participantId, ok: false, error: error.value } : MALFORMED;
}

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

type LooseGrant = Omit<EffectiveGrant, 'canPublishSources'> & { canPublishSources: string[] };
const isLooseGrant = (v: unknown): v is LooseGrant => {
  if (!isRecord(v)) return false;
  for (const flag of GRANT_FLAGS) if (typeof v[flag] !== 'boolean') return false;
  return arrayOf(isString)(v.canPublishSources);
};
const isGrant = (v: unknown): v is EffectiveGrant => isLooseGrant(v) && v.canPublishSources.every(isSource);
/** The grant itself; with a source this SDK does not know (a newer relay's), a copy without it. */
const grant: Fit<EffectiveGrant> = {
  fit: (v) => (isGrant(v) ? v : isLooseGrant(v) ? { ...v, canPublishSources: v.canPublishSources.filter(isSource) } : MALFORMED),
};
export const parseSelf = record<SelfInfo>({ id: isString, name: isString, isViewer: isBoolean, grant, joinedAt: isNumber });

const isRecordingFile = guard<RecordingFile>({ name: isString, kind: oneOf<RecordingFileKind>(['composite', 'track', 'timeline']), size: isNumber, url: isString });
/** What the relay tells of a recording (`info` of the recording output, `recording-ready`'s `recording`). */
export const isRecordingInfo = guard<OutputInfo['recording']>({ recording: isString, file: isString, url: isString, files: optional(arrayOf(isRecordingFile)) });
/** What each output tells about its product while active (a recording also once stopped). */
const OUTPUT_INFO: { [O in OutputName]: Guard<OutputInfo[O]> } = {
  recording: isRecordingInfo,
  hls: guard({ playlist: isString }),
  livestream: guard({ server: isString, key: isString }),
  transcription: guard({ language: isString, engine: oneOf(TRANSCRIPTION_ENGINES) }),
  whiteboard: guard({ maxBytes: isNumber }),
};
const OUTPUT_STATES: readonly OutputState[] = ['stopped', 'starting', 'active', 'stopping', 'failed'];
const isOutputState = oneOf(OUTPUT_STATES);
const isNewerState = newerThan(OUTPUT_STATES);
const optionalError = optionalFit(receivedError);

/** An output's status: its `info` kept only when it fits the output (a relay of another version may shape it otherwise). */
const statusSpec = <O extends OutputName>(output: O): RecordSpec<OutputStatus<O>> => ({
  state: isOutputState,
  by: optionalString,
  error: optionalError,
  info: ifFits(OUTPUT_INFO[output]),
});
const change = <O extends OutputName>(output: O) =>
  record<OutputStatus<O> & { output: O }>({ output: (v): v is O => v === output, ...statusSpec(output) });
/** One status parser per output, and one for its `output-changed`, each checking its own `info`. */
const STATUS: { [O in OutputName]: ValueParser<OutputStatus<O>> } = {
  recording: record(statusSpec('recording')),
  hls: record(statusSpec('hls')),
  livestream: record(statusSpec('livestream')),
  transcription: record(statusSpec('transcription')),
  whiteboard: record(statusSpec('whiteboard')),
};
const CHANGE: { [O in OutputName]: ValueParser<OutputStatus<O> & { output: O }> } = {
  recording: change('recording'),
  hls: change('hls'),
  livestream: change('livestream'),
  transcription: change('transcription'),
  whiteboard: change('whiteboard'),
};

/** True when `value`'s state is one this SDK does not know (a newer relay's). */
const hasNewerState = (value: unknown) => isRecord(value) && isNewerState(value.state);

/** An `output-changed`; `null` (to ignore) for an output or a state this SDK does not know. */
export function parseOutputChange(data: unknown): Parsed<OutputChange | null> {
  if (!isRecord(data) || !isString(data.output)) return bad('output is malformed');
  if (!has(CHANGE, data.output)) return ok(null);
  const parsed: Parsed<OutputChange> = CHANGE[data.output](data);
  return parsed.ok || !hasNewerState(data) ? parsed : ok(null);
}

/**
 * The status of `output` in `joined` or in an answer to `output.start`/`output.stop`. One in a
 * state this SDK does not know (a newer relay's) is taken as `stopped`: this SDK cannot follow
 * it until a state it knows comes.
 */
export function parseOutputStatus<O extends OutputName>(output: O, value: unknown): Parsed<OutputStatus<O>> {
  const parsed = STATUS[output](value);
  return parsed.ok || !hasNewerState(value) ? parsed : ok({ state: 'stopped' });
}

/** The state of every output this SDK knows (each must be there); outputs it does not know are left out. */
export function parseOutputStatuses(value: unknown): Parsed<OutputStatuses> {
  if (!isRecord(value)) return bad('must be an object');
  const out: Partial<Record<OutputName, OutputStatus>> = {};
  for (const output of OUTPUTS) {
    const parsed = parseOutputStatus(output, value[output]);
    if (!parsed.ok) return bad(`${output}: ${parsed.problem}`);
    out[output] = parsed.value;
  }
  // every output was parsed above
  return ok(out as OutputStatuses);
}
