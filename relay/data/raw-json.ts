/**
 * JSON the relay keeps as bytes. An event frame is written once as `{...,"data":<value>}`; the
 * value's bytes are a view into that frame, so what fans out and what is kept share memory, and
 * an answer listing kept values is spliced from those bytes, never parsed or encoded again.
 */

/** An event frame carrying `value`, and the bytes of `value` inside it. */
export function eventFrame(name: string, value: unknown): { frame: Buffer; json: Buffer } {
  const head = `{"type":"event","name":${JSON.stringify(name)},"data":`;
  const frame = Buffer.from(`${head}${JSON.stringify(value)}}`);
  return { frame, json: frame.subarray(Buffer.byteLength(head), frame.length - 1) };
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
