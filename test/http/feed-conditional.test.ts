/**
 * Conditional requests and content coding through HTTP (SPEC §4.3, DECISIONS §5; RFC 9110
 * §13.1.2, §13.1.3, §13.2.2, §12.5.3, §15.4.5): which request gets 304, what a 304 carries, which
 * Accept-Encoding gets gzip and which ETag goes with it.
 */
import t from 'tap'
import { gunzipSync } from 'node:zlib'
import { bearer, buildTestSnapshot, rawRequest, StaticFeedSource, startFeedServer } from '../helpers/feed-server.js'

const source = new StaticFeedSource()
const server = await startFeedServer(() => source)
t.teardown(() => server.stop())
const LAST_MODIFIED = Date.UTC(2026, 2, 1, 12, 0, 0)
source.set(buildTestSnapshot({ workspaceId: server.workspace.id, feedId: '*', networks: ['192.0.2.0/24', '198.51.100.7/32'], lastModified: LAST_MODIFIED }))

const auth = bearer(server.key)
const identity = await rawRequest(server.base, '/v1/threat/feeds', { headers: auth })
const gzipped = await rawRequest(server.base, '/v1/threat/feeds', { headers: { ...auth, 'accept-encoding': 'gzip' } })
const E = identity.headers.etag!
const G = gzipped.headers.etag!
const LM = identity.headers['last-modified']!

t.test('the two representations', async (t) => {
  t.equal(LM, 'Sun, 01 Mar 2026 12:00:00 GMT')
  t.not(E, G)
  t.same(gunzipSync(gzipped.body), identity.body)
})

t.test('conditional table', async (t) => {
  const cases: Array<{ description: string, headers: Record<string, string>, status: 200 | 304, etag?: string }> = [
    { description: 'no conditional', headers: {}, status: 200 },
    { description: 'If-None-Match: current tag', headers: { 'if-none-match': E }, status: 304 },
    { description: 'If-None-Match: weak form of the tag', headers: { 'if-none-match': `W/${E}` }, status: 304 },
    { description: 'If-None-Match: list holding the tag', headers: { 'if-none-match': `"old", ${E}, "older"` }, status: 304 },
    { description: 'If-None-Match: *', headers: { 'if-none-match': '*' }, status: 304 },
    { description: 'If-None-Match: other tag', headers: { 'if-none-match': '"old"' }, status: 200 },
    { description: 'If-None-Match: gzip tag on an identity request', headers: { 'if-none-match': G }, status: 200 },
    { description: 'If-None-Match: gzip tag on a gzip request', headers: { 'if-none-match': G, 'accept-encoding': 'gzip' }, status: 304, etag: G },
    { description: 'If-None-Match: identity tag on a gzip request', headers: { 'if-none-match': E, 'accept-encoding': 'gzip' }, status: 200, etag: G },
    { description: 'If-None-Match: both tags on a gzip request', headers: { 'if-none-match': `${E}, ${G}`, 'accept-encoding': 'x-gzip' }, status: 304, etag: G },
    { description: 'If-None-Match (miss) wins over a matching If-Modified-Since', headers: { 'if-none-match': '"old"', 'if-modified-since': LM }, status: 200 },
    { description: 'If-None-Match (hit) wins over an old If-Modified-Since', headers: { 'if-none-match': E, 'if-modified-since': 'Mon, 01 Jan 2001 00:00:00 GMT' }, status: 304 },
    { description: 'If-Modified-Since: equal to Last-Modified', headers: { 'if-modified-since': LM }, status: 304 },
    { description: 'If-Modified-Since: later', headers: { 'if-modified-since': 'Sun, 01 Mar 2026 12:00:01 GMT' }, status: 304 },
    { description: 'If-Modified-Since: one second earlier', headers: { 'if-modified-since': 'Sun, 01 Mar 2026 11:59:59 GMT' }, status: 200 },
    { description: 'If-Modified-Since: rfc850 form, equal', headers: { 'if-modified-since': 'Sunday, 01-Mar-26 12:00:00 GMT' }, status: 304 },
    { description: 'If-Modified-Since: asctime form, equal', headers: { 'if-modified-since': 'Sun Mar  1 12:00:00 2026' }, status: 304 },
    { description: 'If-Modified-Since: invalid date is ignored', headers: { 'if-modified-since': 'last tuesday' }, status: 200 },
    { description: 'If-Modified-Since on a gzip request', headers: { 'if-modified-since': LM, 'accept-encoding': 'gzip' }, status: 304, etag: G },
  ]
  for (const c of cases) {
    for (const method of ['GET', 'HEAD']) {
      const r = await rawRequest(server.base, '/v1/threat/feeds', { method, headers: { ...auth, ...c.headers } })
      const what = `${method} ${c.description}`
      t.equal(r.status, c.status, what)
      t.equal(r.headers.etag, c.etag ?? E, `${what}: ETag`)
      t.equal(r.headers['last-modified'], LM, `${what}: Last-Modified`)
      t.equal(r.headers['cache-control'], 'private, max-age=30, must-revalidate', `${what}: Cache-Control`)
      t.equal(r.headers.vary, 'Accept-Encoding, Authorization', `${what}: Vary`)
      t.ok(r.headers.date !== undefined && !Number.isNaN(Date.parse(r.headers.date)), `${what}: Date`)
      if (c.status === 304) {
        t.equal(r.body.length, 0, `${what}: no body`)
        t.notOk('content-length' in r.headers, `${what}: no Content-Length on a 304`)
        t.notOk('content-encoding' in r.headers, `${what}: no Content-Encoding on a 304`)
      } else if (method === 'GET') {
        t.same(r.body, c.etag === G ? gzipped.body : identity.body, `${what}: body`)
      }
    }
  }
})

