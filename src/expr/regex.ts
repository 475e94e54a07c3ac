/**
 * Validation of `matches` patterns. wirefilter compiles them with Rust's `regex` crate, whose
 * syntax deliberately leaves out look-around and backreferences: without them every match
 * runs in time linear in the input (finite automata, no backtracking), so a rule can never be
 * a ReDoS. We hold patterns to that syntax — a pattern that needs backtracking is rejected
 * here, not discovered by the enforcement engine — and then let V8 confirm the rest.
 *
 * How: one pass over the pattern, in Rust syntax (docs.rs/regex, "Syntax"), that rejects what
 * Rust does not accept, estimates the compiled size, and rewrites Rust-only spellings into
 * JavaScript ones (`(?P<n>…)` → `(…)`, inline flags dropped, `\A` → `^`, `\x{…}` → `\u{…}`,
 * nested classes and set operations flattened, `(?x)` whitespace and comments removed). The
 * result is compiled with `new RegExp(…, 'u')`, which parses eagerly and never runs it.
 * Character classes are checked here and emitted as a flat union, which is enough to validate.
 */
import { RegexFailure, scanClass, scanEscape, type Emitted } from './regex-syntax.js'

/** Approximate compiled-size units; counted repetitions multiply (Rust unrolls `x{n}`). */
export const MAX_REGEX_SIZE = 50_000

export interface RegexProblem {
  readonly message: string
  /** UTF-16 index in the pattern text. */
  readonly index: number
}

interface Frame { size: number, last: number, verbose: boolean }

const FLAG_CHARS = 'imsUuxR'
const SPACE = 32
const TAB = 9
const LF = 10
const CR = 13
const HASH = 35
const BACKSLASH = 92
const GROUP_NAME = /^[_A-Za-z][_0-9A-Za-z.[\]]*$/
/** Characters with a meaning in a pattern (the rest are copied as runs of literals). */
const SPECIAL = new Uint8Array(128)
for (const ch of '\\[]()*+?{}|.^$') SPECIAL[ch.charCodeAt(0)] = 1

function isSpecial (c: number, verbose: boolean): boolean {
  if (c >= 128) return false
  return SPECIAL[c] === 1 || (verbose && (c === 32 || c === 9 || c === 10 || c === 13 || c === 35 /* # */))
}

/**
 * Translations V8 has already accepted. Feeds re-send the same rules, and constructing a
 * RegExp costs a runtime call and an object even when V8's own cache holds the compiled code;
 * a Set lookup does not. Only valid sources are kept, so a rejected pattern is compiled (and
 * rejected) every time. Bounded by total length: it is cleared when full, never grows past it.
 */
const compiled = new Set<string>()
const MAX_COMPILED_CHARS = 1 << 20
let compiledChars = 0

/** Checks a pattern; undefined when it is valid Rust regex syntax within the size cap. */
export function checkRegex (pattern: string): RegexProblem | undefined {
  try {
    // The Rust-syntax pass runs every time: it is what rejects look-around and backreferences.
    const js = translate(pattern)
    if (compiled.has(js)) return undefined
    try {
      new RegExp(js, 'u')
    } catch (e) {
      const m = /: ([^:]+)$/.exec((e as Error).message)
      return { message: `regex does not compile: ${m?.[1] ?? (e as Error).message}`, index: 0 }
    }
    if (compiledChars + js.length > MAX_COMPILED_CHARS) { compiled.clear(); compiledChars = 0 }
    compiled.add(js)
    compiledChars += js.length
    return undefined
  } catch (e) {
    if (e instanceof RegexFailure) return { message: e.message, index: e.index }
    throw e
  }
}

/**
 * The Rust-syntax pass: checks `p` and returns its JavaScript translation. Most of a pattern
 * translates to itself (runs of literals, groups, quantifiers, alternations), so the output is
 * built lazily: text that translates to itself stays in the pattern until a construct that is
 * rewritten (an escape, a class, a flag group…) flushes it, and a pattern that needs no
 * rewriting is returned as it is, without a copy.
 */
