/**
 * The scanner: reads words, string literals and bare value tokens from the expression text,
 * by char code. There is no separate token stream because the language's lexing depends on
 * where the parser is (wirefilter lexes the right-hand side by the field's type): after an
 * operator `fe80::1` is an address, elsewhere `fe80` would be a name. The parser asks for
 * what it expects next.
 */
import type { StringLit } from './ast.js'
import { fail } from './diagnostic.js'
import { hexValue } from './ip.js'

const SPACE = 32
const TAB = 9
const LF = 10
const CR = 13
const QUOTE = 34
const HASH = 35
const BACKSLASH = 92
const LOWER_R = 114

/** Raw strings allow at most 255 `#` (wirefilter stores the count in a u8). */
const MAX_RAW_HASHES = 255

/**
 * Character classes as bit flags in a 128-entry table: one load per character instead of a
 * chain of range tests (undici's validTokenChars does the same). Non-ASCII is never a word.
 */
const WORD_START = 1
const WORD = 2
const BARE = 4
const CLASSES = new Uint8Array(128)
for (let c = 0; c < 128; c++) {
  const letter = (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95
  const digit = c >= 48 && c <= 57
  const word = letter || digit || c === 46 /* . */
  const bare = word || c === 58 /* : */ || c === 47 /* / */ || c === 45 /* - */
  CLASSES[c] = (letter ? WORD_START : 0) | (word ? WORD : 0) | (bare ? BARE : 0)
}

function is (c: number, cls: number): boolean {
  return c < 128 && (CLASSES[c]! & cls) !== 0
}

export class Cursor {
  readonly src: string
  pos = 0

  constructor (src: string) {
    this.src = src
  }

  /** Char code at the cursor, or -1 at the end. */
  peek (ahead = 0): number {
    const i = this.pos + ahead
    return i < this.src.length ? this.src.charCodeAt(i) : -1
  }

  atEnd (): boolean {
    return this.pos >= this.src.length
  }

  skipSpace (): void {
    const s = this.src
    let i = this.pos
    for (; i < s.length; i++) {
      const c = s.charCodeAt(i)
      if (c !== SPACE && c !== TAB && c !== LF && c !== CR) break
    }
    this.pos = i
  }

  /** End offset of the word at the cursor (a name or an English operator), or the cursor. */
  wordEnd (): number {
    const s = this.src
    let i = this.pos
    if (i >= s.length || !is(s.charCodeAt(i), WORD_START)) return i
    for (i++; i < s.length && is(s.charCodeAt(i), WORD); i++);
    return i
  }

  /** The word at the cursor without consuming it ('' when none). */
  peekWord (): string {
    return this.src.slice(this.pos, this.wordEnd())
  }

  readWord (): string {
    const end = this.wordEnd()
    const w = this.src.slice(this.pos, end)
    this.pos = end
    return w
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
    return this.peek() === QUOTE
      ? { kind: 'string', value: this.#readQuoted(), raw: false, pos }
      : { kind: 'string', value: this.#readRaw(), raw: true, pos }
  }

  /** Reads a run of value characters (digits, letters, `.`, `:`, `/`, `-`); '' when none. */
  readBare (): string {
    const s = this.src
    const start = this.pos
    let i = start
    while (i < s.length && is(s.charCodeAt(i), BARE)) i++
    this.pos = i
    return s.slice(start, i)
  }

  /** `"…"` with the escapes `\"` `\\` `\xHH` `\OOO` (wirefilter's set). */
  #readQuoted (): string {
    const s = this.src
    const open = this.pos
    let out = ''
    let i = open + 1
    let chunk = i
    for (;;) {
      if (i >= s.length) fail('unterminated string (missing closing ")', open)
      const c = s.charCodeAt(i)
      if (c === QUOTE) break
      if (c === BACKSLASH) {
        out += s.slice(chunk, i) + this.#readEscape(i)
        const e = s.charCodeAt(i + 1)
        i += e === 120 /* x */ || (e >= 48 && e <= 55) ? 4 : 2 // \xHH and \OOO are 4 chars
        chunk = i
      } else if (c >= 0x80) {
        // Typed non-ASCII text is stored as its UTF-8 bytes (see ast.ts, "Byte strings").
        out += s.slice(chunk, i)
        const cp = s.codePointAt(i)!
        if (cp >= 0xd800 && cp <= 0xdfff) fail('string contains an unpaired UTF-16 surrogate', i)
        out += utf8Bytes(cp)
        i += cp > 0xffff ? 2 : 1
        chunk = i
      } else {
        i++
      }
    }
    out += s.slice(chunk, i)
    this.pos = i + 1
    return out
  }

  /** Decodes the escape whose backslash is at `at`; returns the byte it stands for. */
  #readEscape (at: number): string {
    const s = this.src
    const c = at + 1 < s.length ? s.charCodeAt(at + 1) : -1
    if (c === -1) fail('unterminated string (missing closing ")', at)
    if (c === QUOTE || c === BACKSLASH) return String.fromCharCode(c)
    if (c === 120 /* x */) {
      const hi = hexValue(at + 2 < s.length ? s.charCodeAt(at + 2) : -1)
      const lo = hexValue(at + 3 < s.length ? s.charCodeAt(at + 3) : -1)
      if (hi < 0 || lo < 0) fail('"\\x" needs two hex digits, as in "\\x2f"', at)
      return String.fromCharCode(hi * 16 + lo)
    }
    if (c >= 48 && c <= 55) {
      let v = 0
      for (let k = 1; k <= 3; k++) {
        const d = at + k < s.length ? s.charCodeAt(at + k) : -1
        if (d < 48 || d > 55) fail('an octal escape needs three octal digits, as in "\\057"', at)
        v = v * 8 + (d - 48)
      }
      if (v > 255) fail(`octal escape "\\${s.slice(at + 1, at + 4)}" is above \\377`, at)
      return String.fromCharCode(v)
    }
    const shown = String.fromCodePoint(s.codePointAt(at + 1)!)
    return fail(`invalid escape "\\${shown}" in a string; the escapes are \\", \\\\, \\xHH and \\OOO (octal), and raw strings r"…" need none`, at)
  }

  /** `r"…"`, `r#"…"#`, …: no escapes; ends at a quote followed by as many `#` as it opened with. */
  #readRaw (): string {
    const s = this.src
    const open = this.pos
    let i = open + 1
    while (i < s.length && s.charCodeAt(i) === HASH) i++
    const hashes = i - open - 1
    if (hashes > MAX_RAW_HASHES) fail(`a raw string opens with at most ${MAX_RAW_HASHES} "#"`, open)
    if (s.charCodeAt(i) !== QUOTE) fail('expected " after r#', i)
    const start = i + 1
    const closing = '"' + '#'.repeat(hashes)
    const end = s.indexOf(closing, start)
    if (end === -1) fail(`unterminated raw string (missing closing ${closing})`, open)
    this.pos = end + closing.length
    return textToBytes(s.slice(start, end), start)
  }
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
