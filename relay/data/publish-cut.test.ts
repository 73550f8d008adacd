import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { cutPublishPayload } from './publish-cut.ts';
import { MAX_PAYLOAD_DEPTH, nestsWithin } from '../../src/protocol/validate.ts';

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What `JSON.parse` makes of a frame: the publish's payload, or null when the cut must not apply. */
function expected(text: string): { frame: Record<string, unknown>; payload: unknown } | null {
  let frame: unknown;
  try {
    frame = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isRecord(frame) || frame.method !== 'pubsub.publish' || !isRecord(frame.params) || !Object.hasOwn(frame.params, 'payload')) return null;
  if (!nestsWithin(frame.params.payload, MAX_PAYLOAD_DEPTH)) return null;
  // a number that encoding the value again would change (infinite, a negative zero): read the ordinary way
  if (!isDeepStrictEqual(JSON.parse(JSON.stringify(frame)), frame)) return null;
  return { frame, payload: frame.params.payload };
}

/** Whether the text holds a number (outside strings) that encoding its value again would change: infinite, or a negative zero. */
function changesWhenEncoded(text: string): boolean {
  for (const [token] of text.matchAll(/"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g)) {
    if (token.startsWith('"')) continue;
    const value = Number(token);
    if (!Number.isFinite(value) || Object.is(value, -0)) return true;
  }
  return false;
}

/**
 * The cut agrees with `JSON.parse`: the payload's bytes parse to its payload, the rest of the frame to
 * the rest. `JSON.parse` reads the text the bytes decode to, as the relay does: an edit may leave half
 * a surrogate pair in `text`, which UTF-8 cannot carry (ws refuses such a frame; `Buffer.from` writes
 * U+FFFD).
 */
function agrees(spelled: string): 'cut' | 'not cut' {
  const bytes = Buffer.from(spelled);
  const text = bytes.toString('utf8');
  const cut = cutPublishPayload(bytes, MAX_PAYLOAD_DEPTH);
  const want = expected(text);
  if (!cut) {
    // such a number anywhere sends the frame the ordinary way, even in a key's value JSON.parse drops
    if (!changesWhenEncoded(text)) assert.equal(want, null, `not cut, but JSON.parse reads a publish: ${text.slice(0, 200)}`);
    return 'not cut';
  }
  assert.ok(want, `cut, but JSON.parse refuses it or reads no publish: ${text.slice(0, 200)}`);
  assert.deepStrictEqual(JSON.parse(bytes.toString('utf8', cut.start, cut.end)), want.payload);
  const rest = JSON.parse(`${bytes.toString('utf8', 0, cut.start)}0${bytes.toString('utf8', cut.end)}`) as Record<string, unknown>;
  assert.deepStrictEqual(rest, { ...want.frame, params: { ...(want.frame.params as object), payload: 0 } });
  return 'cut';
}

/** A seeded source of choices (fast-check shrinks the seed). */
function chooser(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) % n);
  };
}

const SPACE = [' ', '\t', '\n', '\r'];

/** `value` as JSON spelled any way JSON allows: white space, escapes, number spellings, repeated keys. */
function spell(value: unknown, pick: (n: number) => number): string {
  const ws = () => (pick(3) === 0 ? Array.from({ length: 1 + pick(3) }, () => SPACE[pick(4)]).join('') : '');
  if (typeof value === 'string') return spellString(value, pick);
  if (typeof value === 'number') {
    if (Object.is(value, -0)) return ['-0', '-0.0', '-0e5'][pick(3)]!;
    const plain = JSON.stringify(value);
    if (Number.isInteger(value) && Math.abs(value) < 1e15) return [plain, `${plain}.0`, `${plain}e0`, `${plain}E+0`, `${plain}0e-1`][pick(5)]!;
    return plain;
  }
  if (Array.isArray(value)) return `[${ws()}${value.map((v) => `${spell(v, pick)}${ws()}`).join(`,${ws()}`)}]`;
  if (isRecord(value)) {
    const entries = Object.entries(value);
    // a key said twice: JSON.parse keeps the last, so an earlier one may hold anything
    if (entries.length > 0 && pick(4) === 0) entries.unshift([entries[pick(entries.length)]![0], ['decoy', 1, null, { payload: 'x' }][pick(4)]]);
    return `{${ws()}${entries.map(([k, v]) => `${spellString(k, pick)}${ws()}:${ws()}${spell(v, pick)}${ws()}`).join(`,${ws()}`)}}`;
  }
  return JSON.stringify(value);
}

