import { readFileSync } from 'node:fs'
import t, { type Test } from 'tap'
import fc from 'fast-check'
import { Reader, type Response } from 'mmdb-lib'
import { ThreatfeedError } from '../../src/errors.js'
import type { GeoIndex } from '../../src/geo/geo-index.js'
import { buildGeoIndex, loadGeoIndex, loadGeoIndexSync } from '../../src/geo/load.js'
import { buildAsnMmdb } from '../../src/geo/build-asn.js'
import { MmdbWriter } from '../../src/geo/mmdb-writer.js'
import { formatIpv4, formatIpv6 } from '../../src/net/ip.js'
import { NetworkSetBuilder } from '../../src/net/network-set.js'
import { craftMmdb, hasV4, hasV6, IPV4_SPACES_IN_V6, maxmind, prefixCovers, prefixesOverlap, SMALL_ASN_CSV, sourceTruth, utf8 } from './fixtures.js'

type Kind = 'country' | 'asn'

/** The key mmdb-lib's Reader gives an address (the schema rules of record-keys.ts, by hand). */
function readerKey (reader: Reader<Response>, ip: string, kind: Kind): string | null {
  const r = reader.get(ip) as Record<string, unknown> | null
  if (r === null) return null
  if (kind === 'country') {
    const c = (r.country as { iso_code?: string } | undefined)?.iso_code ?? r.country_code
    return typeof c === 'string' ? c.toUpperCase() : null
  }
  const n = r.autonomous_system_number ?? (typeof r.asn === 'string' ? Number(r.asn.slice(2)) : undefined)
  return typeof n === 'number' && n > 0 ? String(n) : null
}

function keysOf (index: GeoIndex, kind: Kind): string[] {
  return kind === 'country' ? index.countries() : index.asns().map(String)
}

function expand (index: GeoIndex, kind: Kind, key: string) {
  return kind === 'country' ? index.expandCountry(key) : index.expandAsn(Number(key))
}

const inAlias = (w: ArrayLike<number>): boolean => IPV4_SPACES_IN_V6.some((s) => prefixCovers(s.words, 0, s.len, w))

/** Addresses: uniform, or inside some network of the index (so most keys get hit). */
function addressArb (index: GeoIndex, kind: Kind) {
  const v4Nets: [number, number][] = []
  const v6Nets: number[][] = []
  for (const k of keysOf(index, kind)) {
    const p = expand(index, kind, k)
    for (let i = 0; i < p.v4.length; i += 2) v4Nets.push([p.v4[i]!, p.v4[i + 1]!])
    for (let i = 0; i < p.v6.length; i += 5) v6Nets.push(Array.from(p.v6.subarray(i, i + 5)))
  }
  const u32 = fc.integer({ min: 0, max: 0xffffffff })
  const v4 = fc.oneof(
    u32,
    fc.tuple(fc.integer({ min: 0, max: Math.max(0, v4Nets.length - 1) }), u32).filter(() => v4Nets.length > 0).map(([i, r]) => {
      const [a, len] = v4Nets[i]!
      return len === 0 ? r : (a + (r % 2 ** (32 - len))) >>> 0
    }),
  ).map((a) => ({ family: 4 as const, v4: a, v6: [0, 0, 0, a] }))
  const v6 = fc.oneof(
    fc.tuple(u32, u32, u32, u32),
    // Inside the IPv4 aliases: mmdb-lib follows them to IPv4 data, the index must not list them.
    fc.tuple(fc.constantFrom(...IPV4_SPACES_IN_V6.slice(1)), u32, u32).map(([s, a, b]) => [s.words[0]! | (s.len <= 16 ? a >>> 16 : 0), s.len >= 32 ? s.words[1]! : a, s.words[2]! | (s.len >= 96 ? 0 : b), b] as [number, number, number, number]),
    fc.tuple(fc.integer({ min: 0, max: Math.max(0, v6Nets.length - 1) }), u32, u32, u32, u32).filter(() => v6Nets.length > 0).map(([i, ...r]) => {
      const n = v6Nets[i]!
      return [0, 1, 2, 3].map((j) => {
        const keep = Math.min(32, Math.max(0, n[4]! - 32 * j))
        const mask = keep === 32 ? 0xffffffff : keep === 0 ? 0 : (0xffffffff << (32 - keep)) >>> 0
        return ((n[j]! & mask) | (r[j]! & ~mask)) >>> 0
      }) as [number, number, number, number]
    }),
  ).map((w) => ({ family: 6 as const, v4: -1, v6: w }))
  return fc.oneof(v4, v6)
}

