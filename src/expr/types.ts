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

/** Element type of an Array<T> or value type of a Map<T>; the caller has checked which it is. */
export function elementType (t: Type): Type {
  return t.slice(t.indexOf('<') + 1, -1) as Type
}

export function arrayOf (t: Type): Type {
  return `Array<${t}>`
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
  /** The lookup again, bucketed by name length: see findField. */
  readonly byLength: ReadonlyArray<readonly KeyedEntry[] | undefined>
}

/** A lookup entry with the name or alias it is found under. */
interface KeyedEntry { readonly key: string, readonly last: number, readonly entry: FieldEntry }

export interface FieldEntry {
  readonly name: string
  readonly def: FieldDef
  /** Position of `name` in `Scheme.names`: fields used are collected and sorted as ranks. */
  readonly rank: number
}

/** Builds a frozen scheme from its tables (a Map for the lookup: it runs once per field use). */
export function defineScheme (kind: RuleKind, fields: Record<string, FieldDef>, aliases: Record<string, string>, hasPhase: boolean): Scheme {
  const names = Object.keys(fields).sort()
  const lookup = new Map<string, FieldEntry>()
  for (const [rank, name] of names.entries()) lookup.set(name, Object.freeze({ name, def: Object.freeze(fields[name]!), rank }))
  for (const [alias, name] of Object.entries(aliases)) {
    const target = lookup.get(name)
    if (target === undefined) throw new Error(`alias ${alias} names unknown field ${name}`)
    lookup.set(alias, target)
  }
  const byLength: KeyedEntry[][] = []
  for (const [key, entry] of lookup) (byLength[key.length] ??= []).push({ key, last: key.charCodeAt(key.length - 1), entry })
  // Holes would make the array sparse (dictionary mode); findField wants a fast indexed load.
  for (let i = 0; i < byLength.length; i++) byLength[i] ??= []
  return Object.freeze({ kind, fields: Object.freeze(fields), aliases: Object.freeze(aliases), hasPhase, lookup, names: Object.freeze(names), byLength })
}

/**
 * Looks a field up by name or alias, as `scheme.lookup.get(name)` but faster for a name just
 * sliced from the source: a Map must hash the new string before it can compare, and V8 hashes
 * a sliced string (any slice of 13 characters or more) in the runtime. Here the name length
 * and last character narrow the scheme to a candidate or two, and one `===` confirms. This
 * runs once per field use. (A char-code loop instead of `===` measured slower: charCodeAt on a
 * sliced string leaves the fast path on every character.)
 *
 * @example
 *   findField(wafScheme, 'cf.bot_management.ja4')?.name // → 'tls.ja4'
 */
export function findField (scheme: Scheme, name: string): FieldEntry | undefined {
  const bucket = scheme.byLength[name.length]
  if (bucket === undefined) return undefined
  const last = name.charCodeAt(name.length - 1)
  for (let i = 0; i < bucket.length; i++) {
    const k = bucket[i]!
    if (k.last === last && k.key === name) return k.entry
  }
  return undefined
}

/** Looks a field up by name or alias; returns the canonical name, or undefined. */
export function resolveField (scheme: Scheme, name: string): string | undefined {
  return findField(scheme, name)?.name
}