function spellString(s: string, pick: (n: number) => number): string {
  let out = '"';
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    const escape = (c: number) => `\\u${c.toString(16).padStart(4, '0')}`;
    const u = (c: number) => (pick(2) ? escape(c) : escape(c).toUpperCase().replace('\\U', '\\u'));
    if (ch === '"' || ch === '\\' || code < 0x20) out += pick(2) ? JSON.stringify(ch).slice(1, -1) : u(code);
    else if (ch === '/' && pick(2)) out += '\\/';
    else if (pick(4) === 0) out += code > 0xffff ? u(0xd800 + ((code - 0x10000) >> 10)) + u(0xdc00 + ((code - 0x10000) & 0x3ff)) : u(code);
    else out += ch;
  }
  return `${out}"`;
}

const frameFields = fc.record({
  payload: fc.jsonValue({ maxDepth: 6 }),
  topic: fc.string({ maxLength: 20 }),
  id: fc.nat(),
  persist: fc.boolean(),
  extra: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
  seed: fc.integer(),
});

function frameOf({ payload, topic, id, persist, extra }: { payload: unknown; topic: string; id: number; persist: boolean; extra: Record<string, unknown> }): Record<string, unknown> {
  return { ...extra, type: 'request', id, method: 'pubsub.publish', params: { ...extra, topic, payload, persist } };
}