/**
 * For random addresses: the key mmdb-lib's Reader gives an address ⇔ the address is inside the
 * expansion of that key and of no other. IPv6 addresses in an IPv4 alias must be in no IPv6
 * expansion at all (mmdb-lib follows the alias to IPv4 data; the index lists IPv4 once, as IPv4).
 */
function checkAgainstReader (t: Test, index: GeoIndex, buf: Buffer, kind: Kind, runs: number): void {
  const reader = new Reader<Response>(buf)
  const keys = keysOf(index, kind)
  const expansions = new Map(keys.map((k) => [k, expand(index, kind, k)]))
  let hits = 0
  fc.assert(fc.property(addressArb(index, kind), (a) => {
    const text = a.family === 4 ? formatIpv4(a.v4) : formatIpv6(a.v6)
    const inside = keys.filter((k) => a.family === 4 ? hasV4(expansions.get(k)!, a.v4) : hasV6(expansions.get(k)!, a.v6))
    if (a.family === 6 && inAlias(a.v6)) {
      if (inside.length !== 0) throw new Error(`${text} is in an IPv4 alias but in the IPv6 expansion of ${inside.join(',')}`)
      return
    }
    const want = readerKey(reader, text, kind)
    if (want !== null) hits++
    const expected = want === null ? [] : [want]
    if (inside.join(',') !== expected.join(',')) throw new Error(`${text}: mmdb-lib says ${want}, expansions contain it for [${inside.join(',')}]`)
  }), { numRuns: runs, seed: 42 })
  t.ok(hits > runs / 4, `${hits} of ${runs} random addresses had a ${kind} (the test exercised real networks)`)
}

const GOOD: { db: string, kind: Kind }[] = [
  { db: 'GeoLite2-Country-Test', kind: 'country' },
  { db: 'GeoIP2-Country-Test', kind: 'country' },
  { db: 'GeoLite2-ASN-Test', kind: 'asn' },
]

for (const { db, kind } of GOOD) {
  t.test(`${db}: expansions agree with mmdb-lib point lookups`, async (t) => {
    const path = maxmind(`${db}.mmdb`)
    const index = loadGeoIndexSync(kind === 'country' ? { countryDb: path } : { asnDb: path })
    checkAgainstReader(t, index, readFileSync(path), kind, 1500)
  })

  t.test(`${db}: expansions equal the networks the database was written from`, async (t) => {
    const path = maxmind(`${db}.mmdb`)
    const index = await loadGeoIndex(kind === 'country' ? { countryDb: path } : { asnDb: path })
    const truth = sourceTruth(db, kind)
    t.same(keysOf(index, kind).sort(), [...truth.keys()].sort(), 'same keys')
    for (const [k, want] of truth) {
      const got = new NetworkSetBuilder().addPacked(expand(index, kind, k)).build()
      t.ok(got.equals(want), `${k}: ${got.count()} networks`)
    }
  })

  t.test(`${db}: no IPv4 space appears as an IPv6 network`, async (t) => {
    const path = maxmind(`${db}.mmdb`)
    const index = loadGeoIndexSync(kind === 'country' ? { countryDb: path } : { asnDb: path })
    let v6 = 0
    for (const k of keysOf(index, kind)) {
      const p = expand(index, kind, k).v6
      for (let i = 0; i < p.length; i += 5, v6++) {
        for (const s of IPV4_SPACES_IN_V6) {
          if (prefixesOverlap(p, i, p[i + 4]!, s.words, s.len)) t.fail(`${k}: ${formatIpv6(p.subarray(i, i + 4))}/${p[i + 4]} overlaps ${s.name}`)
        }
      }
    }
    t.ok(v6 > 0, `${v6} IPv6 networks checked`)
  })
}

