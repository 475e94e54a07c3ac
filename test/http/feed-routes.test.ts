/**
 * GET /v1/threat/feeds and /v1/threat/feeds/{list} through HTTP (SPEC §4.3–4.5, §7.2, §2.9;
 * DECISIONS §5): headers of a 200, parameters and their 400s, lists by UUID and name with their
 * defaults, 404/409, 413, 405, checksum and gzip bodies, metrics.
 */
import t from 'tap'
import { createHash } from 'node:crypto'
import { gunzipSync } from 'node:zlib'
import { bearer, buildTestSnapshot, rawRequest, StaticFeedSource, startFeedServer, syncLists } from '../helpers/feed-server.js'

const source = new StaticFeedSource()
const server = await startFeedServer(() => source)
t.teardown(() => server.stop())
const ws = server.workspace.id
const LAST_MODIFIED = Date.UTC(2026, 0, 15, 10, 30, 0)
const NETWORKS = ['10.0.0.0/8', '192.0.2.1/32', '198.51.100.0/24', '2001:db8::/32', '2001:db8:1::1/128']
source.set(buildTestSnapshot({ workspaceId: ws, feedId: '*', networks: NETWORKS, lastModified: LAST_MODIFIED, name: 'acme' }))

const auth = bearer(server.key)
const get = (path: string, headers: Record<string, string> = {}, method = 'GET'): ReturnType<typeof rawRequest> =>
  rawRequest(server.base, path, { method, headers: { ...auth, ...headers } })

t.test('200: body and every header of SPEC 4.3', async (t) => {
  const r = await get('/v1/threat/feeds')
  t.equal(r.status, 200)
  t.equal(r.body.toString(), NETWORKS.map((n) => n + '\n').join(''))
  t.equal(r.headers['content-type'], 'text/plain; charset=utf-8')
  t.match(r.headers.etag, /^"[^"]+"$/)
  t.equal(r.headers['last-modified'], 'Thu, 15 Jan 2026 10:30:00 GMT')
  t.equal(r.headers['cache-control'], 'private, max-age=30, must-revalidate')
  t.equal(r.headers.vary, 'Accept-Encoding, Authorization')
  t.equal(r.headers['x-feed-entry-count'], '5')
  t.equal(r.headers['x-feed-entry-limit'], '131072')
  t.equal(r.headers['content-length'], String(r.body.length))
  t.notOk('content-encoding' in r.headers, 'identity without Accept-Encoding')
  t.ok(Math.abs(Date.parse(r.headers.date!) - Date.now()) < 5000, 'Date is now')
  // Each header once, exactly once.
  const names = r.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase())
  t.same(names.filter((n, i) => names.indexOf(n) !== i), [], 'no duplicated header')
})

