/**
 * The lexical pieces of Rust regex syntax (docs.rs/regex, "Syntax": escapes, Unicode classes,
 * bracketed classes with nesting, set operations and ASCII classes), each checked and rewritten
 * into an equivalent-for-validation JavaScript `u`-mode fragment. See regex.ts for the why.
 */

/** A problem at an index of the pattern; caught by checkRegex. */
export class RegexFailure extends Error {
  readonly index: number
  constructor (message: string, index: number) {
    super(message)
    this.index = index
  }
}

export interface Emitted {
  /** JavaScript fragment. */
  readonly js: string
  /** Estimated compiled size. */
  readonly weight: number
  /** Index after the construct. */
  readonly end: number
  /** The code point when the construct is one literal character (for class ranges). */
  readonly cp?: number
}

/** Rust regex-syntax allows escaping any ASCII punctuation (is_escapeable_character). */
function isEscapablePunctuation (c: number): boolean {
  return c >= 0x20 && c < 0x7f && !((c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 60 || c === 62)
}

const SIMPLE: Readonly<Record<string, number>> = { a: 7, f: 12, t: 9, n: 10, r: 13, v: 11 }
const PERL_WEIGHT: Readonly<Record<string, number>> = { d: 10, D: 10, s: 4, S: 4, w: 30, W: 30 }
const POSIX = new Set(['alnum', 'alpha', 'ascii', 'blank', 'cntrl', 'digit', 'graph', 'lower', 'print', 'punct', 'space', 'upper', 'word', 'xdigit'])

function literal (cp: number, end: number): Emitted {
  return { js: `\\u{${cp.toString(16)}}`, weight: 1, end, cp }
}

/** The escape whose backslash is at `i`. `inClass`: inside `[…]`, where anchors are errors. */
export function scanEscape (p: string, i: number, inClass: boolean): Emitted {
  if (i + 1 >= p.length) throw new RegexFailure('regex ends with a lone backslash', i)
  const n = p[i + 1]!
  const c = p.charCodeAt(i + 1)
  if (c >= 48 && c <= 57) {
    // The whole run of digits, so that an octal-looking `\101` is shown as written.
    let end = i + 2
    while (end < p.length && p.charCodeAt(end) >= 48 && p.charCodeAt(end) <= 57) end++
    throw new RegexFailure(`backreferences are not supported in Rust regex syntax ("${p.slice(i, end)}")`, i)
  }
  if (n === 'k') throw new RegexFailure('backreferences are not supported in Rust regex syntax ("\\k")', i)
  if (Object.hasOwn(SIMPLE, n)) return literal(SIMPLE[n]!, i + 2)
  if (Object.hasOwn(PERL_WEIGHT, n)) return { js: '\\' + n, weight: PERL_WEIGHT[n]!, end: i + 2 }
  if (n === 'x' || n === 'u' || n === 'U') return scanHex(p, i)
  if (n === 'p' || n === 'P') return scanProperty(p, i)
  if (n === 'b' || n === 'B' || n === 'A' || n === 'z' || n === '<' || n === '>') {
    if (inClass) throw new RegexFailure(`"\\${n}" is an anchor and cannot be used in a character class`, i)
    let end = i + 2
    // Rust ≥ 1.10 word-boundary forms: \b{start}, \b{end}, \b{start-half}, \b{end-half}.
    const m = n === 'b' ? /^\{(start|end|start-half|end-half)\}/.exec(p.slice(end)) : null
    if (m !== null) end += m[0].length
    const js = n === 'A' ? '^' : n === 'z' ? '$' : n === 'B' ? '\\B' : '\\b'
    return { js, weight: 1, end }
  }
  if (isEscapablePunctuation(c)) return literal(c, i + 2)
  throw new RegexFailure(`escape "\\${String.fromCodePoint(p.codePointAt(i + 1)!)}" is not valid in Rust regex syntax`, i)
}

/** `\xHH`, `\x{H…}`, `\uHHHH`, `\u{H…}`, `\UHHHHHHHH`, `\U{H…}`. */
function scanHex (p: string, i: number): Emitted {
  const n = p[i + 1]!
  let digits: string
  let end: number
  if (p[i + 2] === '{') {
    const close = p.indexOf('}', i + 3)
    digits = close === -1 ? '' : p.slice(i + 3, close)
    end = close + 1
    if (!/^[0-9A-Fa-f]{1,8}$/.test(digits)) throw new RegexFailure(`"\\${n}{…}" needs 1 to 8 hex digits`, i)
  } else {
    const width = n === 'x' ? 2 : n === 'u' ? 4 : 8
    digits = p.slice(i + 2, i + 2 + width)
    end = i + 2 + width
    if (!new RegExp(`^[0-9A-Fa-f]{${width}}$`).test(digits)) throw new RegexFailure(`"\\${n}" needs ${width} hex digits`, i)
  }
  const cp = parseInt(digits, 16)
  if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) throw new RegexFailure(`"\\${n}${p.slice(i + 2, end)}" is not a Unicode scalar value`, i)
  return literal(cp, end)
}

