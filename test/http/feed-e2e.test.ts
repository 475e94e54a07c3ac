/**
 * The feed routes over the real FeedService and snapshot builder (src/feed/): rules in the LMDB
 * store → snapshot → HTTP. What the table tests check against hand-built snapshots holds for the
 * real ones: MD5 of the served bytes, gunzip(gzip) = identity, 304 by tag and date, HEAD lengths,
 * list selection by name with its stored defaults, and a rule change ending the 304s.
 */
import t from 'tap'
import { createHash } from 'node:crypto'
import { gunzipSync } from 'node:zlib'
import { FeedService } from '../../src/feed/feed-service.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { buildGeoIndex } from '../../src/geo/load.js'
import type { AccessRuleInput } from '../../src/store/types.js'
import { basic, bearer, rawRequest, startFeedServer, syncLists } from '../helpers/feed-server.js'

const geo = buildGeoIndex({})
let service: FeedService | null = null
const server = await startFeedServer(async (store, ctx) => {
  service = new FeedService({
    store,
    pool: { ...inProcessTasks(geo), setGeo: () => {} },
    config: { feedRebuildMs: 0, pollMs: ctx.config.pollMs },
    log: ctx.log,
    geo,
  })
  await service.start()
  return service
})
t.teardown(async () => {
  await service?.stop()
  await server.stop()
})
const ws = server.workspace.id

function rule (value: string, action: 'block' | 'allow', labels: Record<string, string> = {}): AccessRuleInput {
  return { kind: 'access_rule', workspaceId: ws, ruleRef: null, labels, reason: null, expiresAt: null, seq: 0, target: { type: 'ip', value }, action, name: null, confidence: null, severity: null }
}

for (const r of [
  rule('192.0.2.1/32', 'block'),
  rule('198.51.100.0/24', 'block', { source: 'tor' }),
  rule('2001:db8::/32', 'block', { source: 'tor' }),
  rule('203.0.113.0/24', 'allow'),
]) await server.store.rules.upsertAccessRule(r)

const auth = bearer(server.key)

