/**
 * The words of the language — English operators, function names, and the field names and
 * aliases of every scheme — as one Vocabulary, and what each word id means. The lexer finds a
 * word's id while scanning it (Cursor.scanWord); the parser reads its meaning here, in arrays
 * indexed by id, where id 0 (not a known word) means nothing.
 */
import type { CompareOp, LogicalOp } from './ast.js'
import { fail } from './diagnostic.js'
import { functions } from './functions.js'
import { smartFirewallScheme } from './schemes/smart-firewall.js'
import { wafScheme } from './schemes/waf.js'
import type { FieldEntry, Scheme } from './types.js'
import { Vocabulary } from './vocabulary.js'

/** Every English keyword. */
export const KEYWORDS: ReadonlySet<string> = new Set([
  'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'contains', 'matches', 'wildcard', 'strict', 'in', 'bitwise_and', 'and', 'or', 'xor', 'not',
])

/** `AND` → fails saying that English operators are lowercase; otherwise returns. */
export function lowercaseHint (word: string, pos: number): void {
  const lower = word.toLowerCase()
  if (lower !== word && KEYWORDS.has(lower)) fail(`English operators are lowercase: write "${lower}", not "${word}"`, pos)
}

const COMPARE_WORDS: Readonly<Record<string, CompareOp>> = {
  eq: 'eq', ne: 'ne', lt: 'lt', le: 'le', gt: 'gt', ge: 'ge', contains: 'contains', matches: 'matches', wildcard: 'wildcard', in: 'in', bitwise_and: 'bitwise_and',
}
const LOGICAL_WORDS: Readonly<Record<string, LogicalOp>> = { and: 'and', or: 'or', xor: 'xor' }

/** Every scheme a rule can be checked against: their fields are words too. */
const schemes: readonly Scheme[] = [wafScheme, smartFirewallScheme]

export const vocabulary = new Vocabulary([...new Set([...KEYWORDS, ...functions.keys(), ...schemes.flatMap((s) => [...s.lookup.keys()])])])

/** One entry per word id (undefined where the word means nothing of that sort). */
function byId<T> (meaning: (word: string) => T | undefined): ReadonlyArray<T | undefined> {
  return vocabulary.words.map((w, id) => (id === 0 ? undefined : meaning(w)))
}

export const compareOpOf = byId((w) => Object.hasOwn(COMPARE_WORDS, w) ? COMPARE_WORDS[w] : undefined)
export const logicalOpOf = byId((w) => Object.hasOwn(LOGICAL_WORDS, w) ? LOGICAL_WORDS[w] : undefined)
export const isKeyword = byId((w) => KEYWORDS.has(w) ? true : undefined)
export const functionOf = byId((w) => functions.get(w))

export const NOT_WORD = vocabulary.idOf('not')
export const STRICT_WORD = vocabulary.idOf('strict')
export const WILDCARD_WORD = vocabulary.idOf('wildcard')

const fieldTables = new Map(schemes.map((s) => [s, byId((w) => s.lookup.get(w))]))

/**
 * The fields of `scheme` by word id, for the check context.
 *
 * @example
 *   fieldsById(wafScheme)[vocabulary.idOf('cf.bot_management.ja4')]?.name // → 'tls.ja4'
 */
export function fieldsById (scheme: Scheme): ReadonlyArray<FieldEntry | undefined> {
  const table = fieldTables.get(scheme)
  if (table === undefined) throw new Error(`scheme ${scheme.kind} is not in the vocabulary`)
  return table
}