t.test('the same file as both databases is walked once for both (IPinfo Lite style)', async (t) => {
  const w = new MmdbWriter({ databaseType: 'ipinfo lite' })
  const us = w.record({ country_code: 'US', asn: 'AS15169', as_name: 'Google LLC' })
  const de = w.record({ country_code: 'de', asn: 'AS3320', as_name: 'Deutsche Telekom AG' })
  w.insertV4(0x08080800, 24, us)
  w.insertV4(0x5d000000, 8, de)
  w.insertV6([0x20014860, 0, 0, 0], 0, 32, us)
  const buffer = w.toBuffer()
  const index = buildGeoIndex({ country: { path: 'lite.mmdb', buffer }, asn: { path: 'lite.mmdb', buffer } })
  t.same(index.countries(), ['DE', 'US'], 'lower-case codes are folded')
  t.same(index.asns(), [3320, 15169], 'IPinfo "AS123" strings are read')
  t.same(Array.from(index.expandAsn(15169).v4), [0x08080800, 24])
  t.same(Array.from(index.expandCountry('us').v6), [0x20014860, 0, 0, 0, 32])
  t.same(index.sources.map((s) => s.kind), ['country', 'asn'])
  checkAgainstReader(t, index, buffer, 'asn', 300)
})

t.test('an ASN database written by build-asn: expansions agree with mmdb-lib for every record size', async (t) => {
  for (const minRecordSize of [24, 28, 32] as const) {
    const csv = readFileSync(SMALL_ASN_CSV)
    // Rebuild through the writer with a forced record size, from the same CSV.
    const { buffer } = buildAsnMmdb([{ path: SMALL_ASN_CSV, buffer: csv }], { buildEpoch: 1, minRecordSize })
    t.equal(new Reader<Response>(buffer).metadata.recordSize, minRecordSize, `${minRecordSize}-bit records`)
    const index = buildGeoIndex({ asn: { path: 'small.mmdb', buffer } })
    checkAgainstReader(t, index, buffer, 'asn', 600)
    // AS6939 only has 2001::/32 (Teredo) and 2002::/16 (6to4) in the CSV: both are IPv4 aliases.
    t.notOk(index.hasAsn(6939), 'networks inside the IPv4 aliases are never published')
  }
})

t.test('the Map form of the per-record cache gives the same index as the array form', async (t) => {
  const buffer = readFileSync(maxmind('GeoIP2-Country-Test.mmdb'))
  const a = buildGeoIndex({ country: { path: 'a', buffer } })
  const m = buildGeoIndex({ country: { path: 'a', buffer } }, { arrayCacheMax: 0 })
  t.same(m.countries(), a.countries())
  for (const cc of a.countries()) t.same(m.expandCountry(cc), a.expandCountry(cc), cc)
})

t.test('a record above ::/96 is split: IPv4 once, the IPv6 remainder without the aliases', async (t) => {
  // Node i (depth i) goes left to node i+1 for 64 levels; node 63's left record is data at ::/64,
  // which covers ::/96 (all of IPv4) and ::ffff:0:0/96 (an alias).
  const buffer = craftMmdb({
    ipVersion: 6,
    nodes: Array.from({ length: 64 }, (_, i) => [i < 63 ? i + 1 : 64 + 16, 64] as [number, number]),
    data: [0xe1, ...utf8('country_code'), ...utf8('AQ')],
  })
  const index = buildGeoIndex({ country: { path: 'split.mmdb', buffer } })
  const aq = index.expandCountry('AQ')
  t.same(Array.from(aq.v4), [0, 0], 'all of IPv4, once, as 0.0.0.0/0')
  const got = new NetworkSetBuilder().addPacked({ v4: new Uint32Array(0), v6: aq.v6 }).build()
  const want = new NetworkSetBuilder()
    .addRangeV6([0, 0, 1, 0], [0, 0, 0xfffe, 0xffffffff])
    .addRangeV6([0, 0, 0x10000, 0], [0, 0, 0xffffffff, 0xffffffff])
    .build()
  t.ok(got.equals(want), `::/64 minus ::/96 and ::ffff:0:0/96 (${got.count()} prefixes)`)
})

