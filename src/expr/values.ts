/**
 * Right-hand sides: one value after a comparison operator, or a set `{…}` after `in`.
 * Strings are lexed by the cursor; everything else is a bare token that literals.ts classifies
 * (integer, range, address, CIDR), since the language does not mark those apart.
 */
import { STRING_KIND, type CompareOp, type Literal, type SetLit } from './ast.js'
import { fail } from './diagnostic.js'
import { unexpected, type Cursor } from './lexer.js'
import { parseBareValue, parsed } from './literals.js'

/** Most elements in one `in {…}` set (a 4096-character rule cannot hold many more). */
export const MAX_SET_SIZE = 1024

/** The value after a comparison operator (not `in`); its kind is left in `c.kinds`. */
export function readValue (c: Cursor, op: CompareOp): Literal {
  const pos = c.pos
  if (c.atString()) {
    c.kinds = STRING_KIND
    return op === 'matches' ? c.readRegex() : c.readString()
  }
  if (c.peek() === 123 /* { */) fail('a set {…} needs the "in" operator', pos)
  if (c.peek() === 36 /* $ */) fail('named lists ($name) are not supported; list the values in a set {…}', pos)
  const end = c.bareEnd()
  if (end === pos) unexpected(c, `expected a value after "${op === 'strict_wildcard' ? 'strict wildcard' : op}"`)
  c.pos = end
  const lit = parseBareValue(c.src, pos, end)
  c.kinds = parsed.kind
  return lit
}

/** The set after `in`: values separated by spaces, in braces; the kinds it holds are left in `c.kinds`. */
export function readSet (c: Cursor): SetLit {
  const pos = c.pos
  if (c.peek() === 36 /* $ */) fail('named lists ($name) are not supported; list the values in a set {…}', pos)
  if (c.peek() !== 123 /* { */) unexpected(c, '"in" needs a set of values in braces, as in {80 443}')
  c.pos++
  const items: Literal[] = []
  let kinds = 0
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
      kinds |= STRING_KIND
      continue
    }
    const end = c.bareEnd()
    if (end === at) unexpected(c, 'expected a value or "}"')
    c.pos = end
    items.push(parseBareValue(c.src, at, end))
    kinds |= parsed.kind
  }
  c.pos++
  if (items.length === 0) fail('an empty set never matches', pos)
  c.kinds = kinds
  return { kind: 'set', items, pos }
}