function translate (p: string): string {
  const stack: Frame[] = [{ size: 0, last: 0, verbose: false }]
  const names: string[] = [] // capture group names, to refuse duplicates
  let out = ''
  /** p[copied, i) translates to itself and is not in `out` yet. */
  let copied = 0
  let i = 0
  while (i < p.length) {
    const frame = stack[stack.length - 1]!
    const ch = p.charCodeAt(i)
    const at = i
    if (frame.verbose && (ch === SPACE || ch === TAB || ch === LF || ch === CR || ch === HASH)) {
      // (?x): whitespace and comments are dropped.
      if (ch === HASH) while (i < p.length && p.charCodeAt(i) !== LF) i++
      else i++
      out += p.slice(copied, at)
      copied = i
      continue
    }
    let js: string | undefined // set when the construct at `at` is rewritten
    switch (ch) {
      case BACKSLASH: {
        const e: Emitted = scanEscape(p, i, false)
        // `\d`, `\s`, `\b`… are themselves in JavaScript; `\x41`, `\A`, `\.`… are rewritten.
        if (e.js.length !== e.end - i || !p.startsWith(e.js, i)) js = e.js
        addAtom(frame, e.weight)
        i = e.end
        break
      }
      case 91 /* [ */: {
        const e = scanClass(p, i, frame.verbose)
        js = e.js
        addAtom(frame, e.weight)
        i = e.end
        break
      }
      case 40 /* ( */: {
        const g = scanGroupOpen(p, i, names)
        if (g.flagsOnly) {
          if (g.verbose !== undefined) frame.verbose = g.verbose
        } else {
          stack.push({ size: 0, last: 0, verbose: g.verbose ?? frame.verbose })
        }
        if (g.js.length !== g.end - i || !p.startsWith(g.js, i)) js = g.js // `(` and `(?:` are themselves
        i = g.end
        break
      }
      case 41 /* ) */: {
        if (stack.length === 1) throw new RegexFailure('regex has an unopened ")"', i)
        stack.pop()
        addAtom(stack[stack.length - 1]!, frame.size + 1)
        i++
        break
      }
      case 42 /* * */: case 43 /* + */: case 63 /* ? */:
        i = lazySuffix(p, i + 1)
        break
      case 123 /* { */: {
        const r = scanRepetition(p, i)
        frame.size += frame.last * Math.max(0, r.max - 1)
        frame.last *= Math.max(1, r.max)
        i = r.end
        break
      }
      case 124 /* | */:
        frame.last = 0
        i++
        break
      case 46 /* . */:
        addAtom(frame, 4)
        i++
        break
      case 94 /* ^ */: case 36 /* $ */:
        addAtom(frame, 1)
        i++
        break
      case 93 /* ] */: case 125 /* } */:
        // Rust takes a lone `]` or `}` literally; JavaScript's `u` mode wants them escaped.
        js = '\\' + p[i]!
        addAtom(frame, 1)
        i++
        break
      default: {
        // A run of plain characters; a quantifier after it applies to its last character only,
        // hence `last` = 1.
        let j = i + 1
        while (j < p.length && !isSpecial(p.charCodeAt(j), frame.verbose)) j++
        frame.size += j - i
        frame.last = 1
        i = j
      }
    }
    if (js !== undefined) {
      out += p.slice(copied, at) + js
      copied = i
    }
    // Only the top frame grew in this step (a closing ")" grows the parent, now on top).
    if (stack[stack.length - 1]!.size > MAX_REGEX_SIZE) throw new RegexFailure(`regex is too large once compiled (limit ${MAX_REGEX_SIZE} units; counted repetitions multiply)`, at)
  }
  if (stack.length > 1) throw new RegexFailure('regex has an unclosed "("', p.length)
  return copied === 0 ? p : out + p.slice(copied)
}

function addAtom (frame: Frame, weight: number): void {
  frame.size += weight
  frame.last = weight
}

/** Index after an optional lazy `?`; a possessive `+` is reported (Rust has none). */
function lazySuffix (p: string, i: number): number {
  if (p[i] === '?') return i + 1
  if (p[i] === '+') throw new RegexFailure('possessive quantifiers are not supported in Rust regex syntax', i)
  return i
}

