/**
 * The English keywords (recognised by the lexer as words of the vocabulary, words.ts), and the
 * two messages that quote what was found instead ("English operators are lowercase",
 * "expected …, found …").
 */
import { fail } from './diagnostic.js'
import type { Cursor } from './lexer.js'

/** Every English keyword, for the "operators are lowercase" hint. */
export const KEYWORDS = new Set([
  'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'contains', 'matches', 'wildcard', 'strict', 'in', 'bitwise_and', 'and', 'or', 'xor', 'not',
])

/** `AND` → fails saying that English operators are lowercase; otherwise returns. */
export function lowercaseHint (word: string, pos: number): void {
  const lower = word.toLowerCase()
  if (lower !== word && KEYWORDS.has(lower)) fail(`English operators are lowercase: write "${lower}", not "${word}"`, pos)
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