t.test('formats, families, actions and aliases pick their variant', async (t) => {
  const cases: Array<{ query: string, body: string, contentType: string, entries: string }> = [
    { query: 'format=txt', body: NETWORKS.map((n) => n + '\n').join(''), contentType: 'text/plain; charset=utf-8', entries: '5' },
    { query: 'format=alias_c&family=v4', body: '10.0.0.0/8\n192.0.2.1/32\n198.51.100.0/24\n', contentType: 'text/plain; charset=utf-8', entries: '3' },
    { query: 'format=alias_d&family=v6', body: '2001:db8::/32\n2001:db8:1::1/128\n', contentType: 'text/plain; charset=utf-8', entries: '2' },
    { query: 'format=dialect_b&family=v4', body: '10.0.0.0/8,IP Range,high,high\n192.0.2.1,IP,high,high\n198.51.100.0/24,IP Range,high,high\n', contentType: 'text/csv; charset=utf-8', entries: '3' },
    { query: 'format=nftables&family=v6', body: 'elements = { 2001:db8::/32, 2001:db8:1::1/128 }\n', contentType: 'text/plain; charset=utf-8', entries: '2' },
    { query: 'action=allow', body: '10.0.0.0/8\n', contentType: 'text/plain; charset=utf-8', entries: '1' },
    { query: 'utm_source=mail&family=v6&ref', body: '2001:db8::/32\n2001:db8:1::1/128\n', contentType: 'text/plain; charset=utf-8', entries: '2' },
  ]
  for (const c of cases) {
    const r = await get(`/v1/threat/feeds?${c.query}`)
    t.equal(r.status, 200, c.query)
    t.equal(r.body.toString(), c.body, c.query)
    t.equal(r.headers['content-type'], c.contentType, c.query)
    t.equal(r.headers['x-feed-entry-count'], c.entries, c.query)
  }
  const a = await get('/v1/threat/feeds?format=dialect_a')
  t.match(a.body.toString(), /^# acme\n# All access rules\n# action: block\n# family: both\n# generated: 2026-01-15T10:30:00.000Z\n# entries: 5\n/)
})

t.test('every variant and encoding has its own ETag', async (t) => {
  const tags = new Set<string>()
  const queries = ['', 'format=dialect_a', 'format=dialect_b', 'family=v4', 'family=v6', 'action=allow', 'checksum=md5', 'format=nftables&family=v4']
  for (const q of queries) {
    for (const enc of ['', 'gzip']) {
      const r = await get(`/v1/threat/feeds?${q}`, { 'accept-encoding': enc })
      t.equal(r.status, 200)
      tags.add(r.headers.etag!)
    }
  }
  t.equal(tags.size, queries.length * 2)
})

t.test('checksum=md5 is the MD5 of the body the same parameters return', async (t) => {
  for (const q of ['', 'format=dialect_a', 'format=dialect_b&family=v6', 'action=allow&family=v4']) {
    const feed = await get(`/v1/threat/feeds?${q}`)
    const sum = await get(`/v1/threat/feeds?${q}${q === '' ? '' : '&'}checksum=md5`)
    t.equal(sum.status, 200)
    t.match(sum.body.toString(), /^[0-9a-f]{32}$/)
    t.equal(sum.body.toString(), createHash('md5').update(feed.body).digest('hex'), q)
    t.equal(sum.headers['content-type'], 'text/plain; charset=utf-8')
    t.not(sum.headers.etag, feed.headers.etag)
  }
})

t.test('gzip: Content-Encoding, its own ETag, and gunzip(gzip) = identity', async (t) => {
  for (const q of ['', 'format=dialect_a', 'format=dialect_b', 'checksum=md5']) {
    const plain = await get(`/v1/threat/feeds?${q}`)
    const zipped = await get(`/v1/threat/feeds?${q}`, { 'accept-encoding': 'gzip, deflate, br' })
    t.equal(zipped.headers['content-encoding'], 'gzip')
    t.equal(zipped.headers.vary, 'Accept-Encoding, Authorization')
    t.not(zipped.headers.etag, plain.headers.etag)
    t.same(gunzipSync(zipped.body), plain.body, `gunzip ${q}`)
    t.equal(zipped.headers['content-length'], String(zipped.body.length))
  }
})

t.test('400: details.supported for bad values, repeated parameters, nftables + both', async (t) => {
  const cases: Array<{ query: string, error: string, details: Record<string, unknown> }> = [
    { query: 'format=xml', error: 'unsupported format: "xml"', details: { parameter: 'format', value: 'xml', supported: ['plain', 'dialect_a', 'dialect_b', 'nftables', 'ipset', 'json', 'txt', 'alias_c', 'alias_d'] } },
    { query: 'family=v5', error: 'unsupported family: "v5"', details: { parameter: 'family', value: 'v5', supported: ['v4', 'v6', 'both'] } },
    { query: 'action=deny', error: 'unsupported action: "deny"', details: { parameter: 'action', value: 'deny', supported: ['block', 'allow'] } },
    { query: 'checksum=sha256', error: 'unsupported checksum: "sha256"', details: { parameter: 'checksum', value: 'sha256', supported: ['md5'] } },
    { query: 'format=plain&format=txt', error: 'unsupported repeated parameter: format', details: { parameter: 'format', supported: ['plain', 'dialect_a', 'dialect_b', 'nftables', 'ipset', 'json', 'txt', 'alias_c', 'alias_d'] } },
    { query: 'format=nftables', error: 'unsupported family "both" with format nftables: an nftables set holds one family', details: { parameter: 'family', value: 'both', supported: ['v4', 'v6'] } },
    { query: 'format=nftables&family=both', error: 'unsupported family "both" with format nftables: an nftables set holds one family', details: { parameter: 'family', value: 'both', supported: ['v4', 'v6'] } },
  ]
  for (const c of cases) {
    for (const method of ['GET', 'HEAD']) {
      const r = await get(`/v1/threat/feeds?${c.query}`, {}, method)
      t.equal(r.status, 400, `${method} ${c.query}`)
      t.match(r.headers['content-type'], /^application\/json/)
      if (method === 'GET') t.same(JSON.parse(r.body.toString()), { success: false, error: c.error, details: c.details }, c.query)
      else t.equal(r.body.length, 0, 'HEAD has no body')
    }
  }
})

t.test('405 with Allow for other methods', async (t) => {
  for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
    for (const path of ['/v1/threat/feeds', '/v1/threat/feeds/some-list']) {
      const r = await get(path, {}, method)
      t.equal(r.status, 405, `${method} ${path}`)
      t.equal(r.headers.allow, 'GET, HEAD')
      t.same(JSON.parse(r.body.toString()), { success: false, error: 'method not allowed; use GET, HEAD', details: {} })
    }
  }
})

