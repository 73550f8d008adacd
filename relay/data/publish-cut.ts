/**
 * A publish frame's payload found in the frame's bytes and checked there, never decoded. Read the
 * ordinary way, a 64 KiB payload became four copies on the relay's heap: the frame decoded into a
 * string, the payload parsed out of it, its nesting walked, and the payload encoded again to be
 * framed. Under the hostile benchmark's floods those copies were half of what the relay allocated.
 * Cut out of the frame instead, the payload's bytes are checked as strictly as `JSON.parse` checks
 * them and go out as they came; the rest of the frame (topic, targets, id) is small and is parsed
 * the ordinary way.
 */

/** Where a publish frame's payload lies in the frame: bytes `start` to `end`. */
export interface PayloadCut {
  readonly start: number;
  readonly end: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const MINUS = 0x2d;

/** Containers nested deeper than this (the payload's limit is far below) send a frame the ordinary way. */
const MAX_NESTING = 128;
/** Whether each open container is an object (1) or an array (0). Reused: a scan never re-enters. */
const isObject = new Uint8Array(MAX_NESTING + 1);

const KEY_OTHER = 0;
const KEY_METHOD = 1;
const KEY_PARAMS = 2;
const KEY_PAYLOAD = 3;

const METHOD = Buffer.from('"method"');
const PARAMS = Buffer.from('"params"');
const PAYLOAD = Buffer.from('"payload"');
const PUBLISH = Buffer.from('"pubsub.publish"');
/** The longest spelling, all escapes, of any string compared here (`"pubsub.publish"`). */
const LONGEST_SPELLING = 2 + 14 * 6;

const isDigit = (c: number | undefined): boolean => c !== undefined && c >= 0x30 && c <= 0x39;
const isHex = (c: number | undefined): boolean => c !== undefined && ((c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66));
const isSpace = (c: number | undefined): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function skipSpace(b: Buffer, i: number): number {
  while (isSpace(b[i])) i++;
  return i;
}

/** A string's bytes are scanned natively past this many (the calls cost more than a short string's loop). */
const FAST_FROM = 64;
/** 0x80808080 and 0x20202020 as the int32 values V8 keeps in registers (a larger constant is a double). */
const HIGHS = 0x80808080 | 0;
const SPACES = 0x20202020;

/**
 * Where the scan of the frame being cut (reset for each) found the next backslash and the next
 * quote (the frame's length: none), each found natively once per stretch and kept until the scan
 * passes it: searched again at every ask, a frame of one long string of escapes was searched to its
 * end once per escape (quadratic: a 240 KB frame held the event loop 108 ms, a review found), and
 * a frame of many long strings without a backslash once per string. So each byte is searched once.
 */
let backslashAt = -1;
let quoteAt = -1;
/** The frame's bytes as 32-bit words from its first aligned byte (`wordsFrom`), made once a frame when first needed (a view per long string cost more than its loop). */
let words: Int32Array | null = null;
let wordsFrom = 0;

/**
 * The first index from `i` (at most `n`, the frame's length) whose byte ends or escapes a string,
 * or that JSON forbids in one (a quote, a backslash, a control character). A 64 KiB payload read a
 * byte at a time cost 70 µs, a third of what a large publish cost the relay; this reads it in 10.
 * Quotes and backslashes are found natively; control characters two 32-bit words at a time
 * (`(x - 0x20202020) & ~x & 0x80808080` is nonzero exactly when a byte of x is below 0x20), and the
 * words that hold one are read again byte by byte.
 */
function plainUntil(b: Buffer, i: number, n: number): number {
  if (backslashAt < i) {
    const at = b.indexOf(BACKSLASH, i);
    backslashAt = at < 0 ? n : at;
  }
  if (quoteAt < i) {
    const q = b.indexOf(QUOTE, i);
    quoteAt = q < 0 ? n : q;
  }
  const end = Math.min(quoteAt, backslashAt);
  while (i < end && ((b.byteOffset + i) & 3) !== 0) {
    if (b[i]! < 0x20) return i;
    i++;
  }
  const pairs = (end - i) >> 3;
  if (pairs > 0) {
    if (!words) {
      wordsFrom = (4 - (b.byteOffset & 3)) & 3;
      words = new Int32Array(b.buffer, b.byteOffset + wordsFrom, (n - wordsFrom) >> 2);
    }
    const from = (i - wordsFrom) >> 2;
    const until = from + pairs * 2;
    let k = from;
    for (; k < until; k += 2) {
      const x = words[k]! | 0;
      const y = words[k + 1]! | 0;
      if (((((x - SPACES) | 0) & ~x) | (((y - SPACES) | 0) & ~y)) & HIGHS) break;
    }
    i += 4 * (k - from);
  }
  while (i < end && b[i]! >= 0x20) i++;
  return i;
}

/**
 * The end of the string starting at `i` (its opening quote), or -1 where JSON forbids it. Its
 * first {@link FAST_FROM} bytes, and as many after each escape, are read a byte at a time: a
 * string dense with escapes never pays for a native call per escape.
 */
function stringEnd(b: Buffer, i: number): number {
  const n = b.length;
  let plainFrom = i + FAST_FROM;
  for (i++; i < n; ) {
    if (i >= plainFrom) i = plainUntil(b, i, n);
    if (i >= n) break;
    const c = b[i]!;
    if (c === QUOTE) return i + 1;
    if (c === BACKSLASH) {
      const e = b[i + 1];
      if (e === 0x75) {
        if (!(isHex(b[i + 2]) && isHex(b[i + 3]) && isHex(b[i + 4]) && isHex(b[i + 5]))) return -1;
        i += 6;
        plainFrom = i + FAST_FROM;
      } else if (e === QUOTE || e === BACKSLASH || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) {
        i += 2;
        plainFrom = i + FAST_FROM;
      } else return -1;
    } else if (c < 0x20) return -1;
    else i++;
  }
  return -1;
}

/**
 * The end of the number starting at `i`, or -1 where JSON forbids it, and also where encoding
 * its value again would change it for a receiver (too large for a double: `JSON.stringify`
 * writes null; a negative zero: it writes 0): such a frame is read the ordinary way, so that a
 * receiver gets the same value whichever way its payload was read.
 */
function numberEnd(b: Buffer, i: number): number {
  const start = i;
  const negative = b[i] === MINUS;
  if (negative) i++;
  let nonzero = false;
  if (b[i] === 0x30) i++;
  else if (isDigit(b[i])) {
    nonzero = true;
    while (isDigit(b[i])) i++;
  } else return -1;
  if (b[i] === 0x2e) {
    i++;
    if (!isDigit(b[i])) return -1;
    for (; isDigit(b[i]); i++) if (b[i] !== 0x30) nonzero = true;
  }
  let exponentDigits = 0;
  if (b[i] === 0x65 || b[i] === 0x45) {
    i++;
    if (b[i] === 0x2b || b[i] === MINUS) i++;
    if (!isDigit(b[i])) return -1;
    while (b[i] === 0x30) i++;
    for (; isDigit(b[i]); i++) exponentDigits++;
  }
  // a nonzero mantissa of at most 200 characters times at most 10^±99 lies between 1e-299 and
  // 1e299: finite, and not zero. Only the rest are read as a value (a hostile frame of numbers
  // must not cost a string each)
  if ((negative && !nonzero) || i - start > 200 || exponentDigits > 2) {
    const value = Number(b.toString('latin1', start, i));
    if (!Number.isFinite(value) || Object.is(value, -0)) return -1;
  }
  return i;
}

function literalEnd(b: Buffer, i: number, word: string): number {
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word.charCodeAt(k)) return -1;
  return i + word.length;
}

