import { spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import t from 'tap'
import { Reader, type Response } from 'mmdb-lib'
import { buildAsnMmdb, writeAsnMmdb } from '../../src/geo/build-asn.js'
import { loadGeoIndexSync } from '../../src/geo/load.js'
import { openMmdb } from '../../src/geo/mmdb-file.js'
import { SMALL_ASN_CSV } from './fixtures.js'

/** What test/fixtures/geo/asn-small.csv says, address by address (first, last and a middle one). */
const EXPECTED: { ips: string[], asn: number, org?: string }[] = [
  { ips: ['0.0.0.0', '0.0.0.128', '0.0.0.255'], asn: 64504, org: 'Zero start' },
  { ips: ['1.0.0.0', '1.0.0.1', '1.0.0.255'], asn: 13335, org: 'Cloudflare, Inc.' },
  { ips: ['1.0.4.0', '1.0.6.7', '1.0.7.255'], asn: 38803, org: 'Gtelecom Pty Ltd' },
  { ips: ['1.0.16.1', '1.0.16.100', '1.0.16.254'], asn: 2519, org: 'ARTERIA Networks Corporation' },
  { ips: ['5.0.0.0', '5.128.0.1', '5.255.255.255'], asn: 64500, org: 'Quote "The" Org, Ltd.' },
  { ips: ['10.0.0.0', '10.0.1.255'], asn: 64501, org: 'Ünïcödé GmbH' },
  { ips: ['10.0.2.0', '10.0.2.127'], asn: 64501, org: 'Another name of AS64501' },
  { ips: ['100.64.0.0', '100.100.100.100', '100.127.255.255'], asn: 64502 },
  { ips: ['203.0.113.7', '203.0.113.100', '203.0.113.200'], asn: 64507, org: 'Odd, unaligned range' },
  { ips: ['255.255.255.0', '255.255.255.255'], asn: 64503, org: 'Edge of IPv4 space' },
  { ips: ['2001::', '2001::1', '2001:0:ffff:ffff:ffff:ffff:ffff:ffff'], asn: 6939, org: 'Hurricane Electric LLC' },
  { ips: ['2001:200::', '2001:200:1b9:ffff:ffff:ffff:ffff:ffff'], asn: 2500, org: 'WIDE Project' },
  { ips: ['2001:200:1ba::', '2001:200:1ba:1::1'], asn: 24047, org: 'Internet Systems Consortium, Inc.' },
  { ips: ['2002::', '2002:102:304::1'], asn: 6939, org: 'Hurricane Electric LLC' },
  { ips: ['2a00:1:2::5', '2a00:1:2::ffff', '2a00:1:2::1:4'], asn: 64505, org: 'Odd IPv6 range' },
  { ips: ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'], asn: 64506, org: 'Edge of IPv6 space' },
]
const OUTSIDE = ['0.0.1.0', '1.0.16.0', '1.0.16.255', '10.0.2.128', '203.0.113.6', '203.0.113.201', '255.255.254.255', '2001:200:1bb::', '2a00:1:2::4', '2a00:1:2::1:5', '3000::1', '::1:0:0:1']

function expectedRecord (e: typeof EXPECTED[number]): Record<string, unknown> {
  return e.org === undefined ? { autonomous_system_number: e.asn } : { autonomous_system_number: e.asn, autonomous_system_organization: e.org }
}

const csv = readFileSync(SMALL_ASN_CSV)

t.test('build-asn writes a GeoLite2-ASN-schema database that mmdb-lib reads back identically', async (t) => {
  const { buffer, stats } = buildAsnMmdb([{ path: SMALL_ASN_CSV, buffer: csv }], { buildEpoch: 1700000000 })
  t.match(stats, { rows: 17, records: 15, skipped: 0, bytes: buffer.length }, '17 rows, 15 distinct (ASN, organization) records')
  const reader = new Reader<Response>(buffer)
  t.match(reader.metadata, { databaseType: 'GeoLite2-ASN', ipVersion: 6, binaryFormatMajorVersion: 2, binaryFormatMinorVersion: 0, languages: ['en'] })
  for (const e of EXPECTED) {
    for (const ip of e.ips) t.same(reader.get(ip), expectedRecord(e), ip)
  }
  for (const ip of OUTSIDE) t.equal(reader.get(ip), null, `${ip} is in no range`)
  t.same(reader.get('::ffff:1.0.0.1'), expectedRecord(EXPECTED[1]!), 'IPv4-mapped addresses reach IPv4 data')
})

t.test('mmdblookup (libmaxminddb) reads it back identically', async (t) => {
  if (spawnSync('sh', ['-c', 'command -v mmdblookup'], { stdio: 'ignore' }).status !== 0) {
    t.comment('mmdblookup not found (Debian package mmdb-bin): skipped')
    return
  }
  const dir = mkdtempSync(join(tmpdir(), 'tf-geo-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  for (const minRecordSize of [24, 28, 32] as const) {
    const file = join(dir, `asn-${minRecordSize}.mmdb`)
    writeAsnMmdb([SMALL_ASN_CSV], file, { buildEpoch: 1700000000, minRecordSize })
    const look = (ip: string): { code: number | null, out: string } => {
      const r = spawnSync('mmdblookup', ['--file', file, '--ip', ip], { encoding: 'utf8' })
      return { code: r.status, out: r.stdout + r.stderr }
    }
    const meta = spawnSync('mmdblookup', ['--file', file, '--ip', '1.0.0.1', '--verbose'], { encoding: 'utf8' }).stdout
    t.match(meta, new RegExp(`Record size:\\s+${minRecordSize} bits`), `${minRecordSize}-bit records`)
    t.match(meta, /IP version:\s+IPv6/)
    t.match(meta, /Binary format: 2\.0/)
    t.match(meta, /Build epoch:\s+1700000000/)
    t.match(meta, /Type:\s+GeoLite2-ASN/)
    for (const e of EXPECTED) {
      for (const ip of e.ips) {
        const { code, out } = look(ip)
        const asn = /"autonomous_system_number":\s*(\d+) <uint32>/.exec(out)?.[1]
        const org = /"autonomous_system_organization":\s*"(.*)" <utf8_string>/.exec(out)?.[1]
        t.equal(code, 0, `${ip}: found`)
        t.equal(Number(asn), e.asn, `${ip}: ASN`)
        t.equal(org, e.org, `${ip}: organization`)
      }
    }
    for (const ip of OUTSIDE) t.match(look(ip).out, /Could not find an entry/, `${ip}: not found`)
  }
})

t.test('writeAsnMmdb writes atomically and the index reads it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-geo-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const out = join(dir, 'sub', 'asn.mmdb')
  const progress = new PassThrough()
  const seen: number[] = []
  const stats = writeAsnMmdb([SMALL_ASN_CSV], out, { progress, onProgress: (done) => seen.push(done) })
  t.same(readdirSync(join(dir, 'sub')), ['asn.mmdb'], 'no temporary file left behind')
  t.equal(seen.at(-1), csv.length, 'progress reaches the end')
  t.equal(openMmdb(readFileSync(out)).metadata.databaseType, 'GeoLite2-ASN')
  const index = loadGeoIndexSync({ asnDb: out })
  t.same(index.asns(), [2500, 2519, 13335, 24047, 38803, 64500, 64501, 64502, 64503, 64504, 64505, 64506, 64507], 'AS6939 lives only in the Teredo and 6to4 aliases, so it has no networks')
  t.equal(stats.records, 15)
  t.throws(() => writeAsnMmdb([join(dir, 'missing.csv')], out), { code: 'TF_ERR_GEO_LOAD', message: /missing\.csv: file not found/ })
})

t.test('rows inside the IPv4 space of the tree and ASN 0 are skipped, not fatal', async (t) => {
  const rows = '::,::ffff,1,A\n::ffff:1.2.3.0,::ffff:1.2.3.255,2,B\n5.0.0.0,5.0.0.255,0,Reserved\n5.0.1.0,5.0.1.255,3,C\n'
  const { stats, buffer } = buildAsnMmdb([{ path: 'x.csv', buffer: Buffer.from(rows) }])
  t.match(stats, { rows: 4, skipped: 3, records: 1 })
  t.same(new Reader<Response>(buffer).get('5.0.1.1'), { autonomous_system_number: 3, autonomous_system_organization: 'C' })
})