const BROKEN: { file: string, reason: RegExp, why: string }[] = [
  { file: 'GeoIP2-City-Test-Invalid-Node-Count.mmdb', reason: /node_count 100000 needs a 700000-byte search tree, but the data section ends at byte 22571/, why: 'node_count larger than the file' },
  { file: 'MaxMind-DB-test-broken-pointers-24.mmdb', reason: /pointer at data offset \d+ points to \d+, outside the data section/, why: 'data pointers past the data section' },
  { file: 'MaxMind-DB-test-broken-search-tree-24.mmdb', reason: /search tree node 0 is reached twice/, why: 'a record points back to the root' },
  { file: 'libmaxminddb-corrupt-search-tree.mmdb', reason: /99 of 100 search tree nodes are unreachable/, why: 'only node 0 is used (both records → the one data record); nodes 1..99 are zeros no path reaches. mmdblookup even answers from it: it is refused as a corrupt tree, not as "no country"' },
  // Its metadata map is cut short (record_size has no value byte), so it fails before any data is
  // read; the data-section cycle it is named after is covered by the crafted case below and by
  // mmdb-data.test.ts.
  { file: 'cyclic-data-structure.mmdb', reason: /corrupt metadata: value at data offset \d+ \(1 bytes\) runs past the data section/, why: 'truncated metadata' },
]

t.test('every broken fixture is refused with TF_ERR_GEO_LOAD naming the file', async (t) => {
  for (const c of BROKEN) {
    const path = maxmind(c.file)
    for (const paths of [{ countryDb: path }, { asnDb: path }]) {
      const err = await loadGeoIndex(paths).then(() => null, (e: unknown) => e)
      t.ok(err instanceof ThreatfeedError, `${c.file}: a ThreatfeedError`)
      const e = err as ThreatfeedError
      t.equal(e.code, 'TF_ERR_GEO_LOAD', c.file)
      t.ok(e.message.startsWith(`cannot load geo database ${path}: `), `${c.file}: names the file`)
      t.match(e.message, c.reason, `${c.file}: says why`)
    }
  }
})

