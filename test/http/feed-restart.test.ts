/**
 * A restart on the same data answers as before, through HTTP (DECISIONS §5: Last-Modified comes
 * from feed version records in the store, ETags from the bytes): a second server over the first
 * one's data directory serves the same bodies with the same ETag and Last-Modified, for both
 * encodings, and a poller's If-None-Match from before the restart still gets its 304.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { feedModule } from '../helpers/feed-module.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { rawRequest } from '../helpers/feed-server.js'

const dataDir = mkdtempSync(join(tmpdir(), 'tf-feed-restart-'))
t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })

/** A server with the feed routes over `dataDir`; `provision` only the first time. */
async function start (provision: boolean): Promise<{ srv: TestServer, stop: () => Promise<void> }> {
  const feeds = feedModule()
  const srv = await startTestServer({ dataDir, provision, env: { THREATFEED_FEED_REBUILD_MS: '0' }, modules: feeds.modules, threadFeeds: feeds.service })
  return { srv, stop: async () => { await feeds.stop(); await srv.close() } }
}

interface Seen { status: number, body: Buffer, etag: string, lastModified: string }

async function get (url: string, key: string, headers: Record<string, string> = {}): Promise<Seen> {
  const r = await rawRequest(url, '/v1/threat/feeds?format=plain', { headers: { authorization: `Bearer ${key}`, ...headers } })
  return { status: r.status, body: r.body, etag: String(r.headers.etag ?? ''), lastModified: String(r.headers['last-modified'] ?? '') }
}

/** Polls until the identity body is `text` (the consumer and the rebuild are asynchronous). */
async function until (url: string, key: string, text: string): Promise<void> {
  const deadline = Date.now() + 5000
  for (;;) {
    const r = await get(url, key)
    if (r.status === 200 && r.body.toString() === text) return
    if (Date.now() > deadline) throw new Error(`feed: ${r.status} ${JSON.stringify(r.body.toString())}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

t.test('ETag, Last-Modified and bytes are the same after a restart on the same data', async (t) => {
  const first = await start(true)
  const key = first.srv.keys.all
  const posted = await fetch(`${first.srv.url}/v1/signal`, {
    method: 'POST',
    headers: first.srv.auth('all'),
    body: JSON.stringify([
      { type: 'access_rules', action: 'block', ip: '192.0.2.10' },
      { type: 'access_rules', action: 'block', ip: '198.51.100.0/24' },
    ]),
  })
  await posted.arrayBuffer()
  t.equal(posted.status, 200)
  await until(first.srv.url, key, '192.0.2.10/32\n198.51.100.0/24\n')
  const before = { identity: await get(first.srv.url, key), gzip: await get(first.srv.url, key, { 'accept-encoding': 'gzip' }) }
  await first.stop()
  // Versions are kept in whole seconds: a restart within the same second would prove less.
  await new Promise((resolve) => setTimeout(resolve, 1100))

  const second = await start(false)
  t.teardown(second.stop)
  await until(second.srv.url, key, '192.0.2.10/32\n198.51.100.0/24\n')
  for (const [name, headers] of [['identity', {}], ['gzip', { 'accept-encoding': 'gzip' }]] as const) {
    const was = before[name]
    const now = await get(second.srv.url, key, headers)
    t.equal(now.status, 200, `${name}: 200`)
    t.not(was.etag, '', `${name}: an ETag`)
    t.equal(now.etag, was.etag, `${name}: the same ETag`)
    t.not(was.lastModified, '', `${name}: a Last-Modified`)
    t.equal(now.lastModified, was.lastModified, `${name}: the same Last-Modified`)
    t.same(now.body, was.body, `${name}: the same bytes`)
    const polled = await get(second.srv.url, key, { ...headers, 'if-none-match': was.etag })
    t.equal(polled.status, 304, `${name}: a poller's ETag from before the restart gets a 304`)
  }
})
