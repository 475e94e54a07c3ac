import t from 'tap'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { feedCommand } from '../../src/cli/feed.js'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import { runCommand } from '../helpers/cli.js'
import { GEO_FIXTURES, addRules, rule } from '../feed/fixtures.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-cli-feed-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const env = { THREATFEED_DATA_DIR: dir, THREATFEED_GEO_COUNTRY_DB: `${GEO_FIXTURES}/GeoLite2-Country-Test.mmdb`, THREATFEED_GEO_ASN_DB: `${GEO_FIXTURES}/GeoLite2-ASN-Test.mmdb` }

const store = await openEmbeddedStore(dir)
const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
const edge = await store.lists.create({ workspaceId: ws.id, name: 'edge', description: 'Edge routers', defaults: { format: 'nftables', family: 'v4', maxEntries: 3 }, selector: { team: 'edge' } })
await store.lists.create({ workspaceId: ws.id, name: 'tiny', description: '', defaults: { maxEntries: 1 }, selector: { team: 'edge' } })
await store.lists.create({ workspaceId: ws.id, name: 'twin', description: '', defaults: {}, selector: {} })
await store.lists.create({ workspaceId: ws.id, name: 'twin', description: '', defaults: {}, selector: {} })
await addRules(store, [
  rule(ws.id, '192.0.2.0/24', { labels: { team: 'edge' } }),
  rule(ws.id, '2001:db8::/32', { labels: { team: 'edge' } }),
  rule(ws.id, 'BT'),
  rule(ws.id, '192.0.2.128/25', { action: 'allow' }),
])
await store.close()

const get = (args: string[]): ReturnType<typeof runCommand> => runCommand(feedCommand, ['get', '--workspace', ws.id, ...args], { env })

t.test('prints the body an appliance receives, nothing else', async (t) => {
  const plain = await get([])
  t.equal(plain.code, 0, plain.stderr)
  t.equal(plain.stdout, '67.43.156.0/24\n192.0.2.0/25\n2001:db8::/32\n', 'workspace feed: plain, both, block; BT expanded, the allow carved')
  t.equal((await get(['--format', 'txt', '--family', 'v6'])).stdout, '2001:db8::/32\n')
  t.equal((await get(['--action', 'allow'])).stdout, '192.0.2.128/25\n')
  const a = await get(['--format', 'dialect_a', '--family', 'v4'])
  t.match(a.stdout, /^# acme\n# All access rules\n# action: block\n# family: v4\n# generated: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n# entries: 2\n67\.43\.156\.0\/24\n192\.0\.2\.0\/25\n$/)
  const md5 = await get(['--format', 'dialect_a', '--family', 'v4', '--checksum', 'md5'])
  t.equal(md5.stdout, createHash('md5').update(a.stdout).digest('hex'))
})

t.test('a list: by name or UUID, its stored defaults under explicit options', async (t) => {
  const byName = await get(['--list', 'edge'])
  t.equal(byName.stdout, 'elements = { 192.0.2.0/25 }\n', 'nftables v4 from the stored defaults')
  t.equal((await get(['--list', edge.id])).stdout, byName.stdout)
  t.equal((await get(['--list', 'edge', '--family', 'v6'])).stdout, 'elements = { 2001:db8::/32 }\n')
  const gz = await runCommand(feedCommand, ['get', '--workspace', ws.id, '--list', 'edge', '--gzip', '--json'], { env })
  const doc = JSON.parse(gz.stdout)
  t.equal(gunzipSync(Buffer.from(doc.bodyBase64, 'base64')).toString(), byName.stdout)
  t.match(doc, { status: 200, contentType: 'text/plain; charset=utf-8', contentEncoding: 'gzip', entries: 1, limit: 3, etag: /^"nftables\.v4\.block\.gzip\./ })
})

t.test('errors: usage, unknown list, ambiguous name, nftables with both, over the cap', async (t) => {
  const cases = [
    { description: 'no workspace', args: ['get'], code: 2, stderr: /--workspace is required/ },
    { description: 'unknown format', args: ['get', '--workspace', ws.id, '--format', 'csv'], code: 2, stderr: /--format must be one of plain, dialect_a, dialect_b, nftables/ },
    { description: 'unknown list', args: ['get', '--workspace', ws.id, '--list', 'nope'], code: 1, stderr: /no list "nope"/ },
    { description: 'ambiguous list', args: ['get', '--workspace', ws.id, '--list', 'twin'], code: 1, stderr: /matches 2 lists; give its UUID/ },
    { description: 'nftables both', args: ['get', '--workspace', ws.id, '--format', 'nftables'], code: 2, stderr: /--family v4 or --family v6/ },
    { description: 'unknown workspace', args: ['get', '--workspace', '00000000-0000-4000-8000-000000000000'], code: 1, stderr: /no workspace/ },
  ]
  for (const c of cases) {
    const r = await runCommand(feedCommand, c.args, { env })
    t.equal(r.code, c.code, c.description)
    t.match(r.stderr, c.stderr, c.description)
    t.equal(r.stdout, '', `${c.description}: nothing on stdout`)
  }
  const over = await get(['--list', 'tiny'])
  t.equal(over.code, 1, 'over the cap')
  t.same(JSON.parse(over.stdout), { success: false, error: 'feed exceeds its entry limit', details: { entries: 2, limit: 1, hint: "ask for family=v4 or family=v6, or raise the list's max_entries" } })
  t.match(over.stderr, /2 entries, over its limit of 1/)
  const v4 = await get(['--list', 'tiny', '--family', 'v4'])
  t.equal(v4.code, 0)
  t.equal(v4.stdout, '192.0.2.0/25\n')
})
