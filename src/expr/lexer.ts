/**
 * The scanner: reads words, string literals and bare value tokens from the expression text.
 * There is no separate token stream because the language's lexing depends on where the parser
 * is (wirefilter lexes the right-hand side by the field's type): after an operator `fe80::1`
 * is an address, elsewhere `fe80` would be a name. The parser asks for what it expects next,
 * and gets offsets back, not token objects or strings: it slices out only what the AST keeps.
 *
 * Characters are read from the text's bytes (text.ts), not from the string.
 */
import type { StringLit } from './ast.js'
import { fail } from './diagnostic.js'
import { hexValue, isWordByte, isWordStart, MAX_TEXT_LENGTH, NON_ASCII, TEXT, textCodes } from './text.js'
import { lowercaseHint, vocabulary } from './words.js'

const SPACE = 32
const TAB = 9
const LF = 10
const CR = 13
const QUOTE = 34
const HASH = 35
const BACKSLASH = 92
const OPEN_CLASS = 91 // [
const CLOSE_CLASS = 93 // ]
const LOWER_R = 114

/** Raw strings allow at most 255 `#` (wirefilter stores the count in a u8). */
const MAX_RAW_HASHES = 255

/**
 * Character classes as bit flags, one table load per character instead of a chain of range
 * tests (undici's validTokenChars does the same). 256 entries, so any byte indexes it; the
 * 0 that ends the bytes (text.ts) and NON_ASCII belong to no class but STOP. (Where a word
 * continues is the vocabulary's business: see scanWord.)
 */
const WORD_START = 1
const BARE = 2
const SPACE_CLASS = 4
/** Where a quoted string's fast scan stops: `"`, `\`, non-ASCII, or the 0 after the text. */
const STOP = 8
/** Where a quoted regex's fast scan stops: STOP's bytes, and `[` `]` (see #readRegexQuoted). */
const REGEX_STOP = 16
const CLASSES = new Uint8Array(256)
for (let c = 0; c < 128; c++) {
  const letter = isWordStart(c)
  const bare = isWordByte(c) || c === 58 /* : */ || c === 47 /* / */ || c === 45 /* - */
  const space = c === SPACE || c === TAB || c === LF || c === CR
  const stop = c === QUOTE || c === BACKSLASH || c === 0
  const regexStop = stop || c === OPEN_CLASS || c === CLOSE_CLASS
  CLASSES[c] = (letter ? WORD_START : 0) | (bare ? BARE : 0) | (space ? SPACE_CLASS : 0) | (stop ? STOP : 0) | (regexStop ? REGEX_STOP : 0)
}
CLASSES[NON_ASCII] = STOP | REGEX_STOP

/**
 * The bytes of the text being lexed and the vocabulary's tables, as constants of this module:
 * the optimising compiler then knows their addresses and lengths, and the scanning loops below
 * check neither on every byte (see TEXT in text.ts; measured: 10–15 % of the whole check,
 * next to the same loops reading arrays held in fields).
 */
const CODES = TEXT
const SYMBOLS = vocabulary.symbols
const NEXT = vocabulary.next
const ROOT = vocabulary.root

export class Cursor {
  readonly src: string
  /** The text's bytes (text.ts), with a 0 at `len`; valid until the next Cursor is made. */
  readonly codes: Uint8Array
  readonly len: number
  pos = 0
  /** Vocabulary id (words.ts) of the word last scanned by scanWord; 0 when not a known word. */
  word = 0
  /**
   * Where the value of the string last read by readString starts in `codes` when it is that
   * run of the text as is (no escape, nothing but ASCII); -1 otherwise. Then the value is its
   * own text, and a pattern check can read its bytes in place (typing.ts).
   */
  valueAt = -1
  /** The kinds (ast.ts KIND bits) of the value or set last read by readValue or readSet (values.ts). */
  kinds = 0

  constructor (src: string) {
    if (src.length > MAX_TEXT_LENGTH) throw new Error(`the lexer reads at most ${MAX_TEXT_LENGTH} characters`)
    this.src = src
    this.codes = textCodes(src, CODES)
    this.len = src.length
  }

  /** Byte at the cursor (or `ahead` of it), or -1 past the end; non-ASCII reads as NON_ASCII. */
  peek (ahead = 0): number {
    const i = this.pos + ahead
    return i < this.len ? CODES[i]! : -1
  }