describe('a publish frame\'s payload cut out of its bytes', () => {
  it('the SDK\'s frames: the payload is cut, and its bytes are exactly the payload\'s JSON', () => {
    fc.assert(
      fc.property(frameFields, (f) => {
        const frame = frameOf(f);
        const bytes = Buffer.from(JSON.stringify(frame));
        const cut = cutPublishPayload(bytes, MAX_PAYLOAD_DEPTH);
        assert.ok(cut, 'cut');
        assert.equal(bytes.toString('utf8', cut.start, cut.end), JSON.stringify(f.payload));
        assert.equal(agrees(bytes.toString()), 'cut');
      }),
      { numRuns: 1000 },
    );
  });

  it('frames spelled any way JSON allows (white space, escapes, number spellings, repeated keys): the cut reads what JSON.parse reads', () => {
    let cuts = 0;
    fc.assert(
      fc.property(frameFields, fc.constantFrom('pubsub.publish', 'pubsub.subscribe', 'whiteboard.draw'), (f, method) => {
        const pick = chooser(f.seed);
        const text = spell({ ...frameOf(f), method }, pick);
        if (agrees(text) === 'cut') cuts++;
      }),
      { numRuns: 2000 },
    );
    assert.ok(cuts > 500, `${cuts} of 2,000 spelled frames cut`);
  });

  it('frames with bytes changed, added or taken away: never cut where JSON.parse refuses the frame', () => {
    const alphabet = '{}[]",:\\ \t\n01-+.eEtrufalsn/ux"'.split('');
    fc.assert(
      fc.property(frameFields, fc.array(fc.tuple(fc.nat(), fc.nat({ max: 2 }), fc.constantFrom(...alphabet, '\u0001', '\u00e9', '\u{1f600}')), { minLength: 1, maxLength: 4 }), (f, edits) => {
        let text = spell(frameOf(f), chooser(f.seed));
        for (const [at, op, ch] of edits) {
          const i = at % (text.length + 1);
          text = op === 0 ? text.slice(0, i) + ch + text.slice(i) : op === 1 ? text.slice(0, i) + text.slice(i + 1) : text.slice(0, i) + ch + text.slice(i + 1);
        }
        agrees(text);
      }),
      { numRuns: 5000 },
    );
  });

  it('long strings (read natively and a word at a time): a quote, an escape, a control character or a multibyte character at any place and alignment is read as JSON.parse reads it', () => {
    // the frame's bytes at every offset into a larger buffer: the word reads start where the buffer's memory is aligned
    const at = (text: string, offset: number) => {
      const bytes = Buffer.from(text);
      const room = Buffer.alloc(bytes.length + 16, 0x41);
      bytes.copy(room, offset);
      return room.subarray(offset, offset + bytes.length);
    };
    const pieces = ['\u0001', '\u001f', '\\"', '\\\\', '\\n', '\\u00e9', '\\u12g4', '\\x', '"', '\u00e9', '\u{1f600}', '\u007f', ' '];
    let cuts = 0;
    let refusals = 0;
    for (const length of [63, 64, 65, 70, 71, 72, 100, 129]) {
      for (let place = 0; place <= length; place += place < 80 ? 1 : 7) {
        for (const piece of pieces) {
          const body = 'a'.repeat(place) + piece + 'b'.repeat(length - place);
          // long strings before and after it: each one's backslash search starts where the last left off
          const text = `{"type":"request","id":1,"method":"pubsub.publish","params":{"topic":"${'t'.repeat(70)}","payload":["${body}","${'c'.repeat(90)}\\nd"]}}`;
          const want = expected(text);
          for (const offset of [0, 1, 2, 3, 5]) {
            const bytes = at(text, offset);
            const cut = cutPublishPayload(bytes, MAX_PAYLOAD_DEPTH);
            if (!want) {
              assert.equal(cut, null, `${JSON.stringify(piece)} at ${place} of ${length}, offset ${offset}`);
              refusals++;
              continue;
            }
            assert.ok(cut, `${JSON.stringify(piece)} at ${place} of ${length}, offset ${offset}: not cut`);
            assert.deepStrictEqual(JSON.parse(bytes.toString('utf8', cut.start, cut.end)), want.payload);
            cuts++;
          }
        }
      }
    }
    assert.ok(cuts > 1000 && refusals > 1000, `${cuts} cut, ${refusals} refused`);
    // a frame after one without a backslash: where the first has none is not taken for the second
    const first = Buffer.from(`{"method":"pubsub.publish","params":{"payload":"${'a'.repeat(400)}"}}`);
    assert.ok(cutPublishPayload(first, MAX_PAYLOAD_DEPTH));
    const second = Buffer.from(`{"method":"pubsub.publish","params":{"payload":"${'a'.repeat(100)}\\x${'a'.repeat(100)}"}}`);
    assert.equal(cutPublishPayload(second, MAX_PAYLOAD_DEPTH), null);
  });

  it('a frame of the largest size dense with escapes is cut in linear time: within a small multiple of JSON.parse of the same frame (each escape once searched the rest of the frame: 108 ms a frame)', () => {
    const frame = (body: string) => Buffer.from(`{"type":"request","id":1,"method":"pubsub.publish","params":{"topic":"t","payload":"${body}"}}`);
    const median = (run: () => void) => {
      const times: number[] = [];
      for (let k = 0; k < 7; k++) {
        const t0 = performance.now();
        run();
        times.push(performance.now() - t0);
      }
      return times.sort((x, y) => x - y)[3]!;
    };
    for (const body of ['a'.repeat(64) + '\\n'.repeat(120_000), ('a'.repeat(64) + '\\n').repeat(3600), ('a'.repeat(64) + '\\u00e9').repeat(3000)]) {
      const bytes = frame(body);
      assert.ok(cutPublishPayload(bytes, MAX_PAYLOAD_DEPTH), 'cut');
      const text = bytes.toString();
      const parse = median(() => JSON.parse(text));
      const cut = median(() => cutPublishPayload(bytes, MAX_PAYLOAD_DEPTH));
      // linear, it is about JSON.parse's time; quadratic, hundreds of times it
      assert.ok(cut < 20 * parse + 1, `cut ${cut.toFixed(2)} ms against JSON.parse ${parse.toFixed(2)} ms for ${bytes.length} bytes`);
    }
  });

  it('keys spelled with escapes are the keys they spell; a repeated method or params is the last one', () => {
    assert.equal(agrees('{"type":"request","id":1,"me\\u0074hod":"pubsub.publish","par\\u0061ms":{"topic":"t","p\\u0061yload":[1]}}'), 'cut');
    assert.equal(agrees('{"type":"request","id":1,"method":"pubsub.publis\\u0068","params":{"topic":"t","payload":[1]}}'), 'cut');
    assert.equal(agrees('{"method":"pubsub.publish","method":"room.end","params":{"payload":1}}'), 'not cut');
    assert.equal(agrees('{"method":"room.end","method":"pubsub.publish","params":{"payload":1}}'), 'cut');
    assert.equal(agrees('{"method":"pubsub.publish","params":{"payload":1},"params":{"topic":"t"}}'), 'not cut');
    assert.equal(agrees('{"method":"pubsub.publish","params":{"payload":1},"params":{"payload":[2]}}'), 'cut');
    assert.equal(agrees('{"method":"pubsub.publish","params":{"payload":1,"payload":{"a":2}}}'), 'cut');
    assert.equal(agrees('{"method":"pubsub.publish","params":{"x":{"payload":1}}}'), 'not cut');
    // escaped spellings one character short or long of a key, or of the method, are other keys
    assert.equal(agrees('{"method":"pubsub.publish","params":{"p\u0061yloa":1}}'), 'not cut');
    assert.equal(agrees('{"method":"pubsub.publish","params":{"p\u0061yloadd":1}}'), 'not cut');
    assert.equal(agrees('{"method":"pubsub.publish","p\u0061ram":{"payload":1}}'), 'not cut');
    assert.equal(agrees('{"method":"pubsub.publis\u0068\u0068","params":{"payload":1}}'), 'not cut');
    assert.equal(agrees('{"\u006d\u0065\u0074\u0068\u006F\u0064":"\u0070ubsub.publish","params":{"payload":1}}'), 'cut');
    assert.equal(agrees('{"method":"pubsub.publish","params":[{"payload":1}]}'), 'not cut');
    assert.equal(agrees('{"method":"pubsub.publish","x":{"params":{"payload":1}}}'), 'not cut');
  });

  it('a payload nested as deep as the limit is cut; one level deeper is left to the ordinary read (which refuses it)', () => {
    const nested = (depth: number) => `{"method":"pubsub.publish","params":{"payload":${'['.repeat(depth)}${']'.repeat(depth)}}}`;
    assert.equal(agrees(nested(MAX_PAYLOAD_DEPTH)), 'cut');
    assert.equal(agrees(nested(MAX_PAYLOAD_DEPTH + 1)), 'not cut');
    assert.equal(cutPublishPayload(Buffer.from(nested(100_000)), MAX_PAYLOAD_DEPTH), null);
  });

  it('what JSON forbids is not cut: control characters, bad escapes, bad numbers, trailing commas, a byte order mark, trailing bytes', () => {
    for (const payload of ['"a\u0001b"', '"\\x41"', '"\\u12g4"', '01', '1.', '.5', '-', '1e', '+1', '[1,]', '{"a":1,}', 'tru', 'nul', 'NaN', 'Infinity', "'a'", '"a', '[1 2]', '{"a" 1}', '{1:2}']) {
      const text = `{"method":"pubsub.publish","params":{"payload":${payload}}}`;
      assert.equal(cutPublishPayload(Buffer.from(text), MAX_PAYLOAD_DEPTH), null, payload);
      assert.equal(agrees(text), 'not cut');
    }
    assert.equal(agrees('\ufeff{"method":"pubsub.publish","params":{"payload":1}}'), 'not cut');
    // numbers whose value encoding again would change (JSON.stringify writes null and 0): read the
    // ordinary way, so that a receiver gets what it would get for a small payload
    for (const n of ['1e400', '-1e400', `1${'0'.repeat(310)}`, '-0', '-0.0', '-0e7', '-1e-400', '-0.0000e-5', '-0.0e999', '1e+000400', `0.${'0'.repeat(400)}1e-10`.replace('0.', '-0.')]) {
      const text = `{"method":"pubsub.publish","params":{"payload":[1,${n}]}}`;
      assert.equal(cutPublishPayload(Buffer.from(text), MAX_PAYLOAD_DEPTH), null, n);
      assert.equal(agrees(text), 'not cut', n);
    }
    for (const n of ['1e300', '-1.5e-3', '0e5', '0.0', '-1E+2', '1e-400', `1${'0'.repeat(290)}`, '0e999', '1e-0099', '-9.9e+99', `-0.${'0'.repeat(190)}1e-99`]) {
      assert.equal(agrees(`{"method":"pubsub.publish","params":{"payload":[1,${n}]}}`), 'cut', n);
    }
    assert.equal(agrees('{"method":"pubsub.publish","params":{"payload":1}} x'), 'not cut');
    assert.equal(agrees(' \n{"method":"pubsub.publish","params":{"payload":1}}\t '), 'cut');
  });
});
