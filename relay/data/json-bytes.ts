/**
 * The UTF-8 length of `JSON.stringify(s)`, without building it: what a string costs on the wire.
 * A control character or a lone surrogate is six bytes (`\u001f`), a character outside ASCII two
 * to four: a budget that counts `s.length` undercounts an id of control characters sixfold.
 */
export function jsonStringBytes(s: string): number {
  let n = 2;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20) n += c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6;
    else if (c === 0x22 || c === 0x5c) n += 2;
    else if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c < 0xd800 || c > 0xdfff) n += 3;
    else if (c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 6;
  }
  return n;
}
