/**
 * A key created a moment ago by another process (the CLI's `key create`, or another node) works on
 * its first request, not only after the next poll of the key set: an unknown key makes the server
 * reload the keys if the admin revision moved before it answers 401 — one reload per
 * MISS_RECHECK_MS however many unknown keys arrive. The poll interval here is a minute, so only
 * that reload can let the new key in.
 */
import t from 'tap'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { MISS_RECHECK_MS } from '../../src/http/auth.js'
import { signalRoutes } from '../../src/http/signal-routes.js'
import { SignalIngester } from '../../src/ingest/batch.js'
import { basic, bearer, buildTestSnapshot, rawRequest, StaticFeedSource, startFeedServer } from '../helpers/feed-server.js'

const source = new StaticFeedSource()
let ingester: SignalIngester | null = null
const server = await startFeedServer((store) => {
  ingester = new SignalIngester({ stream: store.stream, checks: { asnExists: () => true, checkExpressions: true } })
  return source
}, {
  env: { THREATFEED_POLL_MS: '60000' },
  extra: [(router, ctx) => { signalRoutes({ ingester: ingester! })(router, ctx) }],
})
t.teardown(() => server.stop())
source.set(buildTestSnapshot({ workspaceId: server.workspace.id, feedId: '*', networks: ['192.0.2.0/24'], lastModified: Date.UTC(2026, 0, 1) }))

async function newKey (scopes: Array<'feeds:read' | 'signals:write'>): Promise<{ key: string, id: string }> {
  const key = generateApiKey()
  const stored = await server.store.keys.create({ workspaceId: server.workspace.id, hash: hashApiKey(key), scopes })
  return { key, id: stored.id }
}

t.test('a feed key created elsewhere answers 200 on its first poll, Bearer and Basic', async (t) => {
  const { key } = await newKey(['feeds:read'])
  t.equal((await rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(key) })).status, 200, 'Bearer')
  const { key: second } = await newKey(['feeds:read'])
  t.equal((await rawRequest(server.base, '/v1/threat/feeds?format=dialect_a', { headers: basic(second) })).status, 200, 'Basic')
  t.equal((await rawRequest(server.base, '/v1/threat/feeds/no-such-list', { headers: bearer(second) })).status, 404, 'a list route resolves after the reload too')
})

t.test('a signal key created elsewhere is accepted on its first post, its body read whole', async (t) => {
  const { key } = await newKey(['signals:write'])
  const body = JSON.stringify(Array.from({ length: 1000 }, (_, i) => ({ type: 'access_rules', action: 'block', ip: `10.${i >> 8}.${i & 255}.1` })))
  const r = await fetch(`${server.base}/v1/signal`, { method: 'POST', headers: { ...bearer(key), 'content-type': 'application/json' }, body })
  t.equal(r.status, 200, await r.text())
})

t.test('a key revoked elsewhere is still refused; unknown keys share the reloads', async (t) => {
  const { key, id } = await newKey(['feeds:read'])
  t.equal((await rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(key) })).status, 200)
  await server.store.keys.revoke(id)
  // The cached key stays good until the key set reloads: a revoke is seen within the poll interval
  // (here a minute), as before. An unknown key forces that reload.
  t.equal((await rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(generateApiKey()) })).status, 401)
  t.equal((await rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(key) })).status, 401, 'revoked')

  let reads = 0
  const revisions = server.store.revisions.bind(server.store)
  server.store.revisions = async () => { reads++; return revisions() }
  t.teardown(() => { server.store.revisions = revisions })
  const t0 = Date.now()
  const answers = await Promise.all(Array.from({ length: 200 }, () => rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(generateApiKey()) })))
  const elapsed = Date.now() - t0
  t.same([...new Set(answers.map((a) => a.status))], [401])
  t.ok(reads <= Math.ceil(elapsed / MISS_RECHECK_MS) + 1, `${reads} store reads for 200 unknown keys in ${elapsed} ms`)
})
