import t from 'tap'
import { GeoLookup } from '../../src/geo/lookup.js'
import { buildAsnMmdb } from '../../src/geo/build-asn.js'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { craftMmdb, maxmind, SMALL_ASN_CSV, utf8 } from './fixtures.js'

const countryDb = maxmind('GeoLite2-Country-Test.mmdb')
const asnDb = maxmind('GeoLite2-ASN-Test.mmdb')
const geo = GeoLookup.open({ countryDb, asnDb })

t.test('point lookups print the country and ASN records of an address', async (t) => {
  const cases: { input: string, expected: unknown }[] = [
    { input: '2.125.160.217', expected: { ip: '2.125.160.217', country: { code: 'GB', network: '2.125.160.216/29', database: countryDb }, asn: null } },
    { input: '::ffff:2.125.160.217', expected: { ip: '2.125.160.217', country: { code: 'GB', network: '2.125.160.216/29' } } },
    { input: '2001:218::1', expected: { ip: '2001:218::1', country: { code: 'JP', network: '2001:218::/32' } } },
    { input: '1.0.0.1', expected: { ip: '1.0.0.1', country: null, asn: { asn: 15169, organization: 'Google Inc.', network: '1.0.0.0/24', database: asnDb } } },
    { input: '10.1.1.1', expected: { ip: '10.1.1.1', country: null, asn: null } },
  ]
  for (const c of cases) t.match(geo.lookup(c.input), c.expected, c.input)
  t.match(geo.lookup('2.125.160.217').country?.record, { country: { iso_code: 'GB' }, registered_country: { iso_code: 'FR' } }, 'the whole record, as mmdb-lib decodes it')
  t.throws(() => geo.lookup('1.2.3'), { code: 'TF_ERR_INVALID_ARGUMENT', message: 'not an IP address: "1.2.3"' })
})

t.test('lookups in built ASN databases, IPinfo-style text ASNs and IPv4-only trees', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-geo-lookup-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const built = join(dir, 'asn.mmdb')
  writeFileSync(built, buildAsnMmdb([{ path: SMALL_ASN_CSV, buffer: readFileSync(SMALL_ASN_CSV) }]).buffer)
  const g = GeoLookup.open({ asnDb: built })
  t.match(g.lookup('5.1.2.3').asn, { asn: 64500, organization: 'Quote "The" Org, Ltd.', network: '5.0.0.0/8' })
  t.match(g.lookup('2a00:1:2::7').asn, { asn: 64505, network: '2a00:1:2::6/127' })
  t.equal(g.lookup('2.2.2.2').country, null, 'no country database configured')
  const v4only = GeoLookup.open({ countryDb: maxmind('MaxMind-DB-test-ipv4-24.mmdb') })
  t.equal(v4only.lookup('2001:db8::1').country, null, 'an IPv4-only tree has no IPv6 answer')
})

t.test('broken databases give TF_ERR_GEO_LOAD naming the file, at open or at lookup', async (t) => {
  const bad = maxmind('GeoIP2-City-Test-Invalid-Node-Count.mmdb')
  t.throws(() => GeoLookup.open({ countryDb: bad }), { code: 'TF_ERR_GEO_LOAD', message: new RegExp(`^cannot load geo database ${bad}: node_count 100000`) })
  t.throws(() => GeoLookup.open({ asnDb: '/nonexistent.mmdb' }), { code: 'TF_ERR_GEO_LOAD', message: 'cannot load geo database /nonexistent.mmdb: file not found' })
  // The layout is fine, but the record's `country` points back at the record: mmdb-lib recurses
  // until the stack overflows, which must come out as a load error, not a crash.
  const dir = mkdtempSync(join(tmpdir(), 'tf-geo-lookup-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const cyclic = join(dir, 'cyclic.mmdb')
  writeFileSync(cyclic, craftMmdb({ nodes: [[1 + 16, 1]], data: [0xe1, ...utf8('country'), 0x20, 0x00] }))
  const g = GeoLookup.open({ countryDb: cyclic })
  t.throws(() => g.lookup('1.2.3.4'), { code: 'TF_ERR_GEO_LOAD', message: new RegExp(`^cannot load geo database ${cyclic}: unreadable database`) })
  t.equal(g.lookup('200.0.0.1').country, null, 'addresses without data still answer')
})
