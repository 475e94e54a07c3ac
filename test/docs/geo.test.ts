/** docs/geo.md's commands, run with MaxMind's test databases, print what the page shows. */
import t from 'tap'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runConsoleBlocks } from './console.js'

t.test('every console command prints what the page shows', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-doc-geo-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const page = readFileSync(new URL('../../docs/geo.md', import.meta.url), 'utf8')
  const ran = runConsoleBlocks(page, {
    THREATFEED_DATA_DIR: dir,
    THREATFEED_GEO_COUNTRY_DB: 'test/fixtures/geo/maxmind/GeoLite2-Country-Test.mmdb',
    THREATFEED_GEO_ASN_DB: 'test/fixtures/geo/maxmind/GeoLite2-ASN-Test.mmdb',
  })
  t.ok(ran.length > 0, 'the page has console blocks')
  for (const r of ran) t.equal(r.printed, r.shown, r.command)
})
