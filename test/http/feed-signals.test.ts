/**
 * Signals in, feed out, all through HTTP on the shared test server (test/helpers/server.ts): v1 and
 * v2 signals land in the store through the stream consumer, the FeedService rebuilds, and the feed
 * routes (with their own list directory, as in production) publish the result; an unblock ends
 * the 304s of pollers.
 */
import t from 'tap'
import { feedModule } from '../helpers/feed-module.js'
import { startTestServer } from '../helpers/server.js'
import { rawRequest } from '../helpers/feed-server.js'

const feeds = feedModule()
const srv = await startTestServer({ env: { THREATFEED_FEED_REBUILD_MS: '0' }, modules: feeds.modules, threadFeeds: feeds.service })
t.teardown(async () => {
  await feeds.stop()
  await srv.close()
})

async function post (path: string, body: unknown): Promise<number> {
  const r = await fetch(`${srv.url}${path}`, { method: 'POST', headers: srv.auth('all'), body: JSON.stringify(body) })
  await r.arrayBuffer()
  return r.status
}

/** Polls the feed until it shows `body` (consumer and rebuild are asynchronous, bounded by the spec's 1 s + rebuild). */
async function until (path: string, body: string, key: 'all' | 'read' = 'read'): Promise<{ etag: string }> {
  const deadline = Date.now() + 5000
  for (;;) {
    const r = await rawRequest(srv.url, path, { headers: { authorization: `Bearer ${srv.keys[key]}` } })
    if (r.status === 200 && r.body.toString() === body) return { etag: r.headers.etag! }
    if (Date.now() > deadline) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body.toString())}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

t.test('v1 and v2 signals become the feed; an allow rule is carved out', async (t) => {
  t.equal(await post('/v1/signal', [
    { type: 'access_rules', action: 'block', ip: '192.0.2.10' },
    { type: 'access_rules', action: 'block', ip: '198.51.100.0/24' },
  ]), 200)
  t.equal(await post('/v2/signal', [
    { kind: 'access_rule', op: 'upsert', rule_ref: 'scanner-1', labels: { source: 'scanners' }, rule: { target: { ip: '2001:db8::/32' }, action: 'block' } },
    { kind: 'access_rule', op: 'upsert', rule: { target: { ip: '198.51.100.128/25' }, action: 'allow' } },
  ]), 200)
  await until('/v1/threat/feeds', '192.0.2.10/32\n198.51.100.0/25\n2001:db8::/32\n')
  await until('/v1/threat/feeds?action=allow', '198.51.100.128/25\n')
  t.pass('feed reflects the signals')
})

t.test('a list created after start-up is served by name with its selector', async (t) => {
  await srv.store.lists.create({ workspaceId: srv.workspace.id, name: 'scanners', description: '', defaults: {}, selector: { source: 'scanners' } })
  await until('/v1/threat/feeds/scanners', '2001:db8::/32\n')
  t.pass('list feed served')
})

t.test('an unblock ends the 304s of a poller', async (t) => {
  const { etag } = await until('/v1/threat/feeds?family=v4', '192.0.2.10/32\n198.51.100.0/25\n')
  const hit = await rawRequest(srv.url, '/v1/threat/feeds?family=v4', { headers: { authorization: `Bearer ${srv.keys.read}`, 'if-none-match': etag } })
  t.equal(hit.status, 304)
  t.equal(await post('/v1/signal', [{ type: 'access_rules', action: 'unblock', ip: '192.0.2.10' }]), 200)
  await until('/v1/threat/feeds?family=v4', '198.51.100.0/25\n')
  const miss = await rawRequest(srv.url, '/v1/threat/feeds?family=v4', { headers: { authorization: `Bearer ${srv.keys.read}`, 'if-none-match': etag } })
  t.equal(miss.status, 200)
  t.equal(miss.body.toString(), '198.51.100.0/25\n')
})