t.test('lists: by UUID or name, stored defaults under explicit parameters', async (t) => {
  const list = await server.store.lists.create({
    workspaceId: ws,
    name: 'tor exits',
    description: 'exit nodes',
    defaults: { format: 'dialect_b', family: 'v4', action: 'block', maxEntries: 1000, confidence: 'medium', severity: 'low' },
    selector: { source: 'tor' },
  })
  await syncLists(server)
  source.set(buildTestSnapshot({ workspaceId: ws, feedId: list.id, networks: ['203.0.113.0/24', '2001:db8:2::/48'], lastModified: LAST_MODIFIED, limit: 1000 }))

  const cases: Array<{ description: string, path: string, body: string, contentType: string }> = [
    { description: 'by UUID: all stored defaults', path: `/v1/threat/feeds/${list.id}`, body: '203.0.113.0/24,IP Range,high,high\n', contentType: 'text/csv; charset=utf-8' },
    { description: 'by name (percent-encoded)', path: '/v1/threat/feeds/tor%20exits', body: '203.0.113.0/24,IP Range,high,high\n', contentType: 'text/csv; charset=utf-8' },
    { description: 'explicit format over the stored one', path: '/v1/threat/feeds/tor%20exits?format=plain', body: '203.0.113.0/24\n', contentType: 'text/plain; charset=utf-8' },
    { description: 'explicit family over the stored one', path: `/v1/threat/feeds/${list.id}?format=txt&family=v6`, body: '2001:db8:2::/48\n', contentType: 'text/plain; charset=utf-8' },
    { description: 'explicit family both', path: `/v1/threat/feeds/${list.id}?family=both&format=plain`, body: '203.0.113.0/24\n2001:db8:2::/48\n', contentType: 'text/plain; charset=utf-8' },
  ]
  for (const c of cases) {
    const r = await get(c.path)
    t.equal(r.status, 200, c.description)
    t.equal(r.body.toString(), c.body, c.description)
    t.equal(r.headers['content-type'], c.contentType, c.description)
    t.equal(r.headers['x-feed-entry-limit'], '1000', c.description)
  }

  // nftables stored as the format, family both stored: the combination is refused.
  const nft = await server.store.lists.create({ workspaceId: ws, name: 'nft', description: '', defaults: { format: 'nftables' }, selector: {} })
  await syncLists(server)
  const refused = await get('/v1/threat/feeds/nft')
  t.equal(refused.status, 400)
  t.same(JSON.parse(refused.body.toString()).details.supported, ['v4', 'v6'])
  source.set(buildTestSnapshot({ workspaceId: ws, feedId: nft.id, networks: ['203.0.113.0/24'], lastModified: LAST_MODIFIED }))
  const explicit = await get('/v1/threat/feeds/nft?family=v4')
  t.equal(explicit.body.toString(), 'elements = { 203.0.113.0/24 }\n')
})

t.test('lists: 404 for unknown and foreign lists, 409 for an ambiguous name', async (t) => {
  const foreign = await server.store.lists.create({ workspaceId: server.otherWorkspace.id, name: 'globex-only', description: '', defaults: {}, selector: {} })
  await server.store.lists.create({ workspaceId: ws, name: 'dupe', description: '', defaults: {}, selector: {} })
  await server.store.lists.create({ workspaceId: ws, name: 'dupe', description: '', defaults: {}, selector: {} })
  await syncLists(server)
  const notFound = { success: false, error: 'no such access-rules list', details: {} }
  const cases: Array<{ description: string, path: string, status: number, body: unknown }> = [
    { description: 'unknown name', path: '/v1/threat/feeds/nope', status: 404, body: notFound },
    { description: 'unknown UUID', path: '/v1/threat/feeds/0b7e1a3c-1111-4222-8333-444455556666', status: 404, body: notFound },
    { description: "another workspace's list by UUID", path: `/v1/threat/feeds/${foreign.id}`, status: 404, body: notFound },
    { description: "another workspace's list by name", path: '/v1/threat/feeds/globex-only', status: 404, body: notFound },
    { description: 'malformed percent-encoding', path: '/v1/threat/feeds/%E0%A4%A', status: 404, body: notFound },
    { description: 'ambiguous name', path: '/v1/threat/feeds/dupe', status: 409, body: { success: false, error: 'list name matches more than one list; address it by UUID', details: { name: 'dupe', matches: 2 } } },
  ]
  for (const c of cases) {
    const r = await get(c.path, { 'if-none-match': '*' })
    t.equal(r.status, c.status, c.description)
    t.same(JSON.parse(r.body.toString()), c.body, c.description)
  }
  // The owner sees its own list (the snapshot is not built: the request waits for it).
  const waitsBefore = source.awaited
  const own = rawRequest(server.base, `/v1/threat/feeds/${foreign.id}`, { headers: bearer(server.otherKey) })
  while (source.awaited === waitsBefore) await new Promise((resolve) => setTimeout(resolve, 5))
  source.set(buildTestSnapshot({ workspaceId: server.otherWorkspace.id, feedId: foreign.id, networks: ['192.0.2.0/24'], lastModified: LAST_MODIFIED }))
  t.equal((await own).body.toString(), '192.0.2.0/24\n')
})

