/**
 * How the expression module reports a problem: an internal exception carrying the source
 * offset (thrown by the lexer, parser and checker, caught once in check.ts), its conversion to
 * the public `{ message, offset, line, column }`, and "did you mean" suggestions.
 */

/** Thrown inside src/expr only; never escapes `checkExpression`. */
export class ExpressionError extends Error {
  readonly offset: number
  constructor (message: string, offset: number) {
    super(message)
    this.name = 'ExpressionError'
    this.offset = offset
  }
}

export interface ExpressionDiagnostic {
  /** Ends with ` at <line>:<column>`, e.g. `unknown field "http.foo" at 1:1`. */
  readonly message: string
  /** UTF-16 offset into the expression text. */
  readonly offset: number
  /** 1-based. */
  readonly line: number
  /** 1-based, counted in code points so a caret lines up under non-ASCII text. */
  readonly column: number
}

export function fail (message: string, offset: number): never {
  throw new ExpressionError(message, offset)
}

/** Line and column of an offset; lines end at `\n` (a `\r` before it is part of the line). */
export function locate (text: string, offset: number): { line: number, column: number } {
  const end = Math.min(Math.max(offset, 0), text.length)
  let line = 1
  let lineStart = 0
  for (let i = 0; i < end; i++) {
    if (text.charCodeAt(i) === 10) { line++; lineStart = i + 1 }
  }
  let column = 1
  for (let i = lineStart; i < end; i++) {
    const c = text.charCodeAt(i)
    // The low half of a surrogate pair does not start a new column.
    if (c < 0xdc00 || c > 0xdfff) column++
  }
  return { line, column }
}

export function toDiagnostic (text: string, e: ExpressionError): ExpressionDiagnostic {
  const { line, column } = locate(text, e.offset)
  return { message: `${e.message} at ${line}:${column}`, offset: e.offset, line, column }
}

/**
 * The closest candidate within edit distance 2 (and less than half the name), for
 * `unknown field "http.hots" (did you mean "http.host"?)`. Only runs on the error path.
 */
export function suggest (name: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined
  let bestDistance = Math.min(3, Math.ceil(name.length / 2))
  for (const c of candidates) {
    if (Math.abs(c.length - name.length) >= bestDistance) continue
    const d = editDistance(name, c, bestDistance)
    if (d < bestDistance) { best = c; bestDistance = d }
  }
  return best
}

/** Levenshtein distance, giving up (returning `limit`) once every row exceeds it. */
function editDistance (a: string, b: string, limit: number): number {
  let prev = new Array<number>(b.length + 1)
  let cur = new Array<number>(b.length + 1)
  for (let j = 0; j <= b.length; j++) prev[j] = j
  for (let i = 1; i <= a.length; i++) {
    cur[0] = i
    let rowMin = i
    for (let j = 1; j <= b.length; j++) {
      const cost = a.charCodeAt(i - 1) === b.charCodeAt(j - 1) ? 0 : 1
      const v = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + cost)
      cur[j] = v
      if (v < rowMin) rowMin = v
    }
    if (rowMin >= limit) return limit
    const t = prev; prev = cur; cur = t
  }
  return prev[b.length]!
}
