/**
 * The in-memory geo index: country → networks and ASN → networks, built once per database load
 * (see load.ts) and shared with worker threads through SharedArrayBuffers.
 */
import { NetworkSet } from '../net/network-set.js'
import type { PackedPrefixes } from '../net/packed.js'
import type { IntervalTableData } from './interval-table.js'
import { NO_RECORD, emptyTable, findKey, keyIntervals, unionIntervals } from './interval-table.js'
import { packCountryCode, unpackCountryCode } from './record-keys.js'

/** Where an index came from, for logs, /readyz and `geo lookup`. */
export interface GeoSourceInfo {
  readonly kind: 'country' | 'asn'
  readonly path: string
  readonly databaseType: string
  /** Seconds since the epoch, from the database metadata. */
  readonly buildEpoch: number
  readonly nodeCount: number
}

/**
 * The index as plain data: typed arrays over SharedArrayBuffers plus a little JSON-able info.
 * Posting it to a worker shares the arrays instead of copying them.
 */
export interface GeoIndexData {
  readonly country: IntervalTableData
  readonly asn: IntervalTableData
  readonly sources: readonly GeoSourceInfo[]
}

/**
 * Country and ASN expansion: one key as coalesced CIDR prefixes, or many keys at once as one
 * coalesced NetworkSet (the fast path for feeds). Everything returned is the caller's own.
 *
 * @example
 *   const index = await loadGeoIndex({ countryDb, asnDb })
 *   index.hasCountry('de')           // true (case-insensitive)
 *   const { v4, v6 } = index.expandAsn(13335)
 *   // v4: [addr, len, addr, len, …], v6: [w0, w1, w2, w3, len, …]
 */
export class GeoIndex {
  readonly #data: GeoIndexData

  constructor (data: GeoIndexData) {
    this.#data = data
  }

  /** Country codes present in the country database, upper case, sorted. */
  countries (): string[] {
    return Array.from(this.#data.country.keys, unpackCountryCode)
  }

  /** ASNs present in the ASN database, ascending. */
  asns (): number[] {
    return Array.from(this.#data.asn.keys)
  }

  hasCountry (cc: string): boolean {
    const k = packCountryCode(cc)
    return k >= 0 && findKey(this.#data.country, k) >= 0
  }

  hasAsn (asn: number): boolean {
    return Number.isInteger(asn) && findKey(this.#data.asn, asn) >= 0
  }

  /** The networks of a country (any case), coalesced, IPv4 taken once; empty if unknown. */
  expandCountry (cc: string): PackedPrefixes {
    const k = packCountryCode(cc)
    return this.#expand(this.#data.country, k < 0 ? -1 : findKey(this.#data.country, k))
  }

  /** The networks of an ASN, coalesced; empty if unknown. */
  expandAsn (asn: number): PackedPrefixes {
    return this.#expand(this.#data.asn, Number.isInteger(asn) ? findKey(this.#data.asn, asn) : -1)
  }

  /**
   * The shortest prefix length of a country's or an ASN's database records, per family (Infinity
   * where it has none, or is unknown): what an expansion publishes at its widest before coalescing.
   */
  widestRecord (target: { country: string } | { asn: number }): { v4: number, v6: number } {
    const t = 'country' in target ? this.#data.country : this.#data.asn
    let r = -1
    if ('country' in target) {
      const k = packCountryCode(target.country)
      r = k < 0 ? -1 : findKey(t, k)
    } else if (Number.isInteger(target.asn)) {
      r = findKey(t, target.asn)
    }
    const at = (i: number): number => r < 0 || t.widest[i] === NO_RECORD ? Infinity : t.widest[i]!
    return { v4: at(2 * r), v6: at(2 * r + 1) }
  }

  #expand (t: IntervalTableData, r: number): PackedPrefixes {
    if (r < 0) return { v4: new Uint32Array(0), v6: new Uint32Array(0) }
    const { v4, v6 } = keyIntervals(t, r)
    // A key's intervals are maximal and in address order (interval-table.ts), which is all the
    // NetworkSet constructor asks; its decomposition is the minimal CIDR cover.
    return new NetworkSet(v4, v6).prefixes()
  }

  /**
   * The union of countries and ASNs as one coalesced NetworkSet. Much faster than feeding the
   * prefixes of expandCountry/expandAsn to a NetworkSetBuilder (which sorts them all): a scan of
   * each table in address order, then one merge of the country and the ASN part. Unknown keys
   * add nothing.
   *
   * @example
   *   index.expandToSet({ countries: ['KP', 'IR'], asns: [64496] }).toLines('v4')
   */
  expandToSet (keys: { countries?: Iterable<string>, asns?: Iterable<number> }): NetworkSet {
    const cc: number[] = []
    for (const c of keys.countries ?? []) {
      const k = packCountryCode(c)
      const r = k < 0 ? -1 : findKey(this.#data.country, k)
      if (r >= 0) cc.push(r)
    }
    const as: number[] = []
    for (const a of keys.asns ?? []) {
      const r = Number.isInteger(a) ? findKey(this.#data.asn, a) : -1
      if (r >= 0) as.push(r)
    }
    const part = (t: IntervalTableData, ranks: number[]): NetworkSet | null => {
      if (ranks.length === 0) return null
      const { v4, v6 } = unionIntervals(t, ranks)
      return new NetworkSet(v4, v6) // sorted, disjoint, never adjacent by construction
    }
    const a = part(this.#data.country, cc)
    const b = part(this.#data.asn, as)
    if (a === null || b === null) return a ?? b ?? NetworkSet.empty()
    return a.union(b)
  }

  /** The databases this index was built from. */
  get sources (): readonly GeoSourceInfo[] {
    return this.#data.sources
  }

  /** The index as SharedArrayBuffer-backed data, for `postMessage` to a worker (no copy). */
  toTransferable (): GeoIndexData {
    return this.#data
  }

  static fromTransferable (d: GeoIndexData): GeoIndex {
    return new GeoIndex(d)
  }

  /** An index with no databases: every country and ASN is unknown. */
  static empty (): GeoIndex {
    return new GeoIndex({ country: emptyTable(), asn: emptyTable(), sources: [] })
  }
}
