/**
 * JSON the relay keeps as bytes. An event frame is written once as `{...,"data":<value>}`; the
 * value's bytes are a view into that frame, so what fans out and what is kept share memory, and
 * an answer listing kept values is spliced from those bytes, never parsed or encoded again.
 */
import type { JsonValue, Params, PubSubMessage, RequestFrame } from '../../src/protocol/messages.ts';
import type { KeptBytes } from './byte-arena.ts';

/**
 * A publish frame's payload as the bytes of JSON it came as, checked where it lies in the frame
 * (see `publish-cut.ts`) and never decoded: it is framed to its recipients and kept as those
 * bytes. Its bytes are the frame's, which the relay gives back once the frame is handled (see
 * `own-bytes.ts`): it lives no longer than the handling of its frame.
 */
export class RawPayload {
  constructor(readonly json: Uint8Array) {}

  /** The value, parsed (for what needs it: an output's timeline, a request sent to another node). */
  get value(): JsonValue {
    return JSON.parse(Buffer.from(this.json.buffer, this.json.byteOffset, this.json.byteLength).toString('utf8')) as JsonValue;
  }

  toJSON(): JsonValue {
    return this.value;
  }
}

/** A payload as the value a member sent or as its raw bytes. */
export type Payload = JsonValue | RawPayload;

/** A payload's JSON: its bytes as they came, or the value encoded. */
export function payloadJson(payload: Payload): string | Uint8Array {
  return payload instanceof RawPayload ? payload.json : JSON.stringify(payload);
}

/** A publish request's payload when it is the bytes it came as. */
export function rawPayloadOf(request: RequestFrame): RawPayload | null {
  if (request.method !== 'pubsub.publish') return null;
  const payload: Payload = (request.params as Params<'pubsub.publish'>).payload;
  return payload instanceof RawPayload ? payload : null;
}

/**
 * A publish request with `payload` in its params (a raw payload put in, or taken out to travel
 * apart from the request: see `RemotePort.request`); any other request as it is.
 */
export function withPayload(request: RequestFrame, payload: Payload): RequestFrame {
  if (request.method !== 'pubsub.publish') return request;
  // a payload of bytes stands where the protocol's type says a JSON value: what reads it (the
  // publish handler, a request's encoding) takes either (`payloadJson`, `toJSON`)
  return { ...request, params: { ...(request.params as Params<'pubsub.publish'>), payload: payload as JsonValue } };
}

/**
 * A publish whose payload travels apart from it (to the room's node, as the bus message's bytes),
 * without its payload: no `payload` key at all, not a null in its place, so that a node of an
 * older version, which reads the payload from the request, fails the publish (its byte count of
 * nothing throws; the member is answered `INTERNAL_ERROR`) rather than publishing a null.
 */
export function withoutPayload(request: RequestFrame): RequestFrame {
  if (request.method !== 'pubsub.publish') return request;
  const { payload: _left, ...params } = request.params as Params<'pubsub.publish'>;
  return { ...request, params: params as Params<'pubsub.publish'> };
}

/**
 * The request of another node's `req` message, with its payload's bytes put back where
 * `RemotePort.request` took them out (`raw`, the message's bytes); null when they are missing.
 */
export function requestFromBus(request: unknown, raw: unknown, bytes: Buffer | null): RequestFrame | null {
  if (raw !== true) return request as RequestFrame;
  if (!bytes || typeof request !== 'object' || request === null) return null;
  return withPayload(request as RequestFrame, new RawPayload(bytes));
}

/** A payload's value (a raw payload parsed). */
export function payloadValue(payload: Payload): JsonValue {
  return payload instanceof RawPayload ? payload.value : payload;
}

/** An event frame carrying `value`, and the bytes of `value` inside it. */
export function eventFrame(name: string, value: unknown): { frame: Buffer; json: Buffer } {
  return eventFrameOfJson(name, JSON.stringify(value));
}

/**
 * The same, for a value already serialised: `json` is the JSON text of one value, or that text in
 * pieces. The pieces are written into the frame where they are: joined first, a 64 KiB payload
 * would be copied once more into a string of its own, only to be copied into the frame.
 */
export function eventFrameOfJson(name: string, json: string | readonly (string | Uint8Array)[]): { frame: Buffer; json: Buffer } {
  const head = `{"type":"event","name":${JSON.stringify(name)},"data":`;
  const parts = typeof json === 'string' ? [json] : json;
  const headBytes = Buffer.byteLength(head);
  let bytes = headBytes + 1;
  for (const part of parts) bytes += typeof part === 'string' ? Buffer.byteLength(part) : part.byteLength;
  const frame = Buffer.allocUnsafe(bytes);
  let at = frame.write(head, 0);
  for (const part of parts) {
    if (typeof part === 'string') at += frame.write(part, at);
    else {
      frame.set(part, at);
      at += part.byteLength;
    }
  }
  frame[at] = 0x7d; // the closing brace
  return { frame, json: frame.subarray(headBytes, bytes - 1) };
}

/**
 * A pubsub message as JSON — exactly `JSON.stringify(message)`, in pieces — around its payload's
 * JSON, which the relay already has (it measured the payload, or has its bytes as they came): a
 * large payload is encoded at most once, and not copied into a string of the whole message either.
 */
export function messageJsonParts(message: Omit<PubSubMessage, 'payload'>, payloadJson: string | Uint8Array): (string | Uint8Array)[] {
  return [`{"id":${JSON.stringify(message.id)},"topic":${JSON.stringify(message.topic)},"payload":`, payloadJson, `,"from":${JSON.stringify(message.from)},"timestamp":${JSON.stringify(message.timestamp)}}`];
}

/** `{"<key>":[<each>,...]}` from values already serialised, copied once into the answer. */
export function objectOfArray(key: string, values: readonly KeptBytes[]): Buffer {
  const head = `{${JSON.stringify(key)}:[`;
  const headBytes = Buffer.byteLength(head);
  let bytes = headBytes + 2 + Math.max(0, values.length - 1);
  for (const v of values) bytes += v.length;
  const out = Buffer.allocUnsafe(bytes);
  let at = out.write(head, 0);
  values.forEach((json, i) => {
    if (i) out[at++] = 0x2c; // ,
    at += json.copy(out, at);
  });
  out[at++] = 0x5d; // ]
  out[at] = 0x7d; // }
  return out;
}