  atEnd (): boolean {
    return this.pos >= this.len
  }

  skipSpace (): void {
    const codes = CODES
    let i = this.pos
    while ((CLASSES[codes[i]!]! & SPACE_CLASS) !== 0) i++
    this.pos = i
  }

  /**
   * End offset of the word (a name or an English operator) at the cursor, not consumed; the
   * cursor when there is none. The word is looked up as it is scanned, by stepping through the
   * vocabulary's automaton with each byte (vocabulary.ts): its id is left in `word`.
   */
  scanWord (): number {
    const codes = CODES
    let i = this.pos
    let row = 0
    if ((CLASSES[codes[i]!]! & WORD_START) !== 0) {
      row = ROOT
      for (let sym = SYMBOLS[codes[i]!]!; sym !== 0; sym = SYMBOLS[codes[++i]!]!) row = NEXT[row + sym]!
    }
    this.word = NEXT[row]! // the id of the word ending at the row (vocabulary.ts)
    return i
  }

  /**
   * Length of the English logical operator (`and`, `or`, `xor`) at the cursor, not consumed, or
   * 0. Compared byte by byte rather than walked through the vocabulary: one follows nearly every
   * clause, and a walk is a chain of dependent loads. (Past the text, the 0 after it matches
   * none.)
   */
  scanLogicalOp (): number {
    const codes = CODES
    const i = this.pos
    const c = codes[i]
    const n = c === 97 /* a */ ? (codes[i + 1] === 110 /* n */ && codes[i + 2] === 100 /* d */ ? 3 : 0)
      : c === 111 /* o */ ? (codes[i + 1] === 114 /* r */ ? 2 : 0)
        : c === 120 /* x */ && codes[i + 1] === 111 /* o */ && codes[i + 2] === 114 /* r */ ? 3 : 0
    // The word must end there, as scanWord would end it.
    return n !== 0 && SYMBOLS[codes[i + n]!] === 0 ? n : 0
  }

  /** Whether the word at the cursor is the vocabulary word `id` (`not`, `wildcard`). */
  atWord (id: number): boolean {
    this.scanWord()
    return this.word === id
  }

  /** The word at the cursor without consuming it ('' when none). */
  peekWord (): string {
    return this.src.slice(this.pos, this.scanWord())
  }

  /** True at `"`, `r"` or `r#`. */
  atString (): boolean {
    const c = this.peek()
    if (c === QUOTE) return true
    if (c !== LOWER_R) return false
    const d = this.peek(1)
    return d === QUOTE || d === HASH
  }

