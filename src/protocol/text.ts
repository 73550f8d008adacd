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
