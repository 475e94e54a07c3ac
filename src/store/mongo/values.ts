/**
 * What may reach a query: plain values, checked at run time. The types already say `string`,
 * but a filter built from an object a caller smuggled through (`{ $ne: '' }` where an id was
 * expected) would become an operator; these checks make that impossible rather than unlikely.
 */
import { ThreatfeedError } from '../../errors.js'
import type { LabelValue } from '../types.js'
import type { Pair } from './collections.js'

export function text (v: unknown): string {
  if (typeof v !== 'string') throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new TypeError('store: expected a string value') })
  return v
}

export function num (v: unknown): number {
  if (typeof v !== 'number' || Number.isNaN(v)) throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new TypeError('store: expected a number value') })
  return v
}

export function toPairs<V> (map: Record<string, V>): Array<Pair<V>> {
  return Object.entries(map).map(([k, v]) => ({ k, v }))
}

/** Object.fromEntries defines own properties: a `__proto__` key stays data. */
export function fromPairs<V extends LabelValue> (pairs: Array<Pair<V>>): Record<string, V> {
  return Object.fromEntries(pairs.map((p) => [p.k, p.v]))
}
