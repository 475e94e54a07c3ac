/**
 * The feed handler copies a poll's request into one reused object when the answer is written
 * within uWS's callback (feed-routes.ts). A poll that waits for a build must keep its own copy
 * while other requests — answered or refused at once — go through the handler meanwhile: its
 * answer is the variant, encoding and method it asked for, not the last request's.
 */
import t from 'tap'
import { gunzipSync } from 'node:zlib'
import { bearer, buildTestSnapshot, rawRequest, StaticFeedSource, startFeedServer } from '../helpers/feed-server.js'

const source = new StaticFeedSource()
const server = await startFeedServer(() => source)
t.teardown(() => server.stop())
const snapshot = buildTestSnapshot({ workspaceId: server.workspace.id, feedId: '*', networks: ['192.0.2.0/24', '2001:db8::/32'], lastModified: Date.UTC(2026, 0, 2, 3, 4, 5) })
const auth = bearer(server.key)

/** Sends `waiting` while the feed is not built, then `meanwhile` (each answered before the build), then builds the feed. */
async function whileWaiting (waiting: { path: string, method?: string, headers?: Record<string, string> }, meanwhile: Array<{ path: string, method: string, headers: Record<string, string>, status: number }>): Promise<Awaited<ReturnType<typeof rawRequest>>> {
  source.delete(server.workspace.id, '*')
  const before = source.awaited
  const pending = rawRequest(server.base, waiting.path, { method: waiting.method, headers: { ...auth, ...waiting.headers } })
  while (source.awaited === before) await new Promise((resolve) => setTimeout(resolve, 5))
  for (const m of meanwhile) {
    const r = await rawRequest(server.base, m.path, { method: m.method, headers: { ...auth, ...m.headers } })
    if (r.status !== m.status) throw new Error(`${m.method} ${m.path}: ${r.status}, expected ${m.status}`)
  }
  source.set(snapshot)
  return await pending
}

const meanwhile = [
  { name: 'refused at once (400, HEAD, gzip)', requests: [{ path: '/v1/threat/feeds?format=bogus', method: 'HEAD', headers: { 'accept-encoding': 'gzip' }, status: 400 }] },
  { name: 'refused at once (404 list, gzip, Connection: close)', requests: [{ path: '/v1/threat/feeds/%00', method: 'GET', headers: { 'accept-encoding': 'gzip', connection: 'close' }, status: 404 }] },
]

for (const m of meanwhile) {
  t.test(`a waiting poll keeps its own request: ${m.name}`, async (t) => {
    const variant = snapshot.variants.get('dialect_a|v4|block|')!
    const identity = await whileWaiting({ path: '/v1/threat/feeds?format=dialect_a&family=v4' }, m.requests)
    t.equal(identity.status, 200)
    t.equal(identity.headers['content-encoding'], undefined, 'identity, as it asked')
    t.equal(identity.headers.etag, variant.identity.etag, 'the variant it asked for')
    t.same(identity.body, Buffer.from(variant.identity.body))

    const v6 = snapshot.variants.get('plain|v6|block|')!
    const gzip = await whileWaiting({ path: '/v1/threat/feeds?family=v6', headers: { 'accept-encoding': 'gzip' } }, m.requests)
    t.equal(gzip.status, 200)
    t.equal(gzip.headers.etag, v6.gzip.etag, 'the gzip representation of its variant')
    t.same(gunzipSync(gzip.body), Buffer.from(v6.identity.body))

    const head = await whileWaiting({ path: '/v1/threat/feeds', method: 'HEAD' }, m.requests)
    t.equal(head.status, 200)
    t.equal(head.body.byteLength, 0, 'HEAD: no body')
    t.equal(head.headers['content-length'], String(snapshot.variants.get('plain|both|block|')!.identity.body.byteLength))
  })
}

t.test('two polls waiting for the same build each get their own variant', async (t) => {
  source.delete(server.workspace.id, '*')
  const before = source.awaited
  const a = rawRequest(server.base, '/v1/threat/feeds?format=dialect_b&family=v6', { headers: auth })
  const b = rawRequest(server.base, '/v1/threat/feeds?format=nftables&family=v4', { headers: { ...auth, 'accept-encoding': 'gzip' } })
  while (source.awaited < before + 2) await new Promise((resolve) => setTimeout(resolve, 5))
  source.set(snapshot)
  const [ra, rb] = await Promise.all([a, b])
  t.equal(ra.headers.etag, snapshot.variants.get('dialect_b|v6|block|')!.identity.etag)
  t.equal(rb.headers.etag, snapshot.variants.get('nftables|v4|block|')!.gzip.etag)
})
