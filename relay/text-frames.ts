/**
 * A member's text frame read into what it asks: a request for its room (a large publish with its
 * payload cut out of the frame's bytes, never decoded), or the relay's own answer (a pong, or why
 * the frame was refused, under its request id where it has one so that its caller does not wait
 * for its timeout).
 */
import type { RawData } from 'ws';
import type { ErrorFrame, RequestFrame, ServerFrame, WireError } from '../src/protocol/messages.ts';
import { MAX_PAYLOAD_DEPTH, parseClientFrame, type Parsed } from '../src/protocol/validate.ts';
import { rawText } from './connection.ts';
import { rawLength } from './frame-gate.ts';
import { cutPublishPayload } from './data/publish-cut.ts';
import { RawPayload, type Payload } from './data/raw-json.ts';

/** Text frames from this size on are looked at as publish frames whose payload is cut out of their bytes (see `largePublish`). */
const CUT_MIN_BYTES = 1024;
const PUBLISH_METHOD = Buffer.from('pubsub.publish');

/**
 * Object keys a member's text frame may hold outside a publish's payload (which is cut out, never
 * parsed), and how deep it may nest. Requests' parameters are flat objects of a few keys; a frame
 * of objects each with a key of its own costs `JSON.parse` 5–12× what plain JSON of its size does
 * (a 256 KiB one 12–30 ms, one turn of the event loop that no scheduling can split), and arrays
 * nested 100,000 deep 4–5×, from any member, an empty grant's too.
 */
export const MAX_FRAME_KEYS = 1024;
/** A payload may nest 64 deep (`MAX_PAYLOAD_DEPTH`), inside a frame's own three levels. */
export const MAX_FRAME_DEPTH = MAX_PAYLOAD_DEPTH + 4;

/**
 * Why `text` would cost its parse more than its bytes say, or null: more than `maxKeys` colons
 * outside its strings (in JSON, its objects' keys), or brackets nested more than `maxDepth` deep.
 * One pass, no allocation, before `JSON.parse` builds it.
 */
export function frameShapeProblem(text: string, maxKeys = MAX_FRAME_KEYS, maxDepth = MAX_FRAME_DEPTH): string | null {
  let keys = 0;
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // a string, to its closing quote (an escaped one is skipped with its backslash)
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x3a) {
      if (++keys > maxKeys) return `a frame holds at most ${maxKeys} object keys outside a publish's payload`;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return `a frame nests at most ${maxDepth} arrays and objects deep`;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return null;
}

/** What a member's text frame comes to: a request for its room, or the relay's answer. */
export type TextRead = { request: RequestFrame } | { answer: ServerFrame };

/** The request id of a frame too large to parse, if it starts the way the SDK writes requests. */
function leadingRequestId(text: string): number | undefined {
  const m = /^\{"type":"request","id":(\d{1,15})[,}]/.exec(text.slice(0, 64));
  return m ? Number(m[1]) : undefined;
}

/** The answer to a frame refused with `error`: a request's under its id, which its caller waits for; else an error frame. */
function refusal(id: number | undefined, error: WireError): ServerFrame {
  if (id !== undefined) return { type: 'response', id, error };
  const frame: ErrorFrame = { type: 'error', error };
  return frame;
}

/** The answer to a frame the relay did not handle (refused before the member is in, or a fault). */
export function unhandledAnswer(data: RawData, isBinary: boolean, error: WireError): ServerFrame {
  let id: number | undefined;
  try {
    id = isBinary ? undefined : leadingRequestId(rawText(data));
  } catch {
    id = undefined;
  }
  return refusal(id, error);
}

/** A joined member's text frame; those over `maxFrameBytes` are answered `PAYLOAD_TOO_LARGE`. */
export function readMemberText(data: RawData, maxFrameBytes: number): TextRead {
  const bytes = rawLength(data);
  const request = bytes >= CUT_MIN_BYTES && bytes <= maxFrameBytes ? largePublish(data) : null;
  if (request) return { request };
  return readText(rawText(data), bytes, maxFrameBytes);
}

/**
 * A large publish frame, its payload cut out of the frame's bytes and never decoded (see
 * `publish-cut.ts`); the rest of the frame is parsed the ordinary way. Null when the frame is
 * not one (nor a valid one): it is then read the ordinary way, which says what is wrong with it.
 */
function largePublish(data: RawData): RequestFrame | null {
  if (!Buffer.isBuffer(data) || data.indexOf(PUBLISH_METHOD) < 0) return null;
  const cut = cutPublishPayload(data, MAX_PAYLOAD_DEPTH);
  if (!cut) return null;
  const rest = `${data.toString('utf8', 0, cut.start)}0${data.toString('utf8', cut.end)}`;
  // read the ordinary way, which refuses it (the whole frame has at least those keys and depth)
  if (frameShapeProblem(rest) !== null) return null;
  const parsed = parseClientFrame(rest);
  if (!parsed.ok || parsed.value.type !== 'request' || parsed.value.method !== 'pubsub.publish') return null;
  const request = parsed.value;
  // the 0 the payload's place held while the rest was parsed: the payload is its bytes, checked
  (request.params as { payload: Payload }).payload = new RawPayload(data.subarray(cut.start, cut.end));
  return request;
}

/** A member's text frame: `bytes` is its length on the wire (ws checked it is UTF-8, so also its text's). */
function readText(text: string, bytes: number, maxFrameBytes: number): TextRead {
  if (bytes > maxFrameBytes) {
    const error: WireError = { code: 'PAYLOAD_TOO_LARGE', kind: 'Request', message: `frames are at most ${maxFrameBytes} bytes (announced in joined.limits)`, reason: 'frame-too-large' };
    return { answer: refusal(leadingRequestId(text), error) };
  }
  // a frame under the cut's size holds too little to matter
  const shape = bytes >= CUT_MIN_BYTES ? frameShapeProblem(text) : null;
  if (shape !== null) return { answer: refusal(leadingRequestId(text), { code: 'INVALID_ARGUMENT', kind: 'Request', message: shape, reason: 'bad-frame' }) };
  const parsed = parseClientFrame(text);
  if (!parsed.ok) return { answer: badFrameAnswer(parsed) };
  if (parsed.value.type === 'join' || parsed.value.type === 'resume') {
    return { answer: refusal(undefined, { code: 'INVALID_STATE', kind: 'State', message: 'this connection has already joined', reason: 'already-joined' }) };
  }
  if (parsed.value.type === 'ping') return { answer: { type: 'pong' } };
  return { request: parsed.value };
}

function badFrameAnswer(parsed: Extract<Parsed<unknown>, { ok: false }>): ServerFrame {
  const error: WireError = { code: 'INVALID_ARGUMENT', kind: 'Request', message: parsed.problem, reason: 'bad-frame' };
  return refusal(parsed.id, error);
}
