import t from 'tap'
import fc from 'fast-check'
import { Reader, type Response } from 'mmdb-lib'
import { openMmdb } from '../../src/geo/mmdb-file.js'
import { MmdbWriter } from '../../src/geo/mmdb-writer.js'
import { formatIpv4, formatIpv6 } from '../../src/net/ip.js'

interface Range4 { first: number, last: number, asn: number }

const u32 = fc.integer({ min: 0, max: 0xffffffff })
const range4 = fc.tuple(u32, u32, fc.integer({ min: 1, max: 20 })).map(([a, b, asn]): Range4 => ({ first: Math.min(a, b), last: Math.max(a, b), asn }))
// Short ranges too, so prefixes are long and neighbours touch.
const shortRange4 = fc.tuple(u32, fc.integer({ min: 0, max: 4096 }), fc.integer({ min: 1, max: 20 })).map(([a, n, asn]): Range4 => ({ first: a, last: Math.min(0xffffffff, a + n), asn }))

t.test('IPv4 ranges read back through mmdb-lib as written, later inserts winning (property)', async (t) => {
  fc.assert(fc.property(fc.array(fc.oneof(range4, shortRange4), { minLength: 1, maxLength: 12 }), fc.constantFrom(24, 28, 32), fc.array(u32, { maxLength: 20 }), (ranges, minRecordSize, extra) => {
    const w = new MmdbWriter({ databaseType: 'prop', minRecordSize: minRecordSize as 24 | 28 | 32, buildEpoch: 1 })
    for (const r of ranges) w.insertRangeV4(r.first, r.last, w.record({ autonomous_system_number: r.asn }))
    const reader = new Reader<Response>(w.toBuffer())
    const probes = [...extra, ...ranges.flatMap((r) => [r.first, r.last, r.first - 1, r.last + 1, (r.first + r.last) >>> 1])]
    for (const a of probes) {
      if (a < 0 || a > 0xffffffff) continue
      const want = ranges.findLast((r) => r.first <= a && a <= r.last)?.asn ?? null
      const got = (reader.get(formatIpv4(a)) as { autonomous_system_number?: number } | null)?.autonomous_system_number ?? null
      if (got !== want) throw new Error(`${formatIpv4(a)}: want ${want}, got ${got}`)
      // IPv4-mapped IPv6 reaches the same data through the ::ffff:0:0/96 alias.
      const mapped = (reader.get(`::ffff:${formatIpv4(a)}`) as { autonomous_system_number?: number } | null)?.autonomous_system_number ?? null
      if (mapped !== want) throw new Error(`::ffff:${formatIpv4(a)}: want ${want}, got ${mapped}`)
    }
  }), { numRuns: 150, seed: 3 })
  t.pass('150 random range sets')
})

t.test('IPv6 ranges read back through mmdb-lib (property)', async (t) => {
  const word = fc.integer({ min: 0, max: 0xffffffff })
  const addr = fc.tuple(fc.integer({ min: 1, max: 0xffffffff }), word, word, word)
  const range6 = fc.tuple(addr, fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 1, max: 9 })).map(([a, wordIdx, span, asn]) => {
    // last = first + span in word `wordIdx`, low words all ones: ranges from a few addresses to /32s.
    const last = [...a]
    last[wordIdx] = Math.min(0xffffffff, a[wordIdx]! + span)
    for (let k = wordIdx + 1; k < 4; k++) last[k] = 0xffffffff
    return { first: a, last, asn }
  })
  fc.assert(fc.property(fc.array(range6, { minLength: 1, maxLength: 6 }), (ranges) => {
    const w = new MmdbWriter({ databaseType: 'prop6', buildEpoch: 1 })
    for (const r of ranges) w.insertRangeV6(r.first, 0, r.last, 0, w.record({ autonomous_system_number: r.asn }))
    const reader = new Reader<Response>(w.toBuffer())
    const cmp = (x: number[], y: number[]): number => { for (let k = 0; k < 4; k++) if (x[k] !== y[k]) return x[k]! < y[k]! ? -1 : 1; return 0 }
    for (const p of ranges.flatMap((r) => [r.first, r.last])) {
      const want = ranges.findLast((r) => cmp(r.first, p) <= 0 && cmp(p, r.last) <= 0)?.asn ?? null
      const got = (reader.get(formatIpv6(p)) as { autonomous_system_number?: number } | null)?.autonomous_system_number ?? null
      if (got !== want) throw new Error(`${formatIpv6(p)}: want ${want}, got ${got}`)
    }
  }), { numRuns: 150, seed: 5 })
  t.pass('150 random IPv6 range sets')
})

