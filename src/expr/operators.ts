/**
 * The operator vocabulary: English keywords, recognised on char codes
 * without slicing (these checks run after every operand), and the two messages that quote
 * what was found instead ("English operators are lowercase", "expected …, found …").
 */
import type { CompareOp } from './ast.js'
import { fail } from './diagnostic.js'
import type { Cursor } from './lexer.js'

/** Every English keyword, for the "operators are lowercase" hint. */
export const KEYWORDS = new Set([
  'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'contains', 'matches', 'wildcard', 'strict', 'in', 'bitwise_and', 'and', 'or', 'xor', 'not',
])

/**
 * The English comparison operator spelled by src[start, end), decided on char codes without
 * slicing (this runs after every operand).
 */
export function operatorWord (src: string, start: number, end: number): CompareOp | undefined {
  const len = end - start
  if (len === 2) {
    const a = src.charCodeAt(start)
    const b = src.charCodeAt(start + 1)
    if (b === 113 /* q */) return a === 101 /* e */ ? 'eq' : undefined
    if (b === 101 /* e */) return a === 110 /* n */ ? 'ne' : a === 108 /* l */ ? 'le' : a === 103 /* g */ ? 'ge' : undefined
    if (b === 116 /* t */) return a === 108 ? 'lt' : a === 103 ? 'gt' : undefined
    return a === 105 /* i */ && b === 110 /* n */ ? 'in' : undefined
  }
  if (len === 8) return src.startsWith('contains', start) ? 'contains' : src.startsWith('wildcard', start) ? 'wildcard' : undefined
  if (len === 7) return src.startsWith('matches', start) ? 'matches' : undefined
  if (len === 11) return src.startsWith('bitwise_and', start) ? 'bitwise_and' : undefined
  return undefined
}

/** Whether a word is an English operator or `not`/`strict`, by length and char codes. */
export function isKeyword (w: string): boolean {
  switch (w.length) {
    case 2: return operatorWord(w, 0, 2) !== undefined || w === 'or'
    case 3: return w === 'and' || w === 'xor' || w === 'not'
    case 6: return w === 'strict'
    case 7: case 8: case 11: return operatorWord(w, 0, w.length) !== undefined
    default: return false
  }
}

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
