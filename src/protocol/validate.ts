/**
 * Validation of inbound client frames. The relay never casts unchecked input: every frame
 * goes through {@link parseClientFrame}, which either returns a typed frame or says what is
 * wrong with it.
 */
import { CONTROL_PARAMS } from './validate-control.ts';
import { MEDIA_PARAMS } from './validate-media.ts';
import type { ClientFrame, JoinFrame, JsonValue, Method, Params, RequestFrame, ResumeFrame } from './messages.ts';
import { MAX_LEAVE_IDS } from './messages.ts';
import { bad, isId, isRecord, MAX_ID_LENGTH, MAX_NAME_LENGTH, ok, optionalString, type Parsed, type ParamsParser } from './parse.ts';
import { ID_CONTROL_RANGES, isWellFormed, NAME_CONTROL_RANGES, nameControl } from './text.ts';

/**
 * The longest resume credential: a cluster's names its node, project and room (each base64url of
 * their UTF-8: a project of 256 characters and a room of 128, three bytes a character at worst),
 * its secret and its tag.
 */
const MAX_CREDENTIAL = 2048;

export { isRecord, MAX_ID_LENGTH, MAX_NAME_LENGTH, type Parsed } from './parse.ts';

/** Hard caps of the protocol; the relay's configurable limits are at most these. */
export const MAX_TOPIC_LENGTH = 1024;
export const MAX_TARGETS = 1000;
const MAX_META_LENGTH = 256;
/**
 * A MIME type as browsers make them: `type/subtype` of RFC 9110's token characters, then
 * parameters of printable ASCII as the WHATWG parser takes them (`video/webm;codecs=vp8,opus`
 * from MediaRecorder, a trailing `;`). Written so that a string matches in one way only: the
 * first version let the blanks between two `;` go to either side, and `a/b` + `"; "` × 100 + `é`
 * took 2^100 steps to refuse (one frame, before any join, held the relay's event loop for good).
 */
const MIME_TYPE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+\/[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*(?:;[\t\x20-\x3a\x3c-\x7e]*)+)?$/;

function isTopic(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_TOPIC_LENGTH;
}

/** `to`: absent, or an array of participant ids. */
function parseTargets(value: unknown): Parsed<string[] | undefined> {
  if (value === undefined) return ok(undefined);
  if (!Array.isArray(value) || value.length > MAX_TARGETS || !value.every(isId)) {
    return bad(`to must be an array of at most ${MAX_TARGETS} participant ids`);
  }
  return ok(value as string[]);
}

/** Deepest nesting of a pubsub payload: encoding deeper JSON costs a stack the relay will not give. */
export const MAX_PAYLOAD_DEPTH = 64;

