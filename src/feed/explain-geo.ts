/**
 * Which country and ASN an address belongs to, for explaining country and ASN rules: the
 * database record that answers for it (its network and source file, read through mmdb-lib as
 * `geo lookup` does), confirmed against the geo index the feeds expand from — so an address the
 * index leaves out (the IPv4 aliases inside IPv6, DECISIONS §5) is not said to be covered by a
 * country rule that never publishes it.
 */
import type { GeoIndex } from '../geo/geo-index.js'
import { findKey, type IntervalTableData } from '../geo/interval-table.js'
import type { GeoLookup } from '../geo/lookup.js'
import { packCountryCode } from '../geo/record-keys.js'
import type { ExplainAddress } from './explain-lookup.js'

/** The record of one database that answered for the address. */
export interface GeoRecordMatch {
  /** The record's network (the database's own, not the merged interval a feed publishes). */
  readonly network: string
  /** Path of the database file. */
  readonly database: string
  /** Its metadata's database_type, when the index knows the file. */
  readonly databaseType: string | null
}

export interface GeoMatch {
  readonly country: (GeoRecordMatch & { readonly code: string }) | null
  readonly asn: (GeoRecordMatch & { readonly asn: string, readonly organization: string | null }) | null
}

/** The geo databases as explain reads them: the index feeds expand from and a point reader. */
export interface ExplainGeo {
  readonly index: GeoIndex
  /** Null when the databases cannot be opened for point lookups: geo rules are then not explained. */
  readonly lookup: GeoLookup | null
}

function compareWords (a: Uint32Array, o: number, w: Uint32Array): number {
  for (let k = 0; k < 4; k++) {
    const x = a[o + k]!
    const y = w[k]!
    if (x !== y) return x < y ? -1 : 1
  }
  return 0
}

/**
 * True when the key at rank `r` of the table has an interval holding the address: a binary
 * search over the key's own intervals, which are in address order (interval-table.ts).
 */
function keyHolds (t: IntervalTableData, r: number, addr: ExplainAddress): boolean {
  const v4 = addr.family === 'v4'
  const members = v4 ? t.v4Members.subarray(t.v4MemberStart[r], t.v4MemberStart[r + 1]) : t.v6Members.subarray(t.v6MemberStart[r], t.v6MemberStart[r + 1])
  const iv = v4 ? t.v4 : t.v6
  const stride = v4 ? 2 : 8
  const half = stride >>> 1
  const startsAtOrBefore = (m: number): boolean => v4 ? iv[m * 2]! <= addr.v4 : compareWords(iv, m * 8, addr.v6) <= 0
  let lo = 0
  let hi = members.length - 1
  let at = -1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    if (startsAtOrBefore(members[mid]!)) {
      at = mid
      lo = mid + 1
    } else {
      hi = mid - 1
    }
  }
  if (at < 0) return false
  const o = members[at]! * stride + half
  return v4 ? addr.v4 <= iv[o]! : compareWords(iv, o, addr.v6) >= 0
}

function typeOf (index: GeoIndex, path: string): string | null {
  return index.sources.find((s) => s.path === path)?.databaseType ?? null
}

/**
 * @example
 *   geoMatchOf(parseExplainAddress('2.125.160.216'), { index, lookup: GeoLookup.open(paths) })
 *   // { country: { code: 'GB', network: '2.125.160.216/29', database: '…/GeoLite2-Country-Test.mmdb', … }, asn: null }
 */
export function geoMatchOf (addr: ExplainAddress, geo: ExplainGeo): GeoMatch {
  if (geo.lookup === null) return { country: null, asn: null }
  const hit = geo.lookup.lookup(addr.text)
  const data = geo.index.toTransferable()
  let country: GeoMatch['country'] = null
  if (hit.country?.code != null) {
    const code = hit.country.code.toUpperCase()
    const k = packCountryCode(code)
    const r = k < 0 ? -1 : findKey(data.country, k)
    if (r >= 0 && keyHolds(data.country, r, addr)) country = { code, network: hit.country.network, database: hit.country.database, databaseType: typeOf(geo.index, hit.country.database) }
  }
  let asn: GeoMatch['asn'] = null
  if (hit.asn?.asn != null) {
    const r = findKey(data.asn, hit.asn.asn)
    if (r >= 0 && keyHolds(data.asn, r, addr)) asn = { asn: `AS${hit.asn.asn}`, organization: hit.asn.organization, network: hit.asn.network, database: hit.asn.database, databaseType: typeOf(geo.index, hit.asn.database) }
  }
  return { country, asn }
}