t.test('crafted corruptions are refused with a reason', async (t) => {
  const rec = [0xe1, ...utf8('country_code'), ...utf8('DE')]
  const cases: { description: string, buffer: Buffer, reason: RegExp }[] = [
    { description: 'empty file', buffer: Buffer.alloc(0), reason: /too small to be a MaxMind DB/ },
    { description: 'not an MMDB', buffer: Buffer.from('hello world, this is not a database at all'), reason: /no MaxMind DB metadata marker/ },
    { description: 'record past the data section', buffer: craftMmdb({ nodes: [[1 + 16 + 100, 1]], data: rec }), reason: /record 117 \(in node 0\) points outside the data section/ },
    { description: 'record into the separator', buffer: craftMmdb({ nodes: [[1 + 5, 1]], data: rec }), reason: /points outside the data section/ },
    { description: 'node chain deeper than 32 bits', buffer: craftMmdb({ nodes: Array.from({ length: 40 }, (_, i) => [i + 1, 40] as [number, number]), data: rec }), reason: /sits at depth 32, deeper than a 32-bit address/ },
    { description: 'shared subtree', buffer: craftMmdb({ nodes: [[1, 1], [2 + 16, 2]], data: rec }), reason: /node 1 is reached twice/ },
    { description: 'separator not zero', buffer: craftMmdb({ nodes: [[1 + 16, 1]], data: rec, separator: Buffer.alloc(16, 1) }), reason: /no 16-byte zero separator/ },
    { description: 'record size 26', buffer: craftMmdb({ nodes: [[1 + 16, 1]], data: rec, metadata: { record_size: 26 } }), reason: /record_size must be 24, 28 or 32 \(got 26\)/ },
    { description: 'ip_version 5', buffer: craftMmdb({ nodes: [[1 + 16, 1]], data: rec, metadata: { ip_version: 5 } }), reason: /ip_version must be 4 or 6/ },
    { description: 'format version 3', buffer: craftMmdb({ nodes: [[1 + 16, 1]], data: rec, metadata: { binary_format_major_version: 3 } }), reason: /major version 3/ },
    { description: 'node_count 0', buffer: craftMmdb({ nodes: [], data: rec }), reason: /node_count is missing or invalid \(0\)/ },
    { description: 'node_count missing', buffer: craftMmdb({ nodes: [[1 + 16, 1]], data: rec, metadata: { node_count: 'x' } }), reason: /node_count is missing or invalid/ },
    { description: 'metadata not a map', buffer: Buffer.concat([Buffer.alloc(8), Buffer.from('abcdef4d61784d696e642e636f6d', 'hex'), Buffer.from([0x41, 0x61])]), reason: /metadata is not a map/ },
    // A record whose `country` points back at the record: reading it must end, and it has no code.
    { description: 'record with a pointer cycle', buffer: craftMmdb({ nodes: [[1 + 16, 1]], data: [0xe1, ...utf8('country'), 0x20, 0x00] }), reason: /no country \(country\.iso_code or country_code\) in any record/ },
  ]
  for (const c of cases) {
    t.throws(() => buildGeoIndex({ country: { path: '/x/crafted.mmdb', buffer: c.buffer } }),
      { code: 'TF_ERR_GEO_LOAD', message: c.reason }, c.description)
  }
})

t.test('a database of the wrong kind says so', async (t) => {
  await t.rejects(loadGeoIndex({ asnDb: maxmind('GeoLite2-Country-Test.mmdb') }), { code: 'TF_ERR_GEO_LOAD', message: /no ASN \(autonomous_system_number or asn\) in any record; is this an ASN database\? \(database_type "GeoLite2-Country"\)/ })
  await t.rejects(loadGeoIndex({ countryDb: maxmind('MaxMind-DB-test-mixed-24.mmdb') }), { code: 'TF_ERR_GEO_LOAD', message: /is this a country database/ })
  await t.rejects(loadGeoIndex({ countryDb: '/nonexistent/country.mmdb' }), { code: 'TF_ERR_GEO_LOAD', message: 'cannot load geo database /nonexistent/country.mmdb: file not found' })
  t.throws(() => loadGeoIndexSync({ countryDb: '/nonexistent/country.mmdb' }), { code: 'TF_ERR_GEO_LOAD', message: /file not found/ })
  await t.rejects(loadGeoIndex({ countryDb: '/tmp' }), { code: 'TF_ERR_GEO_LOAD', message: /is a directory/ })
})

t.test('fuzz: corrupting bytes of a good database gives an index or TF_ERR_GEO_LOAD, nothing else', async (t) => {
  const good = readFileSync(maxmind('GeoLite2-Country-Test.mmdb'))
  let refused = 0
  let loaded = 0
  fc.assert(fc.property(fc.array(fc.tuple(fc.nat({ max: good.length - 1 }), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 8 }), (edits) => {
    const b = Buffer.from(good)
    for (const [at, v] of edits) b[at] = v
    try {
      buildGeoIndex({ country: { path: 'fuzzed.mmdb', buffer: b } })
      loaded++
    } catch (e) {
      if (!(e instanceof ThreatfeedError) || e.code !== 'TF_ERR_GEO_LOAD') throw e
      refused++
    }
  }), { numRuns: 400, seed: 7 })
  t.ok(refused > 0 && loaded > 0, `${loaded} still loaded, ${refused} refused cleanly`)
})