t.test('a 304 is exactly: status, ETag, Last-Modified, Cache-Control, Vary, Date (and Connection: close, which node:http asks for)', async (t) => {
  const r = await rawRequest(server.base, '/v1/threat/feeds', { headers: { ...auth, 'if-none-match': E } })
  const names = r.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase()).filter((n) => n !== 'uwebsockets' && n !== 'connection').sort()
  t.same(names, ['cache-control', 'date', 'etag', 'last-modified', 'vary'])
})

t.test('a new snapshot with other bytes ends the 304s', async (t) => {
  const later = Date.UTC(2026, 2, 2)
  source.set(buildTestSnapshot({ workspaceId: server.workspace.id, feedId: '*', networks: ['192.0.2.0/24'], lastModified: later }))
  t.teardown(() => source.set(buildTestSnapshot({ workspaceId: server.workspace.id, feedId: '*', networks: ['192.0.2.0/24', '198.51.100.7/32'], lastModified: LAST_MODIFIED })))
  const byTag = await rawRequest(server.base, '/v1/threat/feeds', { headers: { ...auth, 'if-none-match': E } })
  t.equal(byTag.status, 200)
  t.not(byTag.headers.etag, E)
  const byDate = await rawRequest(server.base, '/v1/threat/feeds', { headers: { ...auth, 'if-modified-since': LM } })
  t.equal(byDate.status, 200)
  t.equal(byDate.headers['last-modified'], new Date(later).toUTCString())
})

t.test('gzip negotiation table', async (t) => {
  const cases: Array<{ header: string | null, gzip: boolean }> = [
    { header: null, gzip: false },
    { header: '', gzip: false },
    { header: 'gzip', gzip: true },
    { header: 'GZIP', gzip: true },
    { header: 'x-gzip', gzip: true },
    { header: 'gzip, deflate, br, zstd', gzip: true },
    { header: 'br, deflate', gzip: false },
    { header: 'identity', gzip: false },
    { header: 'gzip;q=0', gzip: false },
    { header: 'gzip;q=0.0', gzip: false },
    { header: 'gzip;q=0.001', gzip: true },
    { header: '*', gzip: true },
    { header: '*;q=0', gzip: false },
    { header: '*, gzip;q=0', gzip: false },
    { header: 'gzip;q=0, *', gzip: false },
    { header: 'br;q=1, gzip;q=0.5', gzip: true },
    { header: 'gzip;q=0.5, identity', gzip: false },
    { header: 'identity;q=0.1, gzip;q=0.9', gzip: true },
    { header: 'gzip;q=7', gzip: false },
  ]
  for (const c of cases) {
    const headers = c.header === null ? auth : { ...auth, 'accept-encoding': c.header }
    const r = await rawRequest(server.base, '/v1/threat/feeds', { headers })
    const what = `Accept-Encoding: ${c.header === null ? '(absent)' : JSON.stringify(c.header)}`
    t.equal(r.status, 200, what)
    t.equal(r.headers['content-encoding'], c.gzip ? 'gzip' : undefined, what)
    t.equal(r.headers.etag, c.gzip ? G : E, `${what}: ETag of that representation`)
    t.same(c.gzip ? gunzipSync(r.body) : r.body, identity.body, `${what}: content`)
  }
})