/** Whether a parsed JSON value nests at most `max` arrays and objects deep (walked without recursion). */
export function nestsWithin(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return false;
    for (const child of Array.isArray(v) ? v : Object.values(v as object)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return true;
}

const isUint32 = (value: unknown): value is number => Number.isInteger(value) && (value as number) >= 0 && (value as number) <= 0xffffffff;

/** One parser per method: the typed dispatch table of request validation. */
const PARAMS: { [M in Method]: ParamsParser<M> } = {
  ...CONTROL_PARAMS,
  ...MEDIA_PARAMS,
  'participants.list': (p) => {
    if (p.tier !== 'viewer' && p.tier !== 'speaker') return bad("tier must be 'viewer' or 'speaker'");
    if (p.limit !== undefined && !(Number.isInteger(p.limit) && (p.limit as number) >= 1 && (p.limit as number) <= 1000)) {
      return bad('limit must be an integer from 1 to 1000');
    }
    if (p.cursor !== undefined && p.cursor !== null && !(typeof p.cursor === 'string' && p.cursor.length <= 256)) {
      return bad('cursor must be a string returned by a previous page');
    }
    return ok({
      tier: p.tier,
      ...(p.limit === undefined ? {} : { limit: p.limit as number }),
      ...(typeof p.cursor === 'string' ? { cursor: p.cursor } : {}),
    });
  },
  'room.end': () => ok({}),
  'session.leave': () => ok({}),
  'participant.remove': (p) =>
    isId(p.participantId) ? ok({ participantId: p.participantId }) : bad('participantId must be a non-empty string'),
  'pubsub.publish': (p) => {
    if (!isTopic(p.topic)) return bad('topic must be a non-empty string');
    if (p.payload === undefined) return bad('payload is required (any JSON value)');
    if (!nestsWithin(p.payload, MAX_PAYLOAD_DEPTH)) return bad(`payload may nest at most ${MAX_PAYLOAD_DEPTH} arrays and objects deep`);
    const to = parseTargets(p.to);
    if (!to.ok) return to;
    if (p.persist !== undefined && typeof p.persist !== 'boolean') return bad('persist must be a boolean');
    return ok({ topic: p.topic, payload: p.payload as JsonValue, ...(to.value ? { to: to.value } : {}), ...(p.persist ? { persist: true } : {}) });
  },
  'pubsub.subscribe': (p) => (isTopic(p.topic) ? ok({ topic: p.topic }) : bad('topic must be a non-empty string')),
  'pubsub.unsubscribe': (p) => (isTopic(p.topic) ? ok({ topic: p.topic }) : bad('topic must be a non-empty string')),
  'pubsub.history': (p) => {
    if (!isTopic(p.topic)) return bad('topic must be a non-empty string');
    if (p.limit !== undefined && !(Number.isInteger(p.limit) && (p.limit as number) >= 1 && (p.limit as number) <= 1000)) {
      return bad('limit must be an integer from 1 to 1000');
    }
    return ok({ topic: p.topic, ...(p.limit === undefined ? {} : { limit: p.limit as number }) });
  },
  'stream.open': (p) => {
    if (!Number.isSafeInteger(p.size) || (p.size as number) < 0) return bad('size must be a non-negative integer');
    if (p.kind !== 'text' && p.kind !== 'bytes' && p.kind !== 'blob') return bad("kind must be 'text', 'bytes' or 'blob'");
    if (p.topic !== undefined && !isTopic(p.topic)) return bad('topic must be a non-empty string');
    const to = parseTargets(p.to);
    if (!to.ok) return to;
    if (!optionalString(p.mimeType, MAX_META_LENGTH) || (p.mimeType !== undefined && !MIME_TYPE.test(p.mimeType as string))) return bad('mimeType must be a MIME type: type/subtype, and parameters');
    if (!optionalString(p.name, MAX_META_LENGTH) || (p.name !== undefined && !isWellFormed(p.name as string))) return bad('name must be a well-formed string of at most 256 characters');
    // a name is shown and saved by its recipients, as a display name is shown
    const control = p.name === undefined ? null : nameControl(p.name as string);
    if (control !== null) return bad(`name must not hold control or bidi control characters (${NAME_CONTROL_RANGES}): it holds ${control}`);
    return ok({
      size: p.size as number,
      kind: p.kind,
      ...(p.topic === undefined ? {} : { topic: p.topic as string }),
      ...(to.value ? { to: to.value } : {}),
      ...(p.mimeType === undefined ? {} : { mimeType: p.mimeType as string }),
      ...(p.name === undefined ? {} : { name: p.name as string }),
    });
  },
  'stream.close': (p) => (isUint32(p.streamId) ? ok({ streamId: p.streamId }) : bad('streamId must be a stream id')),
  'stream.leave': (p) => {
    if (p.streamIds === undefined) return isUint32(p.streamId) ? ok({ streamId: p.streamId }) : bad('streamId must be a stream id');
    const ids = p.streamIds;
    if (p.streamId !== undefined || !Array.isArray(ids) || ids.length === 0 || ids.length > MAX_LEAVE_IDS || !ids.every(isUint32)) {
      return bad(`streamIds must be 1 to ${MAX_LEAVE_IDS} stream ids (and no streamId beside them)`);
    }
    return ok({ streamIds: [...(ids as number[])] });
  },
};

/**
 * A value named in a problem, safely: `String()` of a hostile object (`{"toString":1}`) throws,
 * so only strings are quoted and anything else is named by its type.
 */
function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value.slice(0, 80)) : typeof value;
}

/** True when `name` is a method of the protocol. */
export function isMethod(name: unknown): name is Method {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(PARAMS, name);
}

