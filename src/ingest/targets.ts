/**
 * A signal's target (v1 `ip`/`asn`/`country`, v2 `rule.target`) → a normalized store Target,
 * shared by both versions so they refuse and normalize identically (DECISIONS §3):
 * - exactly one of ip, asn, country, an empty string counting as absent;
 * - ip: parseTarget's normalization and refusals (src/net/target.ts);
 * - asn: `AS<digits>` in any case, 1..4294967295, present in the ASN database;
 * - country: an assigned ISO 3166-1 alpha-2 code in any case, stored uppercase.
 * Letter case is folded as ASCII only: Unicode case mapping would make `ıt` (dotless i) read as IT
 * and `ſe` (long s) as SE, or `AS` out of a Kelvin sign — such input fails the entry.
 */
import { isAssignedCountryCode } from '../geo/countries.js'
import { packCountryCode, unpackCountryCode } from '../geo/record-keys.js'
import { parseTarget } from '../net/target.js'
import type { Target } from '../store/types.js'
import { joinPath, type EntryFailure } from './validators.js'

const MAX_ASN = 4_294_967_295
const FIELDS = ['ip', 'asn', 'country'] as const

export interface TargetChecks {
  /** Whether the ASN has at least one network in the configured ASN database; null skips the check. */
  readonly asnExists: ((asn: number) => boolean) | null
}

export type TargetResult = { readonly ok: true, readonly target: Target } | { readonly ok: false, readonly failure: EntryFailure }

/**
 * Normalizes the target fields of `holder` (the v1 entry, or a v2 `rule.target`); `prefix` is the
 * holder's path for messages. Types were checked by the schema: present fields are strings.
 *
 * @example
 *   normalizeTarget({ ip: '', country: 'de' }, '', { asnExists: null })
 *   // { ok: true, target: { type: 'country', value: 'DE' } }
 */
export function normalizeTarget (holder: { ip?: string, asn?: string, country?: string }, prefix: string, checks: TargetChecks): TargetResult {
  let field: (typeof FIELDS)[number] | null = null
  let count = 0
  for (const f of FIELDS) {
    const v = holder[f]
    if (v !== undefined && v !== '') {
      field = f
      count++
    }
  }
  if (count !== 1 || field === null) {
    const given = FIELDS.filter((f) => holder[f] !== undefined && holder[f] !== '')
    const message = count === 0
      ? 'exactly one of ip, asn, country is required (none was given)'
      : `exactly one of ip, asn, country is allowed (got ${given.join(', ')})`
    const value = Object.fromEntries(FIELDS.filter((f) => holder[f] !== undefined).map((f) => [f, holder[f]]))
    return { ok: false, failure: { path: prefix, message, value } }
  }
  const text = holder[field]!
  const path = joinPath(prefix, [field])
  if (field === 'ip') {
    const r = parseTarget(text)
    return r.ok
      ? { ok: true, target: { type: 'ip', value: r.cidr } }
      : { ok: false, failure: { path, message: r.reason, value: text } }
  }
  if (field === 'asn') {
    const asn = parseAsn(text)
    if (asn < 0) return { ok: false, failure: { path, message: `must be AS<digits> with a number from 1 to ${MAX_ASN}`, value: text } }
    if (checks.asnExists !== null && !checks.asnExists(asn)) {
      return { ok: false, failure: { path, message: `AS${asn} is not in the ASN database`, value: text } }
    }
    return { ok: true, target: { type: 'asn', value: `AS${asn}` } }
  }
  const packed = packCountryCode(text)
  const cc = packed < 0 ? '' : unpackCountryCode(packed)
  if (cc === '' || !isAssignedCountryCode(cc)) {
    return { ok: false, failure: { path, message: 'must be an ISO-3166 alpha-2 code', value: text } }
  }
  return { ok: true, target: { type: 'country', value: cc } }
}

/**
 * `AS<digits>` (any case) → the number, or -1. Leading zeros are allowed and dropped (AS013335 is
 * AS13335): the number is the identity, and the stored form is canonical.
 */
export function parseAsn (text: string): number {
  if (text.length < 3 || text.length > 16) return -1
  const a = text.charCodeAt(0) | 0x20
  const s = text.charCodeAt(1) | 0x20
  if (a !== 0x61 || s !== 0x73) return -1
  let n = 0
  for (let i = 2; i < text.length; i++) {
    const d = text.charCodeAt(i) - 0x30
    if (d < 0 || d > 9) return -1
    n = n * 10 + d
  }
  return n >= 1 && n <= MAX_ASN ? n : -1
}