const hexValue = (c: number): number => (c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x57);

/**
 * Whether the string `b[start, end)` (quotes included, its escapes checked) is `spelled` (quotes
 * included, ASCII), however it is escaped: read through its escapes, nothing allocated (a frame
 * of many escaped keys must cost no more than its bytes).
 */
function stringIs(b: Buffer, start: number, end: number, spelled: Buffer): boolean {
  const length = end - start;
  if (length === spelled.length && b.compare(spelled, 0, length, start, end) === 0) return true;
  if (length < spelled.length || length > LONGEST_SPELLING) return false;
  const last = spelled.length - 1;
  let j = 1;
  for (let k = start + 1; k < end - 1; j++) {
    if (j === last) return false;
    let c = b[k]!;
    if (c === BACKSLASH) {
      const e = b[k + 1]!;
      if (e === 0x75) {
        c = (hexValue(b[k + 2]!) << 12) | (hexValue(b[k + 3]!) << 8) | (hexValue(b[k + 4]!) << 4) | hexValue(b[k + 5]!);
        k += 6;
      } else {
        c = e === 0x62 ? 8 : e === 0x66 ? 12 : e === 0x6e ? 10 : e === 0x72 ? 13 : e === 0x74 ? 9 : e;
        k += 2;
      }
    } else k++;
    if (c !== spelled[j]) return false;
  }
  return j === last;
}

