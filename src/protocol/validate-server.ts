/**
 * Validation of inbound server frames, for the SDK: the mirror of `validate.ts`. Every text
 * frame from the relay goes through {@link parseServerFrame}, which returns a typed frame, says
 * what is wrong with it, or (`null`) says to ignore it: an event this SDK does not know, from a
 * newer relay. A frame of a type it does not know is a problem marked `unknown` (the handshake
 * ignores it: a newer relay may send new frames before `joined`). A response's `result` is
 * checked against its method by `validate-results.ts`, since only the request says which
 * method it answers.
 */
import type { ReceivedError } from './codes.ts';
import type { JoinedFrame, ServerFrame } from './messages.ts';
import { bad, isRecord, ok, type Parsed } from './parse.ts';
import { parseEventFrame } from './validate-server-events.ts';
import {
  fitList,
  fitParticipant,
  has,
  isLobbyRequest,
  isNumber,
  isString,
  list,
  parseCounts,
  parseOutputStatuses,
  parseReceivedError,
  parseSelf,
  record,
} from './validate-server-values.ts';

export { parseResult } from './validate-results.ts';
export { isServerEventName } from './validate-server-events.ts';

type FrameType = ServerFrame['type'];
type FrameOf<T extends FrameType> = Extract<ServerFrame, { type: T }>;

const parseResume = record<JoinedFrame['resume']>({ credential: isString, graceMs: isNumber });
const parseLimits = record<JoinedFrame['limits']>({ maxFrameBytes: isNumber, maxPayloadBytes: isNumber });

/** The stage as the room keeps it: each participant once, and never the joiner itself (a broken relay's list had both). */
function othersOnce<P extends { id: string }>(participants: P[], self: string): P[] {
  const seen = new Set<string>([self]);
  const kept = participants.filter((p) => !seen.has(p.id) && (seen.add(p.id), true));
  // as it came when nothing was left out (the stage of a large room is not copied)
  return kept.length === participants.length ? participants : kept;
}

/** Validate a `joined` frame: everything the room is built from. */
export function parseJoinedFrame(frame: Record<string, unknown>): Parsed<JoinedFrame> {
  const { v, roomId, resumed } = frame;
  if (!isNumber(v)) return bad('joined: v must be a number');
  if (!isString(roomId)) return bad('joined: roomId must be a string');
  if (resumed !== undefined && typeof resumed !== 'boolean') return bad('joined: resumed must be a boolean');
  const self = parseSelf(frame.self);
  if (!self.ok) return bad(`joined: self ${self.problem}`);
  const participants = fitList('participants', frame.participants, fitParticipant);
  if (!participants.ok) return bad(`joined: ${participants.problem}`);
  const counts = parseCounts(frame.counts);
  if (!counts.ok) return bad(`joined: counts ${counts.problem}`);
  const outputs = parseOutputStatuses(frame.outputs);
  if (!outputs.ok) return bad(`joined: outputs ${outputs.problem}`);
  const lobby = frame.lobby === undefined ? ok(undefined) : list('lobby', frame.lobby, isLobbyRequest);
  if (!lobby.ok) return bad(`joined: ${lobby.problem}`);
  const resume = parseResume(frame.resume);
  if (!resume.ok) return bad(`joined: resume ${resume.problem}`);
  const limits = parseLimits(frame.limits);
  if (!limits.ok) return bad(`joined: limits ${limits.problem}`);
  return ok({
    type: 'joined',
    v,
    roomId,
    self: self.value,
    participants: othersOnce(participants.value, self.value.id),
    counts: counts.value,
    outputs: outputs.value,
    ...(lobby.value === undefined ? {} : { lobby: lobby.value }),
    resume: resume.value,
    ...(resumed === undefined ? {} : { resumed }),
    limits: limits.value,
  });
}

/** The error of a `join-error`, `error` or `response` frame, normalised (its code kept as sent). */
function frameError(type: FrameType, frame: Record<string, unknown>, id?: number): Parsed<ReceivedError> {
  const error = parseReceivedError(frame.error);
  return error.ok ? error : bad(`${type}: error ${error.problem}`, id);
}

/** One parser per frame type: the typed dispatch table of frame validation. */
const FRAMES: { [T in FrameType]: (frame: Record<string, unknown>) => Parsed<FrameOf<T> | null> } = {
  joined: parseJoinedFrame,
  lobby: ({ requestedAt, ttl }) => (isNumber(requestedAt) && isNumber(ttl) ? ok({ type: 'lobby', requestedAt, ttl }) : bad('lobby: requestedAt and ttl must be numbers')),
  'join-error': (frame) => {
    const error = frameError('join-error', frame);
    return error.ok ? ok({ type: 'join-error', error: error.value }) : error;
  },
  // the result is checked by the request's method (parseResult); a malformed answer keeps its id
  response: (frame) => {
    const id = frame.id;
    if (!Number.isSafeInteger(id)) return bad('response: id must be an integer');
    const rid = id as number;
    if (frame.error !== undefined) {
      const error = frameError('response', frame, rid);
      return error.ok ? ok({ type: 'response', id: rid, error: error.value }) : error;
    }
    return frame.result === undefined ? bad('response: result or error is required', rid) : ok({ type: 'response', id: rid, result: frame.result });
  },
  event: parseEventFrame,
  error: (frame) => {
    const error = frameError('error', frame);
    return error.ok ? ok({ type: 'error', error: error.value }) : error;
  },
  pong: () => ok({ type: 'pong' }),
};

/**
 * Parse a parsed JSON value as a server frame (`null`: a frame to ignore). A frame whose type is
 * a string this SDK does not know is a problem marked `unknown`: a newer relay's frame.
 */
export function parseServerValue(frame: unknown): Parsed<ServerFrame | null> {
  if (!isRecord(frame)) return bad('frame must be a JSON object');
  const type = frame.type;
  if (isString(type) && !has(FRAMES, type)) return { ok: false, problem: `unknown frame type ${JSON.stringify(type).slice(0, 80)}`, unknown: true };
  if (!has(FRAMES, type)) return bad(`frame type must be a string, not ${typeof type}`);
  return (FRAMES[type] as (frame: Record<string, unknown>) => Parsed<ServerFrame | null>)(frame);
}

/** Parse a text frame from the relay into a server frame (`null`: a frame to ignore). */
export function parseServerFrame(text: string): Parsed<ServerFrame | null> {
  let frame: unknown;
  try {
    frame = JSON.parse(text);
  } catch {
    return bad('frame is not valid JSON');
  }
  return parseServerValue(frame);
}