const validProperties = new Set<string>()

/** `\pL`, `\p{Greek}`, `\P{sc=Greek}`…: Rust names are matched loosely; JS wants exact ones. */
function scanProperty (p: string, i: number): Emitted {
  let name: string
  let end: number
  if (p[i + 2] === '{') {
    const close = p.indexOf('}', i + 3)
    if (close === -1) throw new RegexFailure('unclosed Unicode class "\\p{"', i)
    name = p.slice(i + 3, close)
    end = close + 1
  } else {
    if (i + 2 >= p.length) throw new RegexFailure('"\\p" needs a class name, as in \\pL or \\p{Greek}', i)
    name = p[i + 2]!
    end = i + 3
  }
  // Rust matches names loosely (case, spaces, `_` and `-` ignored), so that is the cache key.
  const key = name.toLowerCase().replace(/[\s_-]+/g, '')
  let known = validProperties.has(key)
  if (!known) {
    known = resolveProperty(name) !== null
    // Only valid names are cached: they are a finite set, so the cache cannot be flooded.
    if (known) validProperties.add(key)
  }
  if (!known) throw new RegexFailure(`unknown Unicode class "${name}"`, i)
  // The class itself is emitted as a placeholder atom: V8 expands \p{…} into its code point
  // ranges while parsing (~0.2 ms for \p{L}), so 800 of them would take longer than any rule
  // should; validating the name once is what matters, and it is done above.
  return { js: '\\u{0}', weight: 30, end }
}

function resolveProperty (name: string): string | null {
  const raw = name.trim().replace(/\s*[:=]\s*/, '=')
  if (!/^[A-Za-z0-9_ =-]+$/.test(raw)) return null
  const title = raw.split('=').map((part) => part.split(/[\s_-]+/).filter((w) => w !== '')
    .map((w) => w[0]!.toUpperCase() + w.slice(1).toLowerCase()).join('_')).join('=')
  const aliasFixed = title.replace(/^(Sc|Script|Scx|Gc|General_category)=/i, (m) => m.toLowerCase() === 'general_category=' ? 'General_Category=' : m.toLowerCase())
  for (const candidate of [raw, title, aliasFixed, `Script=${raw}`, `Script=${title}`]) {
    try {
      new RegExp(`\\p{${candidate}}`, 'u')
      return candidate
    } catch { /* try the next spelling */ }
  }
  return null
}

/**
 * A bracketed class at `i`, with Rust's nesting (`[a[^b]]`), set operations (`&&`, `--`, `~~`)
 * and ASCII classes (`[[:alpha:]]`). Emitted as the union of its parts: not the same set, but
 * compiling it is all the validation needs, and every range and escape has been checked here.
 */
export function scanClass (p: string, i: number, verbose: boolean): Emitted {
  const open = i
  let depth = 1
  let first = true
  let parts = ''
  let count = 0
  i++
  if (p[i] === '^') i++
  while (depth > 0) {
    if (i >= p.length) throw new RegexFailure('unclosed character class "["', open)
    const ch = p[i]!
    if (verbose && (ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r')) { i++; continue }
    if (ch === ']' && !first) { depth--; i++; continue }
    if (ch === '[') {
      if (p[i + 1] === ':') {
        const close = p.indexOf(':]', i + 2)
        const name = close === -1 ? '' : p.slice(i + 2, close).replace(/^\^/, '')
        if (!POSIX.has(name)) throw new RegexFailure(`unknown ASCII class "[:${name}:]"`, i)
        parts += '\\x00-\\x7f'
        count++
        i = close + 2
        first = false
        continue
      }
      depth++
      i += p[i + 1] === '^' ? 2 : 1
      first = true
      continue
    }
    if ((ch === '&' || ch === '-' || ch === '~') && p[i + 1] === ch && !first) {
      i += 2
      continue
    }
    const atomStart = i
    const lo = classAtom(p, i)
    i = lo.end
    first = false
    count++
    if (p[i] === '-' && p[i + 1] !== ']' && p[i + 1] !== '-' && i + 1 < p.length && lo.cp !== undefined) {
      const hi = classAtom(p, i + 1)
      if (hi.cp === undefined) throw new RegexFailure('a class range needs single characters at both ends', i)
      if (hi.cp < lo.cp) throw new RegexFailure(`invalid class range "${p.slice(atomStart, hi.end)}": its start is above its end`, atomStart)
      parts += `${lo.js}-${hi.js}`
      i = hi.end
    } else {
      parts += lo.js
    }
  }
  return { js: `[${parts}]`, weight: 1 + Math.min(count, 50), end: i }
}

function classAtom (p: string, i: number): Emitted {
  if (p[i] === '\\') return scanEscape(p, i, true)
  const cp = p.codePointAt(i)!
  return literal(cp, i + (cp > 0xffff ? 2 : 1))
}
