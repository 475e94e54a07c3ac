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
import { NON_ASCII, scratchCodesOf } from './text.js'

/** Approximate compiled-size units; counted repetitions multiply (Rust unrolls `x{n}`). */
export const MAX_REGEX_SIZE = 50_000

export interface RegexProblem {
  readonly message: string
  /** UTF-16 index in the pattern text. */
  readonly index: number
}

const FLAG_CHARS = 'imsUuxR'
const SPACE = 32
const TAB = 9
const LF = 10
const CR = 13
const HASH = 35
const BACKSLASH = 92
const GROUP_NAME = /^[_A-Za-z][_0-9A-Za-z.[\]]*$/
/**
 * Bytes with a meaning in a pattern (the rest are copied as runs of literals), by byte: one
 * table for each mode, so that the scan of a run is one load per byte. In verbose mode (`(?x)`)
 * whitespace and `#` end a run too. Indexed by the bytes of text.ts (non-ASCII is NON_ASCII).
 */
const SPECIAL = new Uint8Array(256)
for (const ch of '\\[]()*+?{}|.^$') SPECIAL[ch.charCodeAt(0)] = 1
const SPECIAL_VERBOSE = SPECIAL.slice()
for (const c of [SPACE, TAB, LF, CR, HASH]) SPECIAL_VERBOSE[c] = 1

/**
 * Translations V8 has already accepted. Feeds re-send the same rules, and constructing a
 * RegExp costs a runtime call and an object even when V8's own cache holds the compiled code;
 * a lookup does not. Only valid sources are kept, so a rejected pattern is compiled (and
 * rejected) every time. Bounded by total length: it is cleared when full, never grows past it.
 *
 * Keyed by a hash of the translation that translate computes from the bytes it reads anyway,
 * and confirmed by comparing the strings: a Set of strings hashes each translation itself, a
 * fresh string every time, through a runtime call that measured about a third of the whole
 * regex check. Two translations with one hash only cost a compile: the later one replaces the
 * earlier one, and a hit is always the same text.
 */
const compiled = new Map<number, string>()
const MAX_COMPILED_CHARS = 1 << 20
let compiledChars = 0

/**
 * Checks a pattern; undefined when it is valid Rust regex syntax within the size cap.
 * `codes`, `from`: the pattern's bytes when the caller has them (the checker passes the
 * expression's, TEXT in text.ts, where a literal's value is a run of the text as is): at
 * `codes[from + k]`, each code unit when ASCII and NON_ASCII otherwise.
 *
 * @example
 *   checkRegex('(?i)^/admin') // → undefined
 *   checkRegex('a(?=b)')      // → { message: 'look-around "(?=" is not supported: …', index: 1 }
 */
export function checkRegex (pattern: string, codes?: Uint8Array, from = 0): RegexProblem | undefined {
  if (codes === undefined) {
    codes = scratchCodesOf(pattern)
    from = 0
  }
  try {
    // The Rust-syntax pass runs every time: it is what rejects look-around and backreferences.
    const js = translate(pattern, codes, from)
    const hash = translatedHash
    if (compiled.get(hash) === js) return undefined
    try {
      new RegExp(js, 'u')
    } catch (e) {
      const m = /: ([^:]+)$/.exec((e as Error).message)
      return { message: `regex does not compile: ${m?.[1] ?? (e as Error).message}`, index: 0 }
    }
    if (compiledChars + js.length > MAX_COMPILED_CHARS) { compiled.clear(); compiledChars = 0 }
    // A copy of its own: `js` may be a slice of the whole rule text (up to 4096 characters),
    // which the cache would otherwise keep alive, past what its character bound counts.
    // Slicing a concatenation flattens it into a new string first, so the copy holds only this.
    compiled.set(hash, (' ' + js).slice(1))
    compiledChars += js.length
    return undefined
  } catch (e) {
    if (e instanceof RegexFailure) return { message: e.message, index: e.index }
    throw e
  }
}

/** FNV-1a (32-bit) over the UTF-16 units of a translation, as translate writes it. */
const FNV_OFFSET = 0x811c9dc5 | 0
const FNV_PRIME = 0x01000193

/** The hash over p[start, end), read from its bytes at codes[from…] (the units where not ASCII). */
function hashRun (h: number, p: string, codes: Uint8Array, from: number, start: number, end: number): number {
  for (let k = start; k < end; k++) {
    const c = codes[from + k]!
    h = Math.imul(h ^ (c === NON_ASCII ? p.charCodeAt(k) : c), FNV_PRIME)
  }
  return h
}

/** The hash over a rewritten fragment. */
function hashText (h: number, s: string): number {
  for (let k = 0; k < s.length; k++) h = Math.imul(h ^ s.charCodeAt(k), FNV_PRIME)
  return h
}

