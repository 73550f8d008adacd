/**
 * JSON the relay keeps as bytes. An event frame is written once as `{...,"data":<value>}`; the
 * value's bytes are a view into that frame, so what fans out and what is kept share memory, and
 * an answer listing kept values is spliced from those bytes, never parsed or encoded again.
 */
import type { PubSubMessage } from '../../src/protocol/messages.ts';

/** An event frame carrying `value`, and the bytes of `value` inside it. */
export function eventFrame(name: string, value: unknown): { frame: Buffer; json: Buffer } {
  return eventFrameOfJson(name, JSON.stringify(value));
}

/** The same, for a value already serialised (`json` must be the JSON text of one value). */
export function eventFrameOfJson(name: string, json: string): { frame: Buffer; json: Buffer } {
  const head = `{"type":"event","name":${JSON.stringify(name)},"data":`;
  const frame = Buffer.from(`${head}${json}}`);
  return { frame, json: frame.subarray(Buffer.byteLength(head), frame.length - 1) };
}

/**
 * A pubsub message as JSON — exactly `JSON.stringify(message)` — around its payload's JSON, which
 * the relay already has (it measured the payload): a large payload is encoded once, not twice.
 */
export function messageJson(message: PubSubMessage, payloadJson: string): string {
  return `{"id":${JSON.stringify(message.id)},"topic":${JSON.stringify(message.topic)},"payload":${payloadJson},"from":${JSON.stringify(message.from)},"timestamp":${JSON.stringify(message.timestamp)}}`;
}

const COMMA = Buffer.from(',');
const CLOSE = Buffer.from(']}');

/** `{"<key>":[<each>,...]}` from values already serialised. */
export function objectOfArray(key: string, values: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`{${JSON.stringify(key)}:[`)];
  values.forEach((json, i) => parts.push(...(i ? [COMMA, json] : [json])));
  parts.push(CLOSE);
  return Buffer.concat(parts);
}
