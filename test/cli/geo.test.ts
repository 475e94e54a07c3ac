import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { geoCommand } from '../../src/cli/geo.js'
import { NetworkSet } from '../../src/net/network-set.js'
import { runCommand } from '../helpers/cli.js'
import { maxmind, SMALL_ASN_CSV, sourceTruth } from '../geo/fixtures.js'

const env = {
  THREATFEED_GEO_COUNTRY_DB: maxmind('GeoLite2-Country-Test.mmdb'),
  THREATFEED_GEO_ASN_DB: maxmind('GeoLite2-ASN-Test.mmdb'),
}

t.test('geo expand prints the coalesced networks of a country or an ASN', async (t) => {
  const gb = sourceTruth('GeoLite2-Country-Test', 'country').get('GB')!
  const json = await runCommand(geoCommand, ['expand', '--country', 'gb', '--json'], { env })
  t.equal(json.code, 0, json.stderr)
  const doc = JSON.parse(json.stdout) as { country: string, family: string, known: boolean, count: number, networks: string[] }
  t.match(doc, { country: 'GB', family: 'both', known: true })
  t.equal(doc.count, doc.networks.length)
  t.ok(NetworkSet.parse(doc.networks).equals(gb), 'the networks GB was written with, coalesced')
  t.equal(json.stdout.split('\n').length, 2, 'exactly one JSON document')

  const text = await runCommand(geoCommand, ['expand', '--country', 'GB', '--family', 'v4'], { env })
  t.equal(text.code, 0)
  t.equal(text.stdout, gb.toLines('v4'), 'text: one CIDR per line, IPv4 only')
  const v6 = await runCommand(geoCommand, ['expand', '--country', 'GB', '--family', 'v6'], { env })
  t.equal(v6.stdout, gb.toLines('v6'))

  const asn = sourceTruth('GeoLite2-ASN-Test', 'asn').get('15169')!
  for (const spelling of ['AS15169', 'as15169', '15169']) {
    const r = await runCommand(geoCommand, ['expand', '--asn', spelling], { env })
    t.equal(r.stdout, asn.toLines(), spelling)
  }

  const unknown = await runCommand(geoCommand, ['expand', '--asn', 'AS64512', '--json'], { env })
  t.equal(unknown.code, 0)
  t.same(JSON.parse(unknown.stdout), { asn: 'AS64512', family: 'both', known: false, count: 0, networks: [] })
  t.match(unknown.stderr, /AS64512 is not in the ASN database; a rule for it publishes nothing/)
})

t.test('geo lookup prints the records of an address', async (t) => {
  const json = await runCommand(geoCommand, ['lookup', '2.125.160.217', '--json'], { env })
  t.equal(json.code, 0, json.stderr)
  t.match(JSON.parse(json.stdout), { ip: '2.125.160.217', country: { code: 'GB', network: '2.125.160.216/29', database: env.THREATFEED_GEO_COUNTRY_DB }, asn: null })
  const text = await runCommand(geoCommand, ['lookup', '1.0.0.1'], { env })
  t.equal(text.stdout, `1.0.0.1\n  country  (not found)\n  asn      AS15169 Google Inc.  1.0.0.0/24  (${env.THREATFEED_GEO_ASN_DB})\n`)
})

t.test('geo build-asn builds a database the other commands read', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-cli-geo-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const out = join(dir, 'asn.mmdb')
  const r = await runCommand(geoCommand, ['build-asn', '--csv', SMALL_ASN_CSV, '--out', out, '--json'], { env })
  t.equal(r.code, 0, r.stderr)
  t.match(JSON.parse(r.stdout), { out, rows: 17, records: 15, skipped: 0 })
  const text = await runCommand(geoCommand, ['build-asn', '--csv', SMALL_ASN_CSV, '--csv', SMALL_ASN_CSV, '--out', out], { env })
  t.match(text.stdout, new RegExp(`^wrote ${out}: 34 rows, \\d+ networks, 15 records, \\d+ bytes in \\d+\\.\\d s\\n$`), 'several --csv files')
  const look = await runCommand(geoCommand, ['lookup', '5.6.7.8', '--json'], { env: { ...env, THREATFEED_GEO_ASN_DB: out } })
  t.match(JSON.parse(look.stdout), { asn: { asn: 64500, organization: 'Quote "The" Org, Ltd.', network: '5.0.0.0/8' } })
  const exp = await runCommand(geoCommand, ['expand', '--asn', '64507'], { env: { ...env, THREATFEED_GEO_ASN_DB: out } })
  t.equal(exp.stdout, '203.0.113.7/32\n203.0.113.8/29\n203.0.113.16/28\n203.0.113.32/27\n203.0.113.64/26\n203.0.113.128/26\n203.0.113.192/29\n203.0.113.200/32\n')
})

