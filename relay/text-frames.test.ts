import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RawPayload } from './data/raw-json.ts';
import { frameShapeProblem, MAX_FRAME_DEPTH, MAX_FRAME_KEYS, readMemberText } from './text-frames.ts';

const keysOver = (text: string, max: number) => frameShapeProblem(text, max, Infinity) !== null;

const MAX_FRAME = 256 * 1024;
const read = (frame: string) => readMemberText(Buffer.from(frame), MAX_FRAME);
const request = (method: string, params: unknown, id = 7) => JSON.stringify({ type: 'request', id, method, params });

/** `[{"k0_…":0}, …]` of about `bytes`: objects with a key of their own each, the costliest JSON to parse. */
function uniqueKeys(bytes: number): unknown[] {
  const out: Array<Record<string, number>> = [];
  for (let i = 0, n = 2; n < bytes; i++) {
    const key = `k${i.toString(36)}_${i}`;
    out.push({ [key]: 0 });
    n += key.length + 7;
  }
  return out;
}

describe('a member\'s text frame holds at most MAX_FRAME_KEYS object keys outside a publish\'s payload (a frame of objects with keys of their own cost JSON.parse 12–30 ms, from an empty grant)', () => {
  it('keysOver counts the colons outside strings: in a string, escaped quotes included, they are not keys', () => {
    assert.equal(keysOver('{"a":1,"b":{"c":2}}', 2), true);
    assert.equal(keysOver('{"a":1,"b":{"c":2}}', 3), false);
    assert.equal(keysOver(JSON.stringify({ sdp: 'a=rtpmap:96 VP8/90000\r\n'.repeat(1000), q: 'x\\":":"' }), 2), false);
    assert.equal(keysOver('"unterminated: : :', 0), false);
  });

  it('a frame of 256 KiB of objects with keys of their own is refused before it is parsed, under its request id', () => {
    const read1 = read(request('pubsub.subscribe', { topic: 'chat', x: uniqueKeys(250 * 1024) }));
    assert.ok('answer' in read1);
    assert.deepEqual(read1.answer, { type: 'response', id: 7, error: { code: 'INVALID_ARGUMENT', kind: 'Request', message: `a frame holds at most ${MAX_FRAME_KEYS} object keys outside a publish's payload`, reason: 'bad-frame' } });
    // the same junk beside a publish's payload: the rest of the frame is counted
    const beside = read(request('pubsub.publish', { topic: 'chat', payload: 'hi', x: uniqueKeys(200 * 1024) }));
    assert.ok('answer' in beside && beside.answer.type === 'response' && 'error' in beside.answer && beside.answer.error?.reason === 'bad-frame');
  });

  it(`a frame nested more than MAX_FRAME_DEPTH deep is refused before it is parsed (arrays 100,000 deep cost the parse 4–5× plain JSON)`, () => {
    const deep = read(request('pubsub.subscribe', { topic: 'chat', x: JSON.parse(`${'['.repeat(90)}${']'.repeat(90)}`) }).replace('"x":', `"y":"${'z'.repeat(1024)}","x":`));
    assert.ok('answer' in deep && deep.answer.type === 'response' && 'error' in deep.answer && deep.answer.error?.message === `a frame nests at most ${MAX_FRAME_DEPTH} arrays and objects deep`);
    const flood = read(`{"type":"request","id":9,"method":"pubsub.subscribe","params":${'['.repeat(100_000)}`);
    assert.ok('answer' in flood && flood.answer.type === 'response' && 'error' in flood.answer && flood.answer.error?.reason === 'bad-frame');
    // brackets inside strings are text
    assert.equal(frameShapeProblem(JSON.stringify({ s: '['.repeat(500) }), 10, 3), null);
  });

  it('what members send holds: a payload of 5,000 keys (cut out, not counted), a stroke of 4,000 coordinates, 1,000 targets, an SDP full of colons', () => {
    const payload = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`key${i}`, i]));
    const publish = read(request('pubsub.publish', { topic: 'chat', payload, to: Array.from({ length: 1000 }, (_, i) => `member-${i}`) }));
    assert.ok('request' in publish && publish.request.method === 'pubsub.publish');
    assert.ok((publish.request.params as { payload: unknown }).payload instanceof RawPayload);
    const stroke = read(request('whiteboard.draw', { shape: { kind: 'stroke', points: Array.from({ length: 4000 }, (_, i) => i % 9000) } }));
    assert.ok('request' in stroke);
    const sdp = ['v=0', 'o=- 1 1 IN IP4 0.0.0.0', 's=-', 't=0 0', 'm=video 9 UDP/TLS/RTP/SAVPF 96', ...Array.from({ length: 900 }, (_, i) => `a=fmtp:96 x=${i};y=${i}:z`), ''].join('\r\n');
    const answer = read(request('media.answer', { subscriptionId: 's1', sdp }));
    assert.ok('request' in answer);
  });
});