/**
 * The hash of the translation translate last returned (a second result, without an object),
 * kept to 30 bits: a larger number would be a heap object, allocated at each store.
 */
let translatedHash = 0

/**
 * The frames of the groups that enclose the one being read, by depth: its size so far, the
 * weight of its last atom (what a quantifier repeats), and whether it is in verbose mode. The
 * group being read lives in translate's locals, which every step touches; these are saved on
 * `(` and restored on `)`. Module arrays reused by every call rather than an object per group:
 * translate is synchronous and not re-entrant, and the arrays only grow as deep as the deepest
 * pattern seen nests.
 */
const outerSize: number[] = []
const outerLast: number[] = []
const outerVerbose: boolean[] = []
/** Capture group names of the pattern being translated, to refuse duplicates. */
const names: string[] = []

/**
 * The Rust-syntax pass: checks `p`, whose bytes are at codes[from…] (see checkRegex), and
 * returns its JavaScript translation, leaving its hash in translatedHash. Most of a pattern
 * translates to itself (runs of literals, groups, quantifiers, alternations), so the output is
 * built lazily: text that translates to itself stays in the pattern until a construct that is
 * rewritten (an escape, a class, a flag group…) flushes it, and a pattern that needs no
 * rewriting is returned as it is, without a copy. The main loop reads the bytes; the rarer
 * constructs (escapes other than Perl classes, classes, repetitions) read `p`.
 */
function translate (p: string, codes: Uint8Array, from: number): string {
  // The group being read (the whole pattern at depth 0): see outerSize.
  let size = 0
  let last = 0
  let verbose = false
  let depth = 0
  if (names.length !== 0) names.length = 0 // setting the length is a runtime call, even to 0
  let out = ''
  let hash = FNV_OFFSET
  /** p[copied, i) translates to itself and is not in `out` (nor in `hash`) yet. */
  let copied = 0
  let i = 0
  const len = p.length
  while (i < len) {
    const ch = codes[from + i]!
    const at = i
    if (verbose && (ch === SPACE || ch === TAB || ch === LF || ch === CR || ch === HASH)) {
      // (?x): whitespace and comments are dropped.
      if (ch === HASH) while (i < len && codes[from + i] !== LF) i++
      else i++
      out += p.slice(copied, at)
      hash = hashRun(hash, p, codes, from, copied, at)
      copied = i
      continue
    }
    let js: string | undefined // set when the construct at `at` is rewritten
    switch (ch) {
      case BACKSLASH: {
        // The Perl classes, the common escapes, are themselves in JavaScript: no Emitted for them.
        const weight = i + 1 < len ? perlWeight(codes[from + i + 1]!) : 0
        if (weight !== 0) {
          size += weight
          last = weight
          i += 2
          break
        }
        const e: Emitted = scanEscape(p, i, false)
        // `\b`, `\B`… are themselves in JavaScript; `\x41`, `\A`, `\.`… are rewritten.
        if (e.js.length !== e.end - i || !p.startsWith(e.js, i)) js = e.js
        size += e.weight
        last = e.weight
        i = e.end
        break
      }
      case 91 /* [ */: {
        const e = scanClass(p, i, verbose)
        js = e.js
        size += e.weight
        last = e.weight
        i = e.end
        break
      }
      case 40 /* ( */: {
        const end = scanGroupOpen(p, codes, from, i)
        if (group.kind === FLAGS_ONLY) {
          if (group.verbose !== UNSET) verbose = group.verbose === ON
        } else {
          outerSize[depth] = size
          outerLast[depth] = last
          outerVerbose[depth] = verbose
          depth++
          size = 0
          last = 0
          if (group.verbose !== UNSET) verbose = group.verbose === ON
        }
        // `(` and `(?:` are themselves; a named group becomes `(`, flags go.
        if (group.kind !== PLAIN && group.kind !== NON_CAPTURING) js = GROUP_OPEN_JS[group.kind]
        i = end
        break
      }
      case 41 /* ) */: {
        if (depth === 0) throw new RegexFailure('regex has an unopened ")"', i)
        const inner = size
        depth--
        size = outerSize[depth]!
        last = outerLast[depth]!
        verbose = outerVerbose[depth]!
        size += inner + 1
        last = inner + 1
        i++
        break
      }
      case 42 /* * */: case 43 /* + */: case 63 /* ? */:
        i = lazySuffix(p, i + 1)
        break
      case 123 /* { */: {
        const r = scanRepetition(p, i)
        size += last * Math.max(0, r.max - 1)
        last *= Math.max(1, r.max)
        i = r.end
        break
      }
      case 124 /* | */:
        last = 0
        i++
        break
      case 46 /* . */:
        size += 4
        last = 4
        i++
        break
      case 94 /* ^ */: case 36 /* $ */:
        size += 1
        last = 1
        i++
        break
      case 93 /* ] */: case 125 /* } */:
        // Rust takes a lone `]` or `}` literally; JavaScript's `u` mode wants them escaped.
        js = '\\' + p[i]!
        size += 1
        last = 1
        i++
        break
      default: {
        // A run of plain characters; a quantifier after it applies to its last character only,
        // hence `last` = 1.
        let j = i + 1
        const special = verbose ? SPECIAL_VERBOSE : SPECIAL
        while (j < len && special[codes[from + j]!] === 0) j++
        size += j - i
        last = 1
        i = j
      }
    }
    if (js !== undefined) {
      out += p.slice(copied, at) + js
      hash = hashText(hashRun(hash, p, codes, from, copied, at), js)
      copied = i
    }
    // Only the group being read grew in this step (a closing ")" grows the enclosing one, now
    // the one being read).
    if (size > MAX_REGEX_SIZE) throw new RegexFailure(`regex is too large once compiled (limit ${MAX_REGEX_SIZE} units; counted repetitions multiply)`, at)
  }
  if (depth > 0) throw new RegexFailure('regex has an unclosed "("', len)
  translatedHash = hashRun(hash, p, codes, from, copied, len) & 0x3fffffff
  return copied === 0 ? p : out + p.slice(copied)
}

