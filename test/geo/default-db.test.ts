import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import t from 'tap'
import { defaultCountryDb, ensureDefaultGeo, resolveGeoPaths, type DefaultGeoOptions } from '../../src/geo/default-db.js'
import { loadGeoIndexSync } from '../../src/geo/load.js'
import { maxmind, SMALL_ASN_CSV } from './fixtures.js'

/** A stand-in for the two registry packages, so the test builds a small database in milliseconds. */
function fakePackages (root: string, version: string): { countryPackageDir: string, asnPackageDir: string } {
  const asnPackageDir = join(root, 'asn-pkg')
  const countryPackageDir = join(root, 'country-pkg')
  mkdirSync(asnPackageDir, { recursive: true })
  mkdirSync(countryPackageDir, { recursive: true })
  const lines = readFileSync(SMALL_ASN_CSV, 'utf8').split('\n').filter((l) => l !== '')
  writeFileSync(join(asnPackageDir, 'asn-ipv4.csv'), lines.filter((l) => !l.split(',')[0]!.includes(':')).join('\n') + '\n')
  writeFileSync(join(asnPackageDir, 'asn-ipv6.csv'), lines.filter((l) => l.split(',')[0]!.includes(':')).join('\n') + '\n')
  writeFileSync(join(asnPackageDir, 'package.json'), JSON.stringify({ name: '@ip-location-db/asn', version }))
  copyFileSync(maxmind('GeoLite2-Country-Test.mmdb'), join(countryPackageDir, 'dbip-country.mmdb'))
  return { countryPackageDir, asnPackageDir }
}

t.test('the ASN database is built once per source package version', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'tf-geo-default-'))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  const dataDir = join(root, 'data')
  const builds: string[] = []
  const opts = (version: string): DefaultGeoOptions => ({ ...fakePackages(root, version), onBuilt: (s) => builds.push(`${s.version}:${s.records}`) })

  const first = await ensureDefaultGeo(dataDir, opts('1.0.0'))
  t.equal(first.asnDb, resolve(dataDir, 'geo', 'asn.mmdb'))
  t.equal(first.countryDb, join(root, 'country-pkg', 'dbip-country.mmdb'))
  t.same(builds, ['1.0.0:15'], 'built on first use')
  t.match(JSON.parse(readFileSync(first.asnDb + '.json', 'utf8')), { source: '@ip-location-db/asn', version: '1.0.0', bytes: statSync(first.asnDb).size })
  const index = loadGeoIndexSync(first)
  t.ok(index.hasAsn(13335) && index.hasCountry('GB'), 'both defaults load')

  const mtime = statSync(first.asnDb).mtimeMs
  await ensureDefaultGeo(dataDir, opts('1.0.0'))
  t.same(builds, ['1.0.0:15'], 'same version: not rebuilt')
  t.equal(statSync(first.asnDb).mtimeMs, mtime)

  await ensureDefaultGeo(dataDir, opts('1.0.1'))
  t.same(builds, ['1.0.0:15', '1.0.1:15'], 'new package version: rebuilt')

  writeFileSync(first.asnDb, 'truncated')
  await ensureDefaultGeo(dataDir, opts('1.0.1'))
  t.equal(builds.length, 3, 'a database that does not match its stamp is rebuilt')
  rmSync(first.asnDb + '.json')
  await ensureDefaultGeo(dataDir, opts('1.0.1'))
  t.equal(builds.length, 4, 'no stamp: rebuilt')
})

t.test('configured paths win and nothing is built for them', async (t) => {
  const never: DefaultGeoOptions = { asnPackageDir: '/nonexistent', countryPackageDir: '/nonexistent', onBuilt: () => t.fail('must not build') }
  const paths = await resolveGeoPaths({ THREATFEED_GEO_COUNTRY_DB: 'c.mmdb', THREATFEED_GEO_ASN_DB: '/x/a.mmdb', THREATFEED_DATA_DIR: '/nonexistent' }, never)
  t.same(paths, { countryDb: resolve('c.mmdb'), asnDb: '/x/a.mmdb' })
  await t.rejects(resolveGeoPaths({ THREATFEED_GEO_ASN_DB: '/x/a.mmdb' }, never), { code: 'TF_ERR_GEO_LOAD', message: /dbip-country\.mmdb: missing from the @ip-location-db\/dbip-country-mmdb package/ })
})

t.test('the real default country database is the DB-IP Lite MMDB from node_modules', async (t) => {
  const path = defaultCountryDb()
  t.match(path, /node_modules\/@ip-location-db\/dbip-country-mmdb\/dbip-country\.mmdb$/)
  t.ok(existsSync(path))
})