  /** Reads a quoted or raw string literal at the cursor. */
  readString (): StringLit {
    const pos = this.pos
    return this.codes[pos] === QUOTE
      ? { kind: 'string', value: this.#readQuoted(), raw: false, pos }
      : { kind: 'string', value: this.#readRaw(), raw: true, pos }
  }

  /**
   * Reads the pattern after `matches` / `~`: a raw string as anywhere else, a quoted one by
   * wirefilter's regex rule (#readRegexQuoted), so that `"\d+\.php"` reaches the regex check
   * as `\d+\.php`.
   */
  readRegex (): StringLit {
    const pos = this.pos
    return this.codes[pos] === QUOTE
      ? { kind: 'string', value: this.#readRegexQuoted(), raw: false, pos }
      : { kind: 'string', value: this.#readRaw(), raw: true, pos }
  }

  /**
   * End offset of the run of value characters (digits, letters, `.`, `:`, `/`, `-`) at the
   * cursor, or the cursor when there is none. Not consumed, not sliced: literals.ts parses
   * the run in place.
   */
  bareEnd (): number {
    const codes = CODES
    let i = this.pos
    while ((CLASSES[codes[i]!]! & BARE) !== 0) i++
    return i
  }

  /** `"…"` with the escapes `\"` `\\` `\xHH` `\OOO` (wirefilter's set). */
  #readQuoted (): string {
    const s = this.src
    const codes = CODES
    const open = this.pos
    let out = ''
    let i = open + 1
    let chunk = i
    for (;;) {
      while ((CLASSES[codes[i]!]! & STOP) === 0) i++
      if (i >= this.len) fail('unterminated string (missing closing ")', open)
      const c = codes[i]
      if (c === QUOTE) break
      if (c === BACKSLASH) {
        out += s.slice(chunk, i) + this.#readEscape(i)
        const e = codes[i + 1]!
        i += e === 120 /* x */ || (e >= 48 && e <= 55) ? 4 : 2 // \xHH and \OOO are 4 chars
        chunk = i
      } else if (c === NON_ASCII) {
        out += s.slice(chunk, i) + this.#typedBytes(i)
        i += s.codePointAt(i)! > 0xffff ? 2 : 1
        chunk = i
      } else {
        i++ // a NUL inside the text
      }
    }
    return this.#endString(open, chunk, i, out)
  }

  /** Typed non-ASCII text is stored as its UTF-8 bytes (see ast.ts, "Byte strings"): those of the character at `i`. */
  #typedBytes (i: number): string {
    const cp = this.src.codePointAt(i)!
    if (cp >= 0xd800 && cp <= 0xdfff) fail('string contains an unpaired UTF-16 surrogate', i)
    return utf8Bytes(cp)
  }

  /**
   * Ends a quoted string whose closing quote is at `end`: `out` holds the value up to `chunk`.
   * When no escape or non-ASCII moved the chunk the value is that run of the text as is, returned
   * as the slice itself (appending it to '' is a call into V8's string code all the same).
   */
  #endString (open: number, chunk: number, end: number, out: string): string {
    this.pos = end + 1
    if (chunk === open + 1) {
      this.valueAt = chunk
      return this.src.slice(chunk, end)
    }
    this.valueAt = -1
    return out + this.src.slice(chunk, end)
  }

  /** Decodes the escape whose backslash is at `at`; returns the byte it stands for. */
  #readEscape (at: number): string {
    const s = this.src
    const codes = CODES
    const len = this.len
    const c = at + 1 < len ? codes[at + 1]! : -1
    if (c === -1) fail('unterminated string (missing closing ")', at)
    if (c === QUOTE || c === BACKSLASH) return String.fromCharCode(c)
    if (c === 120 /* x */) {
      const hi = hexValue(at + 2 < len ? codes[at + 2]! : -1)
      const lo = hexValue(at + 3 < len ? codes[at + 3]! : -1)
      if (hi < 0 || lo < 0) fail('"\\x" needs two hex digits, as in "\\x2f"', at)
      return String.fromCharCode(hi * 16 + lo)
    }
    if (c >= 48 && c <= 55) {
      let v = 0
      for (let k = 1; k <= 3; k++) {
        const d = at + k < len ? codes[at + k]! : -1
        if (d < 48 || d > 55) fail('an octal escape needs three octal digits, as in "\\057"', at)
        v = v * 8 + (d - 48)
      }
      if (v > 255) fail(`octal escape "\\${s.slice(at + 1, at + 4)}" is above \\377`, at)
      return String.fromCharCode(v)
    }
    const shown = String.fromCodePoint(s.codePointAt(at + 1)!)
    return fail(`invalid escape "\\${shown}" in a string; the escapes are \\", \\\\, \\xHH and \\OOO (octal), and raw strings r"…" need none`, at)
  }

  /**
   * `"…"` holding a regex, lexed as wirefilter lexes it (engine/src/rhs_types/regex): every
   * `\x` pair is kept as it is for the regex syntax to judge, except `\"` outside a character
   * class, which becomes `"`; inside `[…]` a `"` is a character and does not end the string.
   * An escaped `[` or `]` neither opens nor closes a class.
   */
  #readRegexQuoted (): string {
    const s = this.src
    const codes = CODES
    const open = this.pos
    const len = this.len
    let out = ''
    let inClass = false
    let i = open + 1
    let chunk = i
    for (;;) {
      while ((CLASSES[codes[i]!]! & REGEX_STOP) === 0) i++
      if (i >= len) fail('unterminated string (missing closing ")', open)
      const c = codes[i]
      if (c === QUOTE) {
        if (!inClass) break
        i++
      } else if (c === BACKSLASH) {
        if (i + 1 >= len) fail('unterminated string (missing closing ")', open)
        if (codes[i + 1] === QUOTE && !inClass) {
          out += s.slice(chunk, i) // the backslash goes, the quote stays
          chunk = i + 1
          i += 2
        } else {
          // A non-ASCII character after the backslash is left to the branch below.
          i += codes[i + 1] === NON_ASCII ? 1 : 2
        }
      } else if (c === OPEN_CLASS) {
        inClass = true
        i++
      } else if (c === CLOSE_CLASS) {
        inClass = false
        i++
      } else if (c === NON_ASCII) {
        out += s.slice(chunk, i) + this.#typedBytes(i)
        i += s.codePointAt(i)! > 0xffff ? 2 : 1
        chunk = i
      } else {
        i++ // a NUL inside the text
      }
    }
    return this.#endString(open, chunk, i, out)
  }

  /** `r"…"`, `r#"…"#`, …: no escapes; ends at a quote followed by as many `#` as it opened with. */
  #readRaw (): string {
    const s = this.src
    const codes = CODES
    const open = this.pos
    let i = open + 1
    while (codes[i] === HASH) i++
    const hashes = i - open - 1
    if (hashes > MAX_RAW_HASHES) fail(`a raw string opens with at most ${MAX_RAW_HASHES} "#"`, open)
    if (codes[i] !== QUOTE) fail('expected " after r#', i)
    const start = i + 1
    const closing = hashes === 0 ? '"' : '"' + '#'.repeat(hashes)
    const end = s.indexOf(closing, start)
    if (end === -1) fail(`unterminated raw string (missing closing ${closing})`, open)
    this.pos = end + closing.length
    this.valueAt = -1
    for (let k = start; k < end; k++) if (codes[k] === NON_ASCII) return textToBytes(s.slice(start, end), start)
    this.valueAt = start
    return s.slice(start, end)
  }
}

