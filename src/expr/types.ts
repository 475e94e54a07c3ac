/**
 * Value types of the filter-expression language and the shape of a field scheme.
 *
 * Types are plain strings (`Bytes`, `Array<Bytes>`, `Map<Array<Bytes>>`) rather than objects:
 * equality is `===`, printing a type in an error message is free, and a scheme table reads like
 * Cloudflare's field reference. wirefilter's names are kept (Bytes, not String) because the
 * language is wirefilter's; Cloudflare's docs call Bytes "String" and Int "Number"/"Integer".
 */

export type ScalarType = 'Bool' | 'Int' | 'Bytes' | 'Ip'
export type Type = ScalarType | `Array<${string}>` | `Map<${string}>`

export const BOOL = 'Bool' as const
export const INT = 'Int' as const
export const BYTES = 'Bytes' as const
export const IP = 'Ip' as const
export const ARRAY_BOOL = 'Array<Bool>' as const

export function isArrayType (t: Type): boolean {
  return t.charCodeAt(0) === 65 /* A */ && t.charCodeAt(1) === 114 /* r */
}

export function isMapType (t: Type): boolean {
  return t.charCodeAt(0) === 77 /* M */
}

/**
 * One string object per type. The types of the schemes and of the checker's messages are
 * source literals, which V8 keeps once each (internalised): comparing two of them is a pointer
 * compare, and a Map finds them by a hash stored in the string. A type computed by slicing or
 * by a template is a new string, which makes every later compare and lookup read its
 * characters; so computed types are swapped for the literal of the same text, and memoised.
 * The set is small and closed (scheme types, and arrays of function results, nested at most as
 * deep as an expression can nest), and capped anyway.
 */
const types = new Map<string, Type>()
const elementTypes = new Map<Type, Type>()
const arrayTypes = new Map<Type, Type>()
const MAX_TYPES = 1024

/** The canonical string object for a type's text. */
export function internType (t: Type): Type {
  const known = types.get(t)
  if (known !== undefined) return known
  if (types.size >= MAX_TYPES) { types.clear(); elementTypes.clear(); arrayTypes.clear() }
  types.set(t, t)
  return t
}
for (const t of [BOOL, INT, BYTES, IP, ARRAY_BOOL, 'Array<Int>', 'Array<Bytes>', 'Array<Ip>', 'Map<Array<Bytes>>'] as const) internType(t)

/** Element type of an Array<T> or value type of a Map<T>; the caller has checked which it is. */
export function elementType (t: Type): Type {
  let e = elementTypes.get(t)
  if (e === undefined) {
    e = internType(t.slice(t.indexOf('<') + 1, -1) as Type)
    elementTypes.set(t, e)
  }
  return e
}

export function arrayOf (t: Type): Type {
  let a = arrayTypes.get(t)
  if (a === undefined) {
    a = internType(`Array<${t}>`)
    arrayTypes.set(t, a)
  }
  return a
}

/** A rule kind: which field scheme its expression is checked against (SPEC §2.4). */
export type RuleKind = 'waf_rule' | 'smart_firewall_rule'

/** WAF rules run in the request phase or, with response fields, in the response phase. */
export type Phase = 'request' | 'response'

export interface FieldDef {
  readonly type: Type
  /** `response` for fields that only exist once the origin has answered; absent otherwise. */
  readonly phase?: 'response'
}

export interface Scheme {
  readonly kind: RuleKind
  /** Canonical field name → definition. */
  readonly fields: Readonly<Record<string, FieldDef>>
  /** Accepted alternative name → canonical name (e.g. Cloudflare's cf.bot_management.ja4). */
  readonly aliases: Readonly<Record<string, string>>
  /** Whether rules of this kind have a phase (only WAF rules do). */
  readonly hasPhase: boolean
  /** Name or alias → canonical name, definition and rank; built once from the tables above. */
  readonly lookup: ReadonlyMap<string, FieldEntry>
  /** Canonical names, sorted; `FieldEntry.rank` indexes it. */
  readonly names: readonly string[]
}

export interface FieldEntry {
  readonly name: string
  readonly def: FieldDef
  /** Position of `name` in `Scheme.names`: fields used are collected and sorted as ranks. */
  readonly rank: number
}

/** Builds a frozen scheme from its tables. */
export function defineScheme (kind: RuleKind, fields: Record<string, FieldDef>, aliases: Record<string, string>, hasPhase: boolean): Scheme {
  const names = Object.keys(fields).sort()
  const lookup = new Map<string, FieldEntry>()
  for (const [rank, name] of names.entries()) {
    const def = fields[name]!
    internType(def.type) // a literal in the scheme's table: the canonical object from now on
    lookup.set(name, Object.freeze({ name, def: Object.freeze(def), rank }))
  }
  for (const [alias, name] of Object.entries(aliases)) {
    const target = lookup.get(name)
    if (target === undefined) throw new Error(`alias ${alias} names unknown field ${name}`)
    lookup.set(alias, target)
  }
  return Object.freeze({ kind, fields: Object.freeze(fields), aliases: Object.freeze(aliases), hasPhase, lookup, names: Object.freeze(names) })
}

/**
 * Looks a field up by name or alias. (The parser does not: it knows a field by its word id,
 * see words.ts.)
 *
 * @example
 *   findField(wafScheme, 'cf.bot_management.ja4')?.name // → 'tls.ja4'
 */
export function findField (scheme: Scheme, name: string): FieldEntry | undefined {
  return scheme.lookup.get(name)
}

/** Looks a field up by name or alias; returns the canonical name, or undefined. */
export function resolveField (scheme: Scheme, name: string): string | undefined {
  return findField(scheme, name)?.name
}