t.test('ranges become the fewest CIDR prefixes; equal siblings collapse', async (t) => {
  const w = new MmdbWriter({ databaseType: 'x' })
  const r = w.record({ a: 1 })
  w.insertRangeV4(0x01001001, 0x010010fe, r) // 1.0.16.1 - 1.0.16.254
  t.equal(w.networkCount, 14)
  const all = new MmdbWriter({ databaseType: 'x' })
  all.insertRangeV4(0, 0xffffffff, all.record({ a: 1 }))
  t.equal(all.networkCount, 1, '0.0.0.0-255.255.255.255 is one /0')
  const v6 = new MmdbWriter({ databaseType: 'x' })
  v6.insertRangeV6([0x20010db8, 0, 0, 5], 0, [0x20010db8, 0, 0, 0x14], 0, v6.record({ a: 1 }))
  t.equal(v6.networkCount, 5, '::5-::14 is /128 /127 /125 /125 /128')
  const top = new MmdbWriter({ databaseType: 'x' })
  top.insertRangeV6([0xffffffff, 0xffffffff, 0xffffffff, 0xffffff00], 0, [0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff], 0, top.record({ a: 1 }))
  t.equal(top.networkCount, 1, 'a range ending at the last address stops')

  const halves = new MmdbWriter({ databaseType: 'x', buildEpoch: 1 })
  const h = halves.record({ a: 1 })
  halves.insertV4(0x0a000000, 25, h)
  halves.insertV4(0x0a000080, 25, h)
  const whole = new MmdbWriter({ databaseType: 'x', buildEpoch: 1 })
  whole.insertV4(0x0a000000, 24, whole.record({ a: 1 }))
  t.same(halves.toBuffer(), whole.toBuffer(), 'two /25 halves of one record write the same file as the /24')
})

t.test('records are deduplicated by content, strings by pointer', async (t) => {
  const w = new MmdbWriter({ databaseType: 'x' })
  const a = w.record({ autonomous_system_number: 1, autonomous_system_organization: 'Example Org' })
  t.equal(w.record({ autonomous_system_number: 1, autonomous_system_organization: 'Example Org' }), a, 'same content, same record')
  const b = w.record({ autonomous_system_number: 2, autonomous_system_organization: 'Example Org' })
  t.not(b, a)
  t.equal(w.recordCount, 2)
  w.insertV4(0x01000000, 8, a)
  w.insertV4(0x02000000, 8, b)
  const mm = openMmdb(w.toBuffer())
  t.ok(mm.data.size < 2 * 55, `second record reuses the strings (${mm.data.size} data bytes)`)
  t.same(mm.data.decode(b), { autonomous_system_number: 2, autonomous_system_organization: 'Example Org' })
})

t.test('IPv6 inserts into the IPv4 space of the tree are refused', async (t) => {
  const w = new MmdbWriter({ databaseType: 'x' })
  const r = w.record({ a: 1 })
  for (const [words, len] of [[[0, 0, 0, 0x01020300], 120], [[0, 0, 0xffff, 0x01020300], 120], [[0, 0, 0, 0], 64], [[0, 0, 0, 0], 1]] as const) {
    t.throws(() => w.insertV6(words, 0, len, r), /overlaps the IPv4 space/, `${formatIpv6(words)}/${len}`)
  }
  t.ok(w.rangeOverlapsIpv4Space([0, 0, 0xfffe, 0], 0, [0, 0, 0xffff, 0], 0), 'range touching ::ffff:0:0')
  t.notOk(w.rangeOverlapsIpv4Space([0, 0, 1, 0], 0, [0, 0, 0xfffe, 0xffffffff], 0), 'range between the two')
  const noAlias = new MmdbWriter({ databaseType: 'x', aliasIpv4Mapped: false })
  t.doesNotThrow(() => noAlias.insertV6([0, 0, 0xffff, 0x01020300], 0, 120, noAlias.record({ a: 1 })), 'without the alias, ::ffff:0:0/96 is ordinary space')
  t.throws(() => w.insertV4(0, 33, r), /out of range/)
  t.throws(() => w.insertV6([1, 0, 0, 0], 0, 0, r), /out of range/)
})

t.test('metadata follows the spec: types, record size, languages, description', async (t) => {
  const w = new MmdbWriter({ databaseType: 'My-Type', languages: ['en', 'de'], description: { en: 'English', de: 'Deutsch' }, buildEpoch: 1700000000 })
  w.insertV4(0x01000000, 8, w.record({ a: 1 }))
  const buf = w.toBuffer()
  const m = openMmdb(buf).metadata
  t.match(m, { ipVersion: 6, recordSize: 24, databaseType: 'My-Type', languages: ['en', 'de'], description: { en: 'English', de: 'Deutsch' }, binaryFormatMajorVersion: 2, binaryFormatMinorVersion: 0, buildEpoch: 1700000000 })
  const r = new Reader<Response>(buf)
  t.equal(r.metadata.nodeCount, m.nodeCount)
  t.equal(r.metadata.buildEpoch.getTime(), 1700000000 * 1000)
  for (const size of [28, 32] as const) {
    const big = new MmdbWriter({ databaseType: 'x', minRecordSize: size })
    big.insertV4(0x01000000, 8, big.record({ a: 1 }))
    t.equal(openMmdb(big.toBuffer()).metadata.recordSize, size)
  }
})
