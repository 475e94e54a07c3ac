/**
 * /metrics is bounded by the feeds in use, not by every list ever created (issue 15 §4: 250
 * unpolled lists gave 2,216 `threatfeed_feed_entries` series and a 368 KB scrape). Through the
 * whole server (src/main.ts): a workspace with 1,000 lists of which three are polled; the scrape
 * carries per-feed series for the polled feeds only, a few hundred series in all.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer } from '../../src/main.js'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'

const LISTS = 1000

t.test('1,000 lists, three polled: per-feed series for the polled feeds only, a few hundred series in all', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-metrics-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
  const key = generateApiKey()
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['feeds:read'] })
  const lists = await Promise.all(Array.from({ length: LISTS }, (_, i) =>
    store.lists.create({ workspaceId: ws.id, name: `list-${i}`, description: '', defaults: {}, selector: { n: String(i % 7) } })))
  await store.close()

  const config = loadConfig({ HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: dir, THREATFEED_LOG_LEVEL: 'silent', THREATFEED_POLL_MS: '100', THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB, THREATFEED_GEO_ASN_DB: ASN_TEST_DB })
  const server = await startServer(config, createLogger('silent'))
  t.teardown(() => server.stop())
  const base = `http://127.0.0.1:${server.port}`
  let ready = 0
  for (let i = 0; i < 1200 && ready !== 200; i++) {
    ready = (await fetch(`${base}/readyz`)).status
    if (ready !== 200) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.equal(ready, 200, 'ready')

  const polled = ['', `/${lists[0]!.id}`, '/list-1', '/list-2']
  for (const path of polled) {
    const r = await fetch(`${base}/v1/threat/feeds${path}`, { headers: { authorization: `Bearer ${key}` } })
    await r.arrayBuffer()
    t.equal(r.status, 200, `GET /v1/threat/feeds${path}`)
  }
  // A poll of the feed service sets the snapshot ages.
  await new Promise((resolve) => setTimeout(resolve, 300))

  const r = await fetch(`${base}/metrics`)
  const text = await r.text()
  const series = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'))
  const named = (name: string): string[] => series.filter((l) => l.startsWith(name + '{'))
  t.equal(named('threatfeed_feed_entries').length, polled.length * 4, 'entries: action × family for each polled feed')
  t.equal(named('threatfeed_feed_snapshot_age_seconds').length, polled.length, 'snapshot age: one per polled feed')
  const feeds = new Set(named('threatfeed_feed_entries').map((l) => /feed="([^"]*)"/.exec(l)![1]))
  t.same([...feeds].sort(), ['*', lists[0]!.id, lists[1]!.id, lists[2]!.id].sort(), 'the polled feeds, and only those')
  t.ok(series.length <= 300, `${series.length} series in all`)
  t.ok(text.length < 64 * 1024, `a ${text.length}-byte scrape`)
})