t.test('413: SPEC 2.9 body and the two X-Feed headers, never a truncated list', async (t) => {
  const list = await server.store.lists.create({ workspaceId: ws, name: 'capped', description: '', defaults: { maxEntries: 2 }, selector: {} })
  await syncLists(server)
  source.set(buildTestSnapshot({ workspaceId: ws, feedId: list.id, networks: NETWORKS, lastModified: LAST_MODIFIED, limit: 2 }))
  for (const enc of ['', 'gzip']) {
    const r = await get('/v1/threat/feeds/capped', { 'accept-encoding': enc, 'if-none-match': '*' })
    t.equal(r.status, 413)
    t.equal(r.headers['x-feed-entry-count'], '5')
    t.equal(r.headers['x-feed-entry-limit'], '2')
    t.equal(r.headers['content-type'], 'application/json')
    const text = r.headers['content-encoding'] === 'gzip' ? gunzipSync(r.body).toString() : r.body.toString()
    const body = JSON.parse(text)
    t.equal(body.success, false)
    t.same(Object.keys(body.details).sort(), ['entries', 'hint', 'limit'])
    t.equal(body.details.entries, 5)
    t.equal(body.details.limit, 2)
    t.notMatch(text, /10\.0\.0\.0/, 'no network in the body')
    t.notOk('etag' in r.headers, 'a 413 carries no validator')
  }
  // Within the cap (v6 has 2 networks) the same list answers 200.
  t.equal((await get('/v1/threat/feeds/capped?family=v6')).status, 200)
})

t.test('a list request that arrives before the first list load waits for it', async (t) => {
  const cold = new StaticFeedSource()
  const fresh = await startFeedServer(() => cold, { loadLists: false })
  t.teardown(() => fresh.stop())
  const list = await fresh.store.lists.create({ workspaceId: fresh.workspace.id, name: 'early', description: '', defaults: { family: 'v6' }, selector: {} })
  cold.set(buildTestSnapshot({ workspaceId: fresh.workspace.id, feedId: list.id, networks: NETWORKS, lastModified: LAST_MODIFIED }))
  t.notOk(fresh.lists.loaded)
  const r = await rawRequest(fresh.base, '/v1/threat/feeds/early', { headers: bearer(fresh.key) })
  t.equal(r.status, 200)
  t.equal(r.body.toString(), '2001:db8::/32\n2001:db8:1::1/128\n')
  t.ok(fresh.lists.loaded)
  const missing = await rawRequest(fresh.base, '/v1/threat/feeds/nope', { headers: bearer(fresh.key) })
  t.equal(missing.status, 404)
})

t.test('metrics: feed requests by route and status, body bytes, waits', async (t) => {
  const r = await rawRequest(server.base, '/metrics')
  const text = r.body.toString()
  t.match(text, /threatfeed_http_requests_total\{route="feeds",status="200"\} \d+/)
  t.match(text, /threatfeed_http_requests_total\{route="feeds",status="400"\} \d+/)
  t.match(text, /threatfeed_http_requests_total\{route="feeds_list",status="404"\} \d+/)
  t.match(text, /threatfeed_http_requests_total\{route="feeds_list",status="413"\} \d+/)
  t.match(text, /threatfeed_feed_body_bytes_total\{encoding="gzip"\} [1-9]\d*/)
  t.match(text, /threatfeed_feed_body_bytes_total\{encoding="identity"\} [1-9]\d*/)
  t.match(text, /threatfeed_feed_snapshot_waits_total [1-9]\d*/)
})
