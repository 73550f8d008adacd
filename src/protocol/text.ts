/** Identifiers (room and participant ids) are bounded, non-empty strings: at most this many characters. */
export const MAX_ID_LENGTH = 128;

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
 * Characters a display name may not hold: C0 controls (U+0000–U+001F), DEL and C1 controls
 * (U+007F–U+009F), the line and paragraph separators (U+2028, U+2029), and the bidi embedding,
 * override and isolate controls (U+202A–U+202E, U+2066–U+2069). A name is shown in rosters,
 * moderation dashboards and logs: a newline or an escape sequence forges lines of a terminal, an
 * override makes `evil\u202Enimda` read `evil` + `admin` backwards. The marks and joiners that
 * scripts and emoji need (U+200C, U+200D, U+200E, U+200F) are allowed.
 */
const NAME_CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

/**
 * Characters an id may not hold: those of a name, and the invisible and blank ones besides, with
 * which two ids that differ look the same (`ada` and `a\u200Bda`, `bob` and `bob\u2060`, a member
 * and `server-api\u00AD`): every default-ignorable code point (zero-width characters, joiners and
 * direction marks, the soft hyphen, word joiner, invisible operators, Hangul fillers, tag
 * characters, …), every format character (U+061C, U+FEFF, …), private-use, unassigned and
 * noncharacter code points (a font may draw them as nothing), blanks that are not spaces (U+2800,
 * U+FFFC, U+1D159, U+16FE4), and every space but U+0020, which may not start or end an id, come
 * twice in a row or carry a combining mark. A variation selector (U+FE0F) may follow an emoji or a
 * keycap's base.
 */
const ID_REFUSED =
  /[\u0000-\u001f\u007f-\u009f\u00a0\u1680\u2000-\u200f\u2028-\u202f\u205f\u2066-\u2069\u2800\u3000\ufffc\u{1d159}\u{16fe4}\p{Default_Ignorable_Code_Point}\p{Cf}\p{Co}\p{Cn}]/gu;
/** What U+FE0F may follow: an emoji, or a keycap's base. */
const EMOJI_BASE = /[\p{Extended_Pictographic}0-9#*]$/u;
/** A space carrying a combining mark (it reads as the mark alone). */
const MARKED_SPACE = / \p{M}/u;
/** Printable ASCII only: none of the characters above can be there, only the spaces' rules apply. */
const NOT_PRINTABLE_ASCII = /[^\x20-\x7e]/;

/** What the id and name checks refuse, for messages and docs. */
export const ID_CONTROL_RANGES =
  'controls U+0000–U+001F and U+007F–U+009F, spaces but U+0020 (which may not start or end an id, come twice in a row or carry a mark), separators U+2028, U+2029, bidi controls, blanks U+2800, U+FFFC, U+1D159, U+16FE4, private-use, unassigned and noncharacter code points, and every default-ignorable or format character (U+00AD, U+034F, U+061C, U+115F, U+1160, U+180B–U+180F, U+200B–U+200F, U+2060–U+206F, U+3164, U+FE00–U+FE0F but U+FE0F after an emoji, U+FEFF, U+FFA0, U+E0000–U+E0FFF, …)';
export const NAME_CONTROL_RANGES = 'U+0000–U+001F, U+007F–U+009F, U+2028, U+2029, U+202A–U+202E, U+2066–U+2069';

/** `value` with each character a display name may not hold replaced by `_` (a file's own name, which the user did not type for Tessera). */
export function cleanName(value: string): string {
  return value.replace(new RegExp(NAME_CONTROL.source, 'g'), '_');
}

function first(pattern: RegExp, value: string): string | null {
  const found = pattern.exec(value);
  return found ? codePoint(found[0]) : null;
}

const codePoint = (c: string) => `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

/** The first character of `value` an id may not hold, as its code point (`U+202E`), or `null` when there is none. */
export function idControl(value: string): string | null {
  if (value.startsWith(' ') || value.endsWith(' ') || value.includes('  ')) return 'U+0020';
  // every id of every frame comes here (a `to` of 1,000): one class, and nothing for plain ASCII
  // (alternatives of property classes and a lookbehind at each character took 3.7 ms for 1,000
  // ids of 128 characters in other scripts, 15 times this)
  if (!NOT_PRINTABLE_ASCII.test(value)) return null;
  if (MARKED_SPACE.test(value)) return 'U+0020';
  ID_REFUSED.lastIndex = 0;
  for (let found = ID_REFUSED.exec(value); found; found = ID_REFUSED.exec(value)) {
    if (found[0] !== '\ufe0f' || !EMOJI_BASE.test(value.slice(0, found.index))) return codePoint(found[0]);
  }
  return null;
}

/** The first character of `value` a display name may not hold, as its code point (`U+202E`), or `null` when there is none. */
export function nameControl(value: string): string | null {
  return first(NAME_CONTROL, value);
}