t.test('the embedded default country database answers with no configuration', async (t) => {
  const r = await runCommand(geoCommand, ['expand', '--country', 'AU', '--family', 'v4'], { env: {} })
  t.equal(r.code, 0, r.stderr)
  const au = NetworkSet.parse(r.stdout.split('\n').filter((l) => l !== ''))
  t.ok(au.has('1.1.1.1'), 'DB-IP Lite places 1.1.1.1 in AU')
  t.ok(au.count() > 100)
})

t.test('usage and database errors', async (t) => {
  const bad = maxmind('MaxMind-DB-test-broken-search-tree-24.mmdb')
  const cases: { description: string, args: string[], env?: Record<string, string>, code: number, stderr: RegExp }[] = [
    { description: 'both --country and --asn', args: ['expand', '--country', 'GB', '--asn', '1'], code: 2, stderr: /exactly one of --country CC or --asn ASN/ },
    { description: 'neither', args: ['expand'], code: 2, stderr: /exactly one of/ },
    { description: 'bad family', args: ['expand', '--country', 'GB', '--family', 'v5'], code: 2, stderr: /--family must be one of v4, v6, both/ },
    { description: 'bad country', args: ['expand', '--country', 'G1'], code: 2, stderr: /--country must be a two-letter code/ },
    { description: 'bad ASN', args: ['expand', '--asn', 'ASX'], code: 2, stderr: /--asn must be AS<digits>/ },
    { description: 'lookup without an address', args: ['lookup'], code: 2, stderr: /exactly one IP address/ },
    { description: 'lookup of a non-address', args: ['lookup', 'example.com'], code: 1, stderr: /not an IP address: "example.com"/ },
    { description: 'build-asn without --csv', args: ['build-asn', '--out', '/tmp/x.mmdb'], code: 2, stderr: /--csv is required/ },
    { description: 'build-asn without --out', args: ['build-asn', '--csv', SMALL_ASN_CSV], code: 2, stderr: /--out is required/ },
    { description: 'unknown option', args: ['expand', '--country', 'GB', '--nope'], code: 2, stderr: /nope/ },
    { description: 'unknown subcommand', args: ['frobnicate'], code: 2, stderr: /unknown geo command "frobnicate"/ },
    { description: 'corrupt country database', args: ['expand', '--country', 'GB'], env: { THREATFEED_GEO_COUNTRY_DB: bad }, code: 1, stderr: new RegExp(`cannot load geo database ${bad}: search tree node 0 is reached twice`) },
    { description: 'missing ASN database', args: ['lookup', '1.1.1.1'], env: { ...env, THREATFEED_GEO_ASN_DB: '/nonexistent/asn.mmdb' }, code: 1, stderr: /cannot load geo database \/nonexistent\/asn\.mmdb: file not found/ },
  ]
  for (const c of cases) {
    const r = await runCommand(geoCommand, c.args, { env: c.env ?? env })
    t.equal(r.code, c.code, `${c.description}: exit code`)
    t.match(r.stderr, c.stderr, c.description)
    t.equal(r.stdout, '', `${c.description}: nothing on stdout`)
  }
  const help = await runCommand(geoCommand, ['--help'])
  t.equal(help.code, 0)
  t.match(help.stdout, /Usage: threatfeed geo <lookup\|expand\|build-asn>/)
  t.match((await runCommand(geoCommand, ['expand', '--help'])).stdout, /Usage: threatfeed geo/)
})
