/**
 * Point lookups for `threatfeed geo lookup`, through mmdb-lib's Reader: the reference reader, so
 * what it prints is what any MaxMind client would see — independent of our own tree walk, which
 * is what makes it useful to check an expansion against.
 *
 * mmdb-lib trusts the file, so each database is first opened by our validating parser (a clear
 * error for a broken layout or metadata), and anything mmdb-lib throws while reading a record
 * (a pointer cycle overflows its stack) becomes TF_ERR_GEO_LOAD naming the file.
 */
import { readFileSync } from 'node:fs'
import { Reader, type Response } from 'mmdb-lib'
import { ThreatfeedError } from '../errors.js'
import { formatIpv4, formatIpv6, parseIpv4, parseIpv6 } from '../net/ip.js'
import type { GeoPaths } from './load.js'
import { toGeoLoadError } from './load.js'
import { openMmdb } from './mmdb-file.js'
import { parseAsnText } from './record-keys.js'

export interface GeoLookupHit {
  /** Path of the database that answered. */
  database: string
  /** The network of the record that matched, as CIDR. */
  network: string
  /** The record as mmdb-lib decodes it (bigints as decimal strings, so it is JSON-safe). */
  record: unknown
}

export interface CountryHit extends GeoLookupHit { code: string | null }
export interface AsnHit extends GeoLookupHit { asn: number | null, organization: string | null }

export interface GeoLookupResult {
  /** The address looked up, normalized (IPv4-mapped IPv6 becomes IPv4). */
  ip: string
  country: CountryHit | null
  asn: AsnHit | null
}

interface OpenDb { path: string, reader: Reader<Response>, ipVersion: 4 | 6 }

/**
 * @example
 *   const geo = GeoLookup.open({ countryDb, asnDb })
 *   geo.lookup('1.1.1.1') // { ip: '1.1.1.1', country: { code: 'AU', network: '1.1.1.0/24', … }, asn: { asn: 13335, … } }
 */
export class GeoLookup {
  readonly #country: OpenDb | undefined
  readonly #asn: OpenDb | undefined

  private constructor (country: OpenDb | undefined, asn: OpenDb | undefined) {
    this.#country = country
    this.#asn = asn
  }

  static open (paths: GeoPaths): GeoLookup {
    return new GeoLookup(openDb(paths.countryDb), openDb(paths.asnDb))
  }

  /** Throws TF_ERR_INVALID_ARGUMENT for text that is not an IP address. */
  lookup (ip: string): GeoLookupResult {
    const addr = normalizeAddress(ip)
    const result: GeoLookupResult = { ip: addr.text, country: null, asn: null }
    const c = query(this.#country, addr)
    if (c !== null) {
      const r = c.record as { country?: { iso_code?: unknown }, country_code?: unknown } | null
      const code = r?.country?.iso_code ?? r?.country_code
      result.country = { ...c, code: typeof code === 'string' ? code : null }
    }
    const a = query(this.#asn, addr)
    if (a !== null) {
      const r = a.record as { autonomous_system_number?: unknown, asn?: unknown, autonomous_system_organization?: unknown, as_name?: unknown } | null
      const n = r?.autonomous_system_number ?? r?.asn
      const asn = typeof n === 'number' ? n : typeof n === 'string' ? parseAsnText(n) : -1
      const org = r?.autonomous_system_organization ?? r?.as_name
      result.asn = { ...a, asn: asn > 0 ? asn : null, organization: typeof org === 'string' ? org : null }
    }
    return result
  }
}

function openDb (path: string | undefined): OpenDb | undefined {
  if (path === undefined) return undefined
  let buf: Buffer
  try {
    buf = readFileSync(path)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    throw new ThreatfeedError('TF_ERR_GEO_LOAD', [path, code === 'ENOENT' ? 'file not found' : (e as Error).message])
  }
  try {
    const { ipVersion } = openMmdb(buf).metadata
    return { path, reader: new Reader<Response>(buf), ipVersion }
  } catch (e) {
    throw toGeoLoadError(path, e)
  }
}

interface Address { text: string, v4: number, v6: Uint32Array | null }

function normalizeAddress (ip: string): Address {
  const v4 = parseIpv4(ip)
  if (v4 >= 0) return { text: formatIpv4(v4), v4, v6: null }
  const w = new Uint32Array(4)
  if (!parseIpv6(ip, w)) throw new ThreatfeedError('TF_ERR_INVALID_ARGUMENT', [`not an IP address: ${JSON.stringify(ip)}`])
  if (w[0] === 0 && w[1] === 0 && w[2] === 0xffff) return { text: formatIpv4(w[3]!), v4: w[3]!, v6: null }
  return { text: formatIpv6(w), v4: -1, v6: w }
}

function query (db: OpenDb | undefined, addr: Address): GeoLookupHit | null {
  if (db === undefined) return null
  if (addr.v6 !== null && db.ipVersion === 4) return null // an IPv4-only tree has no IPv6 answer
  let found: [Response | null, number]
  try {
    found = db.reader.getWithPrefixLength(addr.text)
  } catch (e) {
    throw toGeoLoadError(db.path, e)
  }
  const [record, len] = found
  if (record === null) return null
  return { database: db.path, network: networkOf(addr, len), record: jsonSafe(record) }
}

function networkOf (addr: Address, len: number): string {
  if (addr.v6 === null) {
    const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0
    return `${formatIpv4((addr.v4 & mask) >>> 0)}/${len}`
  }
  const w = Uint32Array.from(addr.v6)
  for (let k = 0; k < 4; k++) {
    const keep = Math.min(32, Math.max(0, len - 32 * k))
    w[k] = keep === 0 ? 0 : keep === 32 ? w[k]! : (w[k]! & (0xffffffff << (32 - keep))) >>> 0
  }
  return `${formatIpv6(w)}/${len}`
}

function jsonSafe (v: unknown): unknown {
  if (typeof v === 'bigint') return v.toString()
  if (Buffer.isBuffer(v)) return v.toString('hex')
  if (Array.isArray(v)) return v.map(jsonSafe)
  if (typeof v === 'object' && v !== null) {
    const out: Record<string, unknown> = {}
    for (const [k, x] of Object.entries(v)) out[k] = jsonSafe(x)
    return out
  }
  return v
}
