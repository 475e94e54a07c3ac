/**
 * Validation of `wildcard` / `strict wildcard` patterns, with Cloudflare's rules
 * (developers.cloudflare.com/ruleset-engine/rules-language/operators, "Wildcard matching"):
 *
 * - `*` matches zero or more characters; it is the only metacharacter (no `?`);
 * - `\*` is a literal star and `\\` a literal backslash; any other escape is invalid;
 * - two unescaped stars in a row (`**`) are invalid — they mean nothing more than one star,
 *   and wirefilter rejects them so that patterns stay unambiguous.
 *
 * The pattern is the string's bytes after the string-literal escapes, so `"\\*"` (quoted) and
 * `r"\*"` (raw) are both a literal star.
 */
import { scratchCodesOf } from './text.js'

/** Most stars in one pattern; each star is a backtracking point for the matcher. */
export const MAX_WILDCARD_STARS = 64

export interface WildcardProblem {
  readonly message: string
  /** Index in the pattern bytes. */
  readonly index: number
}

const STAR = 42
const BACKSLASH = 92

/**
 * Checks a wildcard pattern; undefined when it is valid. `codes`, `from`: the pattern's bytes
 * when the caller has them, as for checkRegex (regex.ts).
 *
 * @example
 *   checkWildcard('/admin/*')  // → undefined
 *   checkWildcard('/admin/**') // → { message: 'wildcard pattern has "**"; …', index: 7 }
 */
export function checkWildcard (pattern: string, codes?: Uint8Array, from = 0): WildcardProblem | undefined {
  if (codes === undefined) {
    codes = scratchCodesOf(pattern)
    from = 0
  }
  let stars = 0
  let previousWasStar = false
  for (let i = 0; i < pattern.length; i++) {
    const c = codes[from + i]!
    if (c === BACKSLASH) {
      // The message quotes the character itself, which the bytes do not hold when non-ASCII.
      const next = i + 1 < pattern.length ? pattern.charCodeAt(i + 1) : -1
      if (next !== STAR && next !== BACKSLASH) {
        return next === -1
          ? { message: 'wildcard pattern ends with a lone backslash; write \\\\ for a literal one', index: i }
          : { message: `invalid escape "\\${String.fromCharCode(next)}" in a wildcard pattern; only \\* and \\\\ are escapes`, index: i }
      }
      i++
      previousWasStar = false
      continue
    }
    if (c === STAR) {
      if (previousWasStar) return { message: 'wildcard pattern has "**"; one * already matches any run of characters', index: i - 1 }
      if (++stars > MAX_WILDCARD_STARS) return { message: `wildcard pattern has more than ${MAX_WILDCARD_STARS} stars`, index: i }
      previousWasStar = true
      continue
    }
    previousWasStar = false
  }
  return undefined
}