/**
 * Offset in `src` of the character at `index` of the pattern that #readRegexQuoted read from the
 * string whose text starts at `start`: one less for each `\"` before it that became `"`.
 */
export function regexSourceOffset (src: string, start: number, index: number): number {
  let inClass = false
  let escaped = false
  let i = start
  for (let k = 0; k < index; k++, i++) {
    const c = src.charCodeAt(i)
    if (escaped) {
      escaped = false
    } else if (c === BACKSLASH) {
      if (src.charCodeAt(i + 1) === QUOTE && !inClass) i++ // two characters of the text, one of the pattern
      else escaped = true
    } else if (c === OPEN_CLASS) {
      inClass = true
    } else if (c === CLOSE_CLASS) {
      inClass = false
    }
  }
  return i
}

/** Fails with `<what>, found <description of what is at the cursor>`. */
export function unexpected (c: Cursor, what: string): never {
  if (c.atEnd()) fail(`${what}, found the end of the expression`, c.pos)
  const word = c.peekWord()
  if (word !== '') {
    lowercaseHint(word, c.pos)
    fail(`${what}, found "${word}"`, c.pos)
  }
  if (c.atString()) fail(`${what}, found a string`, c.pos)
  const cp = c.src.codePointAt(c.pos)!
  const shown = cp < 0x20 || cp === 0x7f ? `U+${cp.toString(16).toUpperCase().padStart(4, '0')}` : `"${String.fromCodePoint(cp)}"`
  return fail(`${what}, found ${shown}`, c.pos)
}

/** UTF-8 bytes of one code point, one char per byte. */
function utf8Bytes (cp: number): string {
  if (cp < 0x80) return String.fromCharCode(cp)
  if (cp < 0x800) return String.fromCharCode(0xc0 | (cp >> 6), 0x80 | (cp & 63))
  if (cp < 0x10000) return String.fromCharCode(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63))
  return String.fromCharCode(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63))
}

/** Text as a byte string; `at` is the text's offset in the source, for the error position. */
export function textToBytes (text: string, at: number): string {
  let ascii = true
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) >= 0x80) { ascii = false; break }
  if (ascii) return text
  let out = ''
  for (let i = 0; i < text.length; i++) {
    const cp = text.codePointAt(i)!
    if (cp >= 0xd800 && cp <= 0xdfff) fail('string contains an unpaired UTF-16 surrogate', at + i)
    out += utf8Bytes(cp)
    if (cp > 0xffff) i++
  }
  return out
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** A byte string as text, or undefined when the bytes are not valid UTF-8. */
export function bytesToText (bytes: string): string | undefined {
  let ascii = true
  for (let i = 0; i < bytes.length; i++) if (bytes.charCodeAt(i) >= 0x80) { ascii = false; break }
  if (ascii) return bytes
  const buf = new Uint8Array(bytes.length)
  for (let i = 0; i < bytes.length; i++) buf[i] = bytes.charCodeAt(i)
  try {
    return utf8.decode(buf)
  } catch {
    return undefined
  }
}
