/**
 * The feed handler copies a poll's request into one reused object when the answer is written
 * within uWS's callback (feed-routes.ts). A poll that waits for a build must keep its own copy
 * while other requests — answered or refused at once — go through the handler meanwhile: its
 * answer is the variant, encoding and method it asked for, not the last request's.
 */
import t from 'tap'
import { gunzipSync } from 'node:zlib'
import { bearer, buildTestSnapshot, rawRequest, StaticFeedSource, startFeedServer } from '../helpers/feed-server.js'
import type { ConsumerFlush, PollFacts } from '../../src/http/consumers.js'

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

t.test('with consumer tracking, a waiting poll is counted as itself, not as the polls answered meanwhile', async (t) => {
  // What the tracker was told, copied when told; with front-end threads, each thread's tracker
  // counts and hands its flushes over, one record per consumer (here, one poll each).
  const counted: Array<{ workspaceId: string, keyId: string, userAgent: string, client: string, listRef: string, variant: string | null, status: number, etag: string | null }> = []
  const tracker = {
    count (p: PollFacts, status: number, etag: string | null): void {
      counted.push({ workspaceId: p.workspaceId, keyId: p.keyId, userAgent: p.userAgent, client: p.client, listRef: p.listRef, variant: p.variant?.key ?? null, status, etag })
    },
    absorb (_thread: number, flush: ConsumerFlush): void {
      for (const r of flush.records) {
        counted.push({ workspaceId: r.workspaceId, keyId: r.keyId, userAgent: r.userAgent, client: r.client, listRef: r.listId, variant: r.variant === '' ? null : r.variant, status: r.last.status, etag: r.held?.etag ?? null })
      }
    },
  }
  const tracked = new StaticFeedSource()
  const s = await startFeedServer(() => tracked, { tracker })
  t.teardown(() => s.stop())
  const other = buildTestSnapshot({ workspaceId: s.otherWorkspace.id, feedId: '*', networks: ['198.51.100.0/24'], lastModified: Date.UTC(2026, 0, 3) })
  tracked.set(other)
  const own = buildTestSnapshot({ workspaceId: s.workspace.id, feedId: '*', networks: ['192.0.2.0/24'], lastModified: Date.UTC(2026, 0, 2) })

  const waiting = rawRequest(s.base, '/v1/threat/feeds?format=dialect_a&family=v4&client=waiter-1', { headers: { ...bearer(s.key), 'user-agent': 'waiter' } })
  while (tracked.awaited === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  // Answered at once while it waits: a 200 and a 304 of another workspace, a 400, a 404.
  const meanwhile = [
    { path: '/v1/threat/feeds?family=v6&client=other-1', key: s.otherKey, userAgent: 'other-200', ifNoneMatch: '', status: 200 },
    { path: '/v1/threat/feeds', key: s.otherKey, userAgent: 'other-304', ifNoneMatch: other.variants.get('plain|both|block|')!.identity.etag, status: 304 },
    { path: '/v1/threat/feeds?format=bogus&client=junk-1', key: s.key, userAgent: 'junk', ifNoneMatch: '', status: 400 },
    { path: '/v1/threat/feeds/nowhere', key: s.key, userAgent: 'lost', ifNoneMatch: '', status: 404 },
  ]
  for (const m of meanwhile) {
    const headers: Record<string, string> = { ...bearer(m.key), 'user-agent': m.userAgent }
    if (m.ifNoneMatch !== '') headers['if-none-match'] = m.ifNoneMatch
    t.equal((await rawRequest(s.base, m.path, { headers })).status, m.status, `${m.userAgent}: answered at once`)
  }
  tracked.set(own)
  const answer = await waiting
  t.equal(answer.status, 200)
  const variant = own.variants.get('dialect_a|v4|block|')!
  t.equal(answer.headers.etag, variant.identity.etag)

  // With front-end threads the counts reach the tracker at the threads' flushes (5 s).
  const deadline = Date.now() + 15_000
  while (counted.length < 4 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  const by = (userAgent: string): unknown => counted.find((c) => c.userAgent === userAgent)
  t.same(by('waiter'), { workspaceId: s.workspace.id, keyId: counted.find((c) => c.userAgent === 'waiter')?.keyId, userAgent: 'waiter', client: 'waiter-1', listRef: '*', variant: 'dialect_a|v4|block|', status: 200, etag: variant.identity.etag })
  t.match(by('waiter'), { keyId: /^[0-9a-f-]{36}$/ })
  t.not(counted.find((c) => c.userAgent === 'waiter')?.keyId, counted.find((c) => c.userAgent === 'other-200')?.keyId, 'its own key')
  t.match(by('other-200'), { workspaceId: s.otherWorkspace.id, client: 'other-1', variant: 'plain|v6|block|', status: 200 })
  t.match(by('other-304'), { workspaceId: s.otherWorkspace.id, client: '', variant: 'plain|both|block|', status: 304 })
  t.match(by('junk'), { workspaceId: s.workspace.id, client: '', variant: null, status: 400 })
  t.equal(by('lost'), undefined, 'a list that does not exist is nobody\'s')
  t.equal(counted.length, 4, 'one count per answer')
})