/** Weight of the Perl class `\<c>` (d, D, s, S, w, W), or 0 when `c` is another escape. */
function perlWeight (c: number): number {
  switch (c) {
    case 100 /* d */: case 68 /* D */: return 10
    case 115 /* s */: case 83 /* S */: return 4
    case 119 /* w */: case 87 /* W */: return 30
    default: return 0
  }
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

/** What a group opens with: `(`, `(?P<name>`, `(?:`, `(?flags)` or `(?flags:`. */
const PLAIN = 0
const NAMED = 1
const NON_CAPTURING = 2
const FLAGS_ONLY = 3
const SCOPED_FLAGS = 4
/** Its JavaScript spelling, by kind. */
const GROUP_OPEN_JS: readonly string[] = ['(', '(', '(?:', '', '(?:']
/** Whether `(?x)` or `(?-x)` was among a flag group's flags. */
const UNSET = 0
const ON = 1
const OFF = 2

/**
 * scanGroupOpen's answer besides the end: the group's kind and what it does to verbose mode.
 * One object, overwritten by each call, rather than a result object per group.
 */
const group = { kind: PLAIN, verbose: UNSET }

/** Bits of the inline flags (`imsUuxR`), by character code; 0 for any other character. */
const FLAG_BITS = new Uint8Array(128)
for (let k = 0; k < FLAG_CHARS.length; k++) FLAG_BITS[FLAG_CHARS.charCodeAt(k)] = 1 << k

/**
 * Reads the opening of the group at `i` into `group`; returns the index after it. Its bytes
 * are at codes[from…] (see checkRegex): the flags of `(?i)` are read there, not from `p`.
 */
function scanGroupOpen (p: string, codes: Uint8Array, from: number, i: number): number {
  const len = p.length
  group.verbose = UNSET
  if (i + 1 >= len || codes[from + i + 1] !== 63 /* ? */) {
    group.kind = PLAIN
    return i + 1
  }
  // The two characters after `(?` decide the group's kind (-1 past the end: no match).
  const r0 = i + 2 < len ? codes[from + i + 2]! : -1
  const r1 = i + 3 < len ? codes[from + i + 3]! : -1
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
    group.kind = NAMED
    return close + 1
  }
  if (r0 === 58 /* : */) {
    group.kind = NON_CAPTURING
    return i + 3
  }
  // Inline flags: (?flags) or (?flags:…), e.g. (?i), (?-u), (?ix:…).
  let j = i + 2
  let negated = false
  let seen = 0 // bits of the flags so far
  for (; j < len; j++) {
    const f = codes[from + j]!
    if (f === 41 /* ) */ || f === 58 /* : */) break
    if (f === 45 /* - */ && !negated) { negated = true; continue }
    const bit = f < 128 ? FLAG_BITS[f]! : 0 // NON_ASCII is no flag
    if (bit === 0) throw new RegexFailure(`unknown regex flag or group syntax "(?${p.slice(i + 2, j + 1)}"`, j)
    if ((seen & bit) !== 0) throw new RegexFailure(`regex flag "${p[j]!}" is repeated`, j)
    seen |= bit
    if (f === 120 /* x */) group.verbose = negated ? OFF : ON
  }
  if (j >= len) throw new RegexFailure('regex has an unclosed "(?"', i)
  if (seen === 0 || codes[from + j - 1] === 45 /* - */) throw new RegexFailure('regex flag group needs at least one flag (and one after "-")', j)
  group.kind = codes[from + j] === 41 /* ) */ ? FLAGS_ONLY : SCOPED_FLAGS
  return j + 1
}
