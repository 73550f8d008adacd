/**
 * JSON the relay keeps as bytes. An event frame is written once as `{...,"data":<value>}`; the
 * value's bytes are a view into that frame, so what fans out and what is kept share memory, and
 * an answer listing kept values is spliced from those bytes, never parsed or encoded again.
 */
import type { PubSubMessage } from '../../src/protocol/messages.ts';
import type { KeptBytes } from './byte-arena.ts';

/** An event frame carrying `value`, and the bytes of `value` inside it. */
export function eventFrame(name: string, value: unknown): { frame: Buffer; json: Buffer } {
  return eventFrameOfJson(name, JSON.stringify(value));
}

/**
 * The same, for a value already serialised: `json` is the JSON text of one value, or that text in
 * pieces. The pieces are written into the frame where they are: joined first, a 64 KiB payload
 * would be copied once more into a string of its own, only to be copied into the frame.
 */
export function eventFrameOfJson(name: string, json: string | readonly string[]): { frame: Buffer; json: Buffer } {
  const head = `{"type":"event","name":${JSON.stringify(name)},"data":`;
  const parts = typeof json === 'string' ? [json] : json;
  const headBytes = Buffer.byteLength(head);
  let bytes = headBytes + 1;
  for (const part of parts) bytes += Buffer.byteLength(part);
  const frame = Buffer.allocUnsafe(bytes);
  let at = frame.write(head, 0);
  for (const part of parts) at += frame.write(part, at);
  frame[at] = 0x7d; // the closing brace
  return { frame, json: frame.subarray(headBytes, bytes - 1) };
}

/**
 * A pubsub message as JSON — exactly `JSON.stringify(message)`, in pieces — around its payload's
 * JSON, which the relay already has (it measured the payload): a large payload is encoded once,
 * not twice, and not copied into a string of the whole message either.
 */
export function messageJsonParts(message: PubSubMessage, payloadJson: string): string[] {
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
