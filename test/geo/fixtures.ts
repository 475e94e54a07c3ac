/**
 * Shared helpers of the geo tests: fixture paths, a brute-force membership oracle over packed
 * prefixes, the ground truth of MaxMind's test databases, and a crafter of (broken) MMDB files.
 */
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { PackedPrefixes } from '../../src/net/packed.js'
import { NetworkSet } from '../../src/net/network-set.js'
import { DataSectionEncoder, mmdbUint16, mmdbUint32, mmdbUint64, type MmdbValue } from '../../src/geo/mmdb-encoder.js'
import { METADATA_MARKER } from '../../src/geo/mmdb-file.js'

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'geo')
/** MaxMind's test databases (MaxMind-DB repository, MIT; see LICENSE-MIT there). */
export const MAXMIND = join(FIXTURES, 'maxmind')
export const maxmind = (name: string): string => join(MAXMIND, name)
export const SMALL_ASN_CSV = join(FIXTURES, 'asn-small.csv')

/** True when IPv4 `addr` lies in one of the v4 prefixes. */
export function hasV4 (p: PackedPrefixes, addr: number): boolean {
  for (let k = 0; k < p.v4.length; k += 2) {
    const len = p.v4[k + 1]!
    const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0
    if (((addr & mask) >>> 0) === p.v4[k]) return true
  }
  return false
}

/** True when IPv6 `w` (four words) lies in one of the v6 prefixes. */
export function hasV6 (p: PackedPrefixes, w: ArrayLike<number>): boolean {
  for (let k = 0; k < p.v6.length; k += 5) {
    if (prefixCovers(p.v6, k, p.v6[k + 4]!, w)) return true
  }
  return false
}

/** True when the prefix at `a[o..o+3]/len` covers address `w`. */
export function prefixCovers (a: ArrayLike<number>, o: number, len: number, w: ArrayLike<number>): boolean {
  for (let j = 0; j < 4; j++) {
    const keep = Math.min(32, Math.max(0, len - 32 * j))
    if (keep === 0) return true
    const mask = keep === 32 ? 0xffffffff : (0xffffffff << (32 - keep)) >>> 0
    if (((w[j]! & mask) >>> 0) !== ((a[o + j]! & mask) >>> 0)) return false
  }
  return true
}

/** Do two IPv6 prefixes overlap (one contains the other)? */
export function prefixesOverlap (a: ArrayLike<number>, ao: number, alen: number, b: ArrayLike<number>, blen: number): boolean {
  return prefixCovers(a, ao, Math.min(alen, blen), b)
}

/** The IPv4 aliases inside IPv6, and ::/96 where IPv4 itself lives in an IPv6 tree. */
export const IPV4_SPACES_IN_V6: readonly { name: string, words: readonly number[], len: number }[] = [
  { name: '::/96', words: [0, 0, 0, 0], len: 96 },
  { name: '::ffff:0:0/96', words: [0, 0, 0xffff, 0], len: 96 },
  { name: '2001::/32', words: [0x20010000, 0, 0, 0], len: 32 },
  { name: '2002::/16', words: [0x20020000, 0, 0, 0], len: 16 },
]

export type SourceKind = 'country' | 'asn'

/**
 * The ground truth of a MaxMind test database: key → networks, from source-data/<db>.json.
 * Networks written inside ::/96 ("::1.2.3.0/120") are IPv4 in an IPv6 tree, so they count as IPv4.
 */
export function sourceTruth (db: string, kind: SourceKind): Map<string, NetworkSet> {
  const src = JSON.parse(readFileSync(join(MAXMIND, 'source-data', `${db}.json`), 'utf8')) as Record<string, { country?: { iso_code?: string }, autonomous_system_number?: number }>[]
  const by = new Map<string, string[]>()
  for (const entry of src) {
    for (const [net, rec] of Object.entries(entry)) {
      const k = kind === 'country' ? rec.country?.iso_code : rec.autonomous_system_number
      if (k === undefined) continue
      const list = by.get(String(k)) ?? []
      list.push(v4CompatibleToV4(net))
      by.set(String(k), list)
    }
  }
  return new Map([...by].map(([k, nets]) => [k, NetworkSet.parse(nets)]))
}

function v4CompatibleToV4 (cidr: string): string {
  const m = /^::(\d+\.\d+\.\d+\.\d+)\/(\d+)$/.exec(cidr) ?? /^::([0-9a-f]{1,4}):([0-9a-f]{1,4})\/(\d+)$/.exec(cidr)
  if (m === null) return cidr
  if (m.length === 3) return `${m[1]}/${Number(m[2]) - 96}`
  const hi = parseInt(m[1]!, 16)
  const lo = parseInt(m[2]!, 16)
  return `${hi >>> 8}.${hi & 255}.${lo >>> 8}.${lo & 255}/${Number(m[3]) - 96}`
}

export interface CraftOptions {
  ipVersion?: 4 | 6
  recordSize?: 24 | 28 | 32
  /** [left, right] record values per node. */
  nodes: readonly (readonly [number, number])[]
  /** Raw data section bytes. */
  data: Buffer | number[]
  /** Overrides or extra keys for the metadata map. */
  metadata?: Record<string, MmdbValue>
  /** Bytes written where the 16-byte zero separator goes (default zeros). */
  separator?: Buffer
}

/** Writes an MMDB byte by byte, so tests can make every kind of broken file. */
export function craftMmdb (o: CraftOptions): Buffer {
  const rs = o.recordSize ?? 24
  const nb = rs / 4
  const tree = Buffer.alloc(o.nodes.length * nb)
  o.nodes.forEach(([l, r], i) => {
    const at = i * nb
    if (rs === 24) { tree.writeUIntBE(l, at, 3); tree.writeUIntBE(r, at + 3, 3) }
    if (rs === 28) {
      tree.writeUIntBE(l & 0xffffff, at, 3)
      tree[at + 3] = ((Math.floor(l / 2 ** 24) & 15) << 4) | (Math.floor(r / 2 ** 24) & 15)
      tree.writeUIntBE(r & 0xffffff, at + 4, 3)
    }
    if (rs === 32) { tree.writeUInt32BE(l, at); tree.writeUInt32BE(r, at + 4) }
  })
  const meta = new DataSectionEncoder({ intern: false })
  meta.write({
    binary_format_major_version: mmdbUint16(2),
    binary_format_minor_version: mmdbUint16(0),
    database_type: 'Crafted',
    description: { en: 'crafted by a test' },
    ip_version: mmdbUint16(o.ipVersion ?? 4),
    languages: ['en'],
    node_count: mmdbUint32(o.nodes.length),
    record_size: mmdbUint16(rs),
    build_epoch: mmdbUint64(1700000000),
    ...o.metadata,
  })
  return Buffer.concat([tree, o.separator ?? Buffer.alloc(16), Buffer.from(o.data), METADATA_MARKER, meta.bytes()])
}

/** UTF-8 string value bytes (short strings only). */
export function utf8 (s: string): number[] {
  const b = Buffer.from(s)
  if (b.length >= 29) throw new RangeError('keep crafted strings short')
  return [0x40 | b.length, ...b]
}