/** Validate one method's parameters (the relay's server API reuses the frames' parsers). */
export function parseParams<M extends Method>(method: M, params: Record<string, unknown>): Parsed<Params<M>> {
  return (PARAMS[method] as ParamsParser<M>)(params);
}

/** Validate a join frame. */
export function parseJoinFrame(frame: Record<string, unknown>): Parsed<JoinFrame> {
  if (frame.type !== 'join') return bad('the first frame must be a join frame');
  if (typeof frame.v !== 'number') return bad('v (protocol version) must be a number');
  if (typeof frame.token !== 'string') return bad('token must be a string');
  if (!isId(frame.participantId)) return bad(`participantId must be a non-empty, well-formed string of at most 128 characters, without control, bidi control or invisible characters (${ID_CONTROL_RANGES})`);
  if (frame.roomId !== undefined && !isId(frame.roomId)) return bad(`roomId must be a non-empty, well-formed string of at most 128 characters, without control, bidi control or invisible characters (${ID_CONTROL_RANGES})`);
  if (!optionalString(frame.name, MAX_NAME_LENGTH)) return bad('name must be a non-empty string of at most 256 characters');
  const control = frame.name === undefined ? null : nameControl(frame.name as string);
  if (control !== null) return bad(`name must not hold control or bidi control characters (${NAME_CONTROL_RANGES}): it holds ${control}`);
  return ok({
    type: 'join',
    v: frame.v,
    token: frame.token,
    participantId: frame.participantId,
    ...(frame.roomId === undefined ? {} : { roomId: frame.roomId as string }),
    ...(frame.name === undefined ? {} : { name: frame.name as string }),
  });
}

/** Validate a request frame, its parameters included. */
export function parseRequestFrame(frame: Record<string, unknown>): Parsed<RequestFrame> {
  const id = frame.id;
  if (!(Number.isSafeInteger(id) && (id as number) >= 0)) return bad('id must be a non-negative integer');
  const rid = id as number;
  if (!isMethod(frame.method)) return bad(`unknown method ${describe(frame.method)}`, rid);
  const params = frame.params === undefined ? {} : frame.params;
  if (!isRecord(params)) return bad('params must be an object', rid);
  const parsed = (PARAMS[frame.method] as ParamsParser<Method>)(params);
  if (!parsed.ok) return bad(parsed.problem, rid);
  return ok({ type: 'request', id: rid, method: frame.method, params: parsed.value });
}

/** Parse a text frame into a client frame. */
export function parseClientFrame(text: string): Parsed<ClientFrame> {
  const frame = parseObject(text);
  if (!frame.ok) return frame;
  return parseFrameObject(frame.value);
}

/**
 * The first frame of a connection, before authentication: a `join` or a `resume`, and nothing
 * else is looked into (a request's parameters are checked only for members).
 */
export function parseEntryFrame(text: string): Parsed<JoinFrame | ResumeFrame> {
  const frame = parseObject(text);
  if (!frame.ok) return frame;
  if (frame.value.type !== 'join' && frame.value.type !== 'resume') return bad('the first frame must be a join or resume frame');
  return parseFrameObject(frame.value) as Parsed<JoinFrame | ResumeFrame>;
}

function parseObject(text: string): Parsed<Record<string, unknown>> {
  let frame: unknown;
  try {
    frame = JSON.parse(text);
  } catch {
    return bad('frame is not valid JSON');
  }
  return isRecord(frame) ? ok(frame) : bad('frame must be a JSON object');
}

function parseFrameObject(frame: Record<string, unknown>): Parsed<ClientFrame> {
  switch (frame.type) {
    case 'join':
      return parseJoinFrame(frame);
    case 'request':
      return parseRequestFrame(frame);
    case 'ping':
      return ok({ type: 'ping' });
    case 'resume':
      if (typeof frame.v !== 'number') return bad('v (protocol version) must be a number');
      if (typeof frame.credential !== 'string' || frame.credential.length === 0 || frame.credential.length > MAX_CREDENTIAL) return bad('credential must be the string the relay gave');
      return ok({ type: 'resume', v: frame.v, credential: frame.credential });
    default:
      return bad(`unknown frame type ${describe(frame.type)}`);
  }
}
