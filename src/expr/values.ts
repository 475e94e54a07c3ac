/**
 * Right-hand sides: one value after a comparison operator, or a set `{…}` after `in`.
 * Strings are lexed by the cursor; everything else is a bare token that literals.ts classifies
 * (integer, range, address, CIDR), since the language does not mark those apart.
 */
import type { CompareOp, Literal, SetLit } from './ast.js'
import { fail } from './diagnostic.js'
import type { Cursor } from './lexer.js'
import { parseBareValue } from './literals.js'
import { unexpected } from './operators.js'

/** Most elements in one `in {…}` set (a 4096-character rule cannot hold many more). */
export const MAX_SET_SIZE = 1024

/** The value after a comparison operator (not `in`). */
export function readValue (c: Cursor, op: CompareOp): Literal {
  const pos = c.pos
  if (c.atString()) return c.readString()
  if (c.peek() === 123 /* { */) fail('a set {…} needs the "in" operator', pos)
  if (c.peek() === 36 /* $ */) fail('named lists ($name) are not supported; list the values in a set {…}', pos)
  const end = c.bareEnd()
  if (end === pos) unexpected(c, `expected a value after "${op === 'strict_wildcard' ? 'strict wildcard' : op}"`)
  c.pos = end
  return parseBareValue(c.src, pos, end)
}

/** The set after `in`: values separated by spaces, in braces. */
export function readSet (c: Cursor): SetLit {
  const pos = c.pos
  if (c.peek() === 36 /* $ */) fail('named lists ($name) are not supported; list the values in a set {…}', pos)
  if (c.peek() !== 123 /* { */) unexpected(c, '"in" needs a set of values in braces, as in {80 443}')
  c.pos++
  const items: Literal[] = []
  for (;;) {
    c.skipSpace()
    const ch = c.peek()
    if (ch === 125 /* } */) break
    if (ch === -1) fail('unterminated set (missing "}")', pos)
    if (ch === 44 /* , */) fail('set values are separated by spaces, not commas', c.pos)
    if (items.length === MAX_SET_SIZE) fail(`a set holds at most ${MAX_SET_SIZE} values`, c.pos)
    const at = c.pos
    if (c.atString()) {
      items.push(c.readString())
      continue
    }
    const end = c.bareEnd()
    if (end === at) unexpected(c, 'expected a value or "}"')
    c.pos = end
    items.push(parseBareValue(c.src, at, end))
  }
  c.pos++
  if (items.length === 0) fail('an empty set never matches', pos)
  return { kind: 'set', items, pos }
}
