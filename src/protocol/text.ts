/** A surrogate code unit without its other half: such a string has no UTF-8 form. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * True when `value` can be written as UTF-8 and read back as itself. An id is a key in Redis,
 * in file names and in other nodes' maps: one with a lone surrogate would come back as another
 * id (U+FFFD), or not be encodable at all.
 */
export function isWellFormed(value: string): boolean {
  return !LONE_SURROGATE.test(value);
}

/**
 * Characters an id may not hold: C0 controls (U+0000–U+001F), DEL and C1 controls
 * (U+007F–U+009F), and the bidi embedding, override and isolate controls (U+202A–U+202E,
 * U+2066–U+2069). An id is shown in rosters, moderation dashboards and logs: a newline or an
 * escape sequence forges lines of a terminal, an override makes `evil\u202Enimda` read `evil` +
 * `admin` backwards.
 */
const ID_CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

/** The first character of `value` an id may not hold, as `U+XXXX`, or `null` when there is none. */
export function idControl(value: string): string | null {
  const found = ID_CONTROL.exec(value);
  return found ? `U+${found[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}` : null;
}