function scanRepetition (p: string, i: number): { max: number, end: number } {
  const close = p.indexOf('}', i)
  const body = close === -1 ? '' : p.slice(i + 1, close)
  const m = /^(\d{1,9})(,(\d{0,9}))?$/.exec(body)
  if (m === null) throw new RegexFailure('invalid counted repetition; write {n}, {n,} or {n,m}', i)
  const min = Number(m[1])
  const max = m[2] === undefined ? min : m[3] === '' ? min + 1 : Number(m[3])
  if (max < min) throw new RegexFailure(`invalid repetition {${body}}: the minimum is above the maximum`, i)
  return { max, end: lazySuffix(p, close + 1) }
}

interface GroupOpen { js: string, end: number, flagsOnly: boolean, verbose: boolean | undefined }

function scanGroupOpen (p: string, i: number, names: string[]): GroupOpen {
  if (p[i + 1] !== '?') return { js: '(', end: i + 1, flagsOnly: false, verbose: undefined }
  // The two characters after `(?` decide the group's kind (NaN past the end: no match).
  const r0 = p.charCodeAt(i + 2)
  const r1 = p.charCodeAt(i + 3)
  if (r0 === 61 /* = */ || r0 === 33 /* ! */ || (r0 === 60 /* < */ && (r1 === 61 || r1 === 33))) {
    throw new RegexFailure(`look-around "(?${p.slice(i + 2, r0 === 60 ? i + 4 : i + 3)}" is not supported: Rust regex syntax, which guarantees linear-time matching, has none`, i)
  }
  const recursion = (r0 >= 48 && r0 <= 57) || r0 === 82 /* R */ || r0 === 43 /* + */ || r0 === 38 /* & */ ||
    (r0 === 45 /* - */ && !FLAG_CHARS.includes(p[i + 3] ?? '-'))
  if ((r0 === 80 /* P */ && (r1 === 61 /* = */ || r1 === 62 /* > */)) || recursion) {
    throw new RegexFailure('backreferences and recursion are not supported in Rust regex syntax', i)
  }
  if (r0 === 62 /* > */) throw new RegexFailure('atomic groups "(?>" are not supported in Rust regex syntax', i)
  if ((r0 === 80 /* P */ && r1 === 60 /* < */) || r0 === 60) {
    const start = i + 2 + (r0 === 80 ? 2 : 1)
    const close = p.indexOf('>', start)
    const name = close === -1 ? '' : p.slice(start, close)
    if (!GROUP_NAME.test(name)) throw new RegexFailure(`invalid capture group name "${name}"`, start)
    if (names.includes(name)) throw new RegexFailure(`duplicate capture group name "${name}"`, start)
    names.push(name)
    return { js: '(', end: close + 1, flagsOnly: false, verbose: undefined }
  }
  if (r0 === 58 /* : */) return { js: '(?:', end: i + 3, flagsOnly: false, verbose: undefined }
  // Inline flags: (?flags) or (?flags:…), e.g. (?i), (?-u), (?ix:…).
  let j = i + 2
  let negated = false
  let verbose: boolean | undefined
  let seen = '' // flags so far: a handful of characters, no Set needed
  for (; j < p.length && p[j] !== ')' && p[j] !== ':'; j++) {
    const f = p[j]!
    if (f === '-' && !negated) { negated = true; continue }
    if (!FLAG_CHARS.includes(f) || f === '-') throw new RegexFailure(`unknown regex flag or group syntax "(?${p.slice(i + 2, j + 1)}"`, j)
    if (seen.includes(f)) throw new RegexFailure(`regex flag "${f}" is repeated`, j)
    seen += f
    if (f === 'x') verbose = !negated
  }
  if (j >= p.length) throw new RegexFailure('regex has an unclosed "(?"', i)
  if (seen === '' || p[j - 1] === '-') throw new RegexFailure('regex flag group needs at least one flag (and one after "-")', j)
  return p[j] === ')'
    ? { js: '', end: j + 1, flagsOnly: true, verbose }
    : { js: '(?:', end: j + 1, flagsOnly: false, verbose }
}