/**
 * Scan `frame` (one text frame, its UTF-8 checked by ws) as one JSON text, as `JSON.parse` reads
 * it. When it is an object whose `method` is `"pubsub.publish"` and whose `params` is an object
 * with a `payload` (the last of each key where one is repeated, as `JSON.parse` keeps the last),
 * nested at most `maxDepth` arrays and objects deep, the answer is where that payload lies. Null
 * for anything else, a frame JSON forbids included: that frame is read the ordinary way, which
 * also says what is wrong with it.
 */
export function cutPublishPayload(frame: Buffer, maxDepth: number): PayloadCut | null {
  backslashAt = -1;
  quoteAt = -1;
  words = null;
  const b = frame;
  const n = b.length;
  let i = skipSpace(b, 0);
  if (b[i] !== OPEN_OBJECT) return null;
  let depth = 0;
  /** The key whose value is being read in the frame's object, and in its params. */
  let topKey = KEY_OTHER;
  let paramsKey = KEY_OTHER;
  /** Whether the open container at depth 2 is the current params object. */
  let inParams = false;
  let publish = false;
  let valueStart = -1;
  let payloadStart = -1;
  let cutStart = -1;
  let cutEnd = -1;
  // `expect` is what comes next: 0 a value, 1 a key, 2 what follows a value
  let expect = 0;
  for (;;) {
    if (expect === 0) {
      i = skipSpace(b, i);
      const c = b[i];
      if (depth === 1) valueStart = i;
      if (depth === 2 && inParams && paramsKey === KEY_PAYLOAD) payloadStart = i;
      if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
        if (depth === MAX_NESTING || (payloadStart >= 0 && depth - 1 > maxDepth)) return null;
        if (depth === 1) inParams = topKey === KEY_PARAMS && c === OPEN_OBJECT;
        isObject[++depth] = c === OPEN_OBJECT ? 1 : 0;
        i = skipSpace(b, i + 1);
        if (b[i] === (c === OPEN_OBJECT ? CLOSE_OBJECT : CLOSE_ARRAY)) {
          i++;
          if (depth-- === 2) inParams = false;
          expect = 2;
        } else expect = c === OPEN_OBJECT ? 1 : 0;
        continue;
      }
      if (c === QUOTE) i = stringEnd(b, i);
      else if (c === MINUS || isDigit(c)) i = numberEnd(b, i);
      else if (c === 0x74) i = literalEnd(b, i, 'true');
      else if (c === 0x66) i = literalEnd(b, i, 'false');
      else if (c === 0x6e) i = literalEnd(b, i, 'null');
      else return null;
      if (i < 0) return null;
      expect = 2;
    } else if (expect === 1) {
      i = skipSpace(b, i);
      if (b[i] !== QUOTE) return null;
      const end = stringEnd(b, i);
      if (end < 0) return null;
      if (depth === 1) {
        topKey = stringIs(b, i, end, METHOD) ? KEY_METHOD : stringIs(b, i, end, PARAMS) ? KEY_PARAMS : KEY_OTHER;
        // a later params replaces an earlier one, payload and all
        if (topKey === KEY_PARAMS) cutStart = cutEnd = -1;
      } else if (depth === 2 && inParams) paramsKey = stringIs(b, i, end, PAYLOAD) ? KEY_PAYLOAD : KEY_OTHER;
      i = skipSpace(b, end);
      if (b[i] !== COLON) return null;
      i++;
      expect = 0;
    } else {
      // a value ended at `i`, in the container at `depth`
      if (depth === 1 && topKey === KEY_METHOD) publish = b[valueStart] === QUOTE && stringIs(b, valueStart, i, PUBLISH);
      if (depth === 2 && payloadStart >= 0) {
        cutStart = payloadStart;
        cutEnd = i;
        payloadStart = -1;
      }
      i = skipSpace(b, i);
      if (depth === 0) return i === n && publish && cutStart >= 0 ? { start: cutStart, end: cutEnd } : null;
      const c = b[i];
      if (c === COMMA) {
        i++;
        expect = isObject[depth] ? 1 : 0;
      } else if (c === (isObject[depth] ? CLOSE_OBJECT : CLOSE_ARRAY)) {
        i++;
        if (depth-- === 2) inParams = false;
      } else return null;
    }
  }
}
