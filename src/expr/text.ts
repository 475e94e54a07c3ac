/**
 * The expression text as bytes: one byte per UTF-16 code unit, the unit itself when it is
 * ASCII and NON_ASCII (0x80) otherwise, followed by a 0. Everything the grammar gives a meaning
 * to is ASCII, so the lexer and the literal parsers scan this array and go back to the string
 * only to slice out what the AST keeps and to read the non-ASCII text inside strings. Offsets
 * are the same in both, so positions in messages stay UTF-16 offsets.
 *
 * Why not charCodeAt: V8 reads a char of a string whose representation it does not know (flat,
 * cons, sliced, thin) through a dispatch on that representation, on every call, inside every
 * loop. A scan of a typed array measured 2–3× faster than the same scan by charCodeAt (and
 * texts built by concatenation, cons strings, were slower still by charCodeAt). The bytes are
 * written by TextEncoder.encodeInto in native code, which is exact for ASCII text, the common
 * case; any other text is converted by a loop.
 */

/** Stands for any non-ASCII code unit: no character class includes it. */
export const NON_ASCII = 0x80

const encoder = new TextEncoder()

/**
 * The longest text the lexer reads: Cloudflare's limit on a rule expression ("The maximum
 * length of a rule expression is 4,096 characters"), which check.ts enforces before lexing.
 */
export const MAX_TEXT_LENGTH = 4096

/**
 * The bytes of the text being lexed (one text at a time: the parser never starts a parse while
 * another runs). A module that scans them copies this binding into a constant of its own
 * (`const CODES = TEXT`): V8's optimising compiler folds a module's own unexported constants
 * into the code, so that a loop over the bytes checks neither the array nor its bounds on
 * every byte, while an imported (or exported) binding is read through its module cell each
 * time. Measured: a byte scan three times faster.
 */
export const TEXT = new Uint8Array(MAX_TEXT_LENGTH + 1)

/**
 * Writes the bytes of `text` into `into`, then a 0 at `text.length` (a sentinel that ends every
 * scan by class, so the scanning loops need no separate bounds test). `into` must hold
 * `text.length + 1` bytes.
 */
export function textCodes (text: string, into: Uint8Array): Uint8Array {
  const len = text.length
  const { read, written } = encoder.encodeInto(text, into)
  if (read !== len || written !== len) {
    // Non-ASCII text: UTF-8 took more bytes than the text has code units (or ran out of room).
    for (let i = 0; i < len; i++) {
      const c = text.charCodeAt(i)
      into[i] = c < 0x80 ? c : NON_ASCII
    }
  }
  into[len] = 0
  return into
}

/** Letters and `_`: what a name or a keyword starts with. */
export function isWordStart (c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95
}

/** What the rest of a name (`http.request.uri`) or keyword is made of: letters, digits, `_`, `.`. */
export function isWordByte (c: number): boolean {
  return isWordStart(c) || (c >= 48 && c <= 57) || c === 46
}

/**
 * A string as codes like textCodes's, for text off the lexer's path (lookups, patterns given
 * as strings): into `codes`, which must hold `text.length + 1` bytes, or a fresh array.
 */
export function codesOf (text: string, codes = new Uint8Array(text.length + 1)): Uint8Array {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    codes[i] = c < 0x80 ? c : NON_ASCII
  }
  codes[text.length] = 0
  return codes
}

/**
 * Codes of a pattern given as a string (checkRegex, checkWildcard called without the
 * expression's bytes): written into one buffer shared by those checks, which use it and return
 * before the next one starts; a pattern longer than any expression gets an array of its own.
 */
const SCRATCH = new Uint8Array(MAX_TEXT_LENGTH + 1)

export function scratchCodesOf (text: string): Uint8Array {
  return codesOf(text, text.length < SCRATCH.length ? SCRATCH : undefined)
}

/** Value of a hex digit's code, or -1. */
export function hexValue (c: number): number {
  if (c >= 48 && c <= 57) return c - 48
  if (c >= 97 && c <= 102) return c - 87
  if (c >= 65 && c <= 70) return c - 55
  return -1
}