/** The feed as served once the service has seen the rules (it rebuilds on the next poll). */
async function until (path: string, body: string): Promise<void> {
  const deadline = Date.now() + 5000
  for (;;) {
    const r = await rawRequest(server.base, path, { headers: auth })
    if (r.status === 200 && r.body.toString() === body) return
    if (Date.now() > deadline) throw new Error(`${path} still answers ${r.status} ${JSON.stringify(r.body.toString())}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

await until('/v1/threat/feeds', '192.0.2.1/32\n198.51.100.0/24\n2001:db8::/32\n')

t.test('bodies of the real builder', async (t) => {
  const cases: Array<{ query: string, body: string | RegExp, contentType: string }> = [
    { query: '', body: '192.0.2.1/32\n198.51.100.0/24\n2001:db8::/32\n', contentType: 'text/plain; charset=utf-8' },
    { query: '?format=txt&family=v4', body: '192.0.2.1/32\n198.51.100.0/24\n', contentType: 'text/plain; charset=utf-8' },
    { query: '?action=allow', body: '203.0.113.0/24\n', contentType: 'text/plain; charset=utf-8' },
    { query: '?format=nftables&family=v6', body: /^elements = \{ 2001:db8::\/32 \}\n?$/, contentType: 'text/plain; charset=utf-8' },
    { query: '?format=dialect_a', body: /^# acme\n# All access rules\n# action: block\n# family: both\n# generated: \S+\n# entries: 3\n192\.0\.2\.1\/32\n/, contentType: 'text/plain; charset=utf-8' },
    { query: '?format=dialect_b&family=v4', body: /^192\.0\.2\.1,IP,high,high\n198\.51\.100\.0-198\.51\.100\.255,IP Range,high,high\n$/, contentType: 'text/csv; charset=utf-8' },
  ]
  for (const c of cases) {
    const r = await rawRequest(server.base, `/v1/threat/feeds${c.query}`, { headers: auth })
    t.equal(r.status, 200, c.query)
    if (typeof c.body === 'string') t.equal(r.body.toString(), c.body, c.query)
    else t.match(r.body.toString(), c.body, c.query)
    t.equal(r.headers['content-type'], c.contentType, c.query)
  }
})

t.test('MD5, gzip, 304 and HEAD over real snapshots', async (t) => {
  for (const q of ['', 'format=dialect_a', 'format=dialect_b', 'family=v6&format=nftables', 'action=allow']) {
    const feed = await rawRequest(server.base, `/v1/threat/feeds?${q}`, { headers: auth })
    const sum = await rawRequest(server.base, `/v1/threat/feeds?${q}&checksum=md5`, { headers: auth })
    t.equal(sum.body.toString(), createHash('md5').update(feed.body).digest('hex'), `md5 ${q}`)
    const gz = await rawRequest(server.base, `/v1/threat/feeds?${q}`, { headers: { ...auth, 'accept-encoding': 'gzip' } })
    t.equal(gz.headers['content-encoding'], 'gzip')
    t.same(gunzipSync(gz.body), feed.body, `gunzip ${q}`)
    t.not(gz.headers.etag, feed.headers.etag)
    const byTag = await rawRequest(server.base, `/v1/threat/feeds?${q}`, { headers: { ...auth, 'if-none-match': feed.headers.etag! } })
    t.equal(byTag.status, 304, `304 by tag ${q}`)
    const byDate = await rawRequest(server.base, `/v1/threat/feeds?${q}`, { headers: { ...basic(server.key), 'if-modified-since': feed.headers['last-modified']! } })
    t.equal(byDate.status, 304, `304 by date ${q}`)
    const head = await rawRequest(server.base, `/v1/threat/feeds?${q}`, { method: 'HEAD', headers: { ...auth, 'accept-encoding': 'gzip' } })
    t.equal(head.headers['content-length'], String(gz.body.length), `HEAD length ${q}`)
  }
})

t.test('a list by name: its selector and stored defaults, explicit parameters on top', async (t) => {
  const list = await server.store.lists.create({
    workspaceId: ws,
    name: 'tor',
    description: 'tor exits',
    defaults: { format: 'dialect_b', family: 'v4', confidence: 'medium', severity: 'low' },
    selector: { source: 'tor' },
  })
  await syncLists(server)
  const r = await rawRequest(server.base, '/v1/threat/feeds/tor', { headers: auth })
  t.equal(r.status, 200)
  t.equal(r.body.toString(), '198.51.100.0-198.51.100.255,IP Range,medium,low\n')
  t.equal(r.headers['content-type'], 'text/csv; charset=utf-8')
  const plain = await rawRequest(server.base, `/v1/threat/feeds/${list.id}?format=plain&family=both`, { headers: auth })
  t.equal(plain.body.toString(), '198.51.100.0/24\n2001:db8::/32\n')
})

t.test('dialect_a of a list without a description: a bare `#` line, no trailing space (issue 36)', async (t) => {
  await server.store.lists.create({ workspaceId: ws, name: 'bare', description: '', defaults: { format: 'dialect_a', family: 'v4' }, selector: { source: 'tor' } })
  await syncLists(server)
  const r = await rawRequest(server.base, '/v1/threat/feeds/bare', { headers: auth })
  t.equal(r.status, 200)
  t.match(r.body.toString(), /^# bare\n#\n# action: block\n/)
  t.notMatch(r.body.toString(), / \n/, 'no line ends in a space')
})

t.test('a rule change ends the 304s', async (t) => {
  const before = await rawRequest(server.base, '/v1/threat/feeds', { headers: auth })
  await server.store.rules.upsertAccessRule(rule('192.0.2.77/32', 'block'))
  await until('/v1/threat/feeds', '192.0.2.1/32\n192.0.2.77/32\n198.51.100.0/24\n2001:db8::/32\n')
  const after = await rawRequest(server.base, '/v1/threat/feeds', { headers: { ...auth, 'if-none-match': before.headers.etag! } })
  t.equal(after.status, 200)
  t.not(after.headers.etag, before.headers.etag)
})
