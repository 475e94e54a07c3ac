/**
 * /readyz and which feeds a start builds (DECISIONS §6 as the README restates it, issue 15 §3):
 * ready means the store answers, geo and the key and list catalog are loaded, and the feeds
 * served in the hour before the start are built; every other feed is built on its first request.
 * Through the whole server (src/main.ts), restarted on the same data directory.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer, type RunningServer } from '../../src/main.js'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-readiness-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

async function start (): Promise<{ server: RunningServer, base: string }> {
  const config = loadConfig({ HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: dir, THREATFEED_LOG_LEVEL: 'silent', THREATFEED_POLL_MS: '100', THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB, THREATFEED_GEO_ASN_DB: ASN_TEST_DB })
  const server = await startServer(config, createLogger('silent'))
  return { server, base: `http://127.0.0.1:${server.port}` }
}

async function readyz (base: string): Promise<{ status: number, body: { status: string, checks: Record<string, unknown> } }> {
  for (let i = 0; ; i++) {
    const r = await fetch(`${base}/readyz`)
    const body = await r.json() as { status: string, checks: Record<string, unknown> }
    if (r.status === 200 || i === 400) return { status: r.status, body }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** `name{labels} value` lines of a scrape whose name matches and whose labels include `has`. */
async function samples (base: string, name: string, has = ''): Promise<string[]> {
  const text = await (await fetch(`${base}/metrics`)).text()
  return text.split('\n').filter((l) => l.startsWith(name + '{') && l.includes(has))
}

t.test('a restart builds the feeds served in the hour before it ahead of ready, the others on their first request', async (t) => {
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
  const key = generateApiKey()
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['feeds:read'] })
  const list = await store.lists.create({ workspaceId: ws.id, name: 'unpolled', description: '', defaults: {}, selector: {} })
  await store.close()
  const get = async (base: string, path: string): Promise<number> => {
    const r = await fetch(`${base}/v1/threat/feeds${path}`, { headers: { authorization: `Bearer ${key}` } })
    await r.arrayBuffer()
    return r.status
  }

  const first = await start()
  t.equal((await readyz(first.base)).status, 200)
  t.same(await samples(first.base, 'threatfeed_feed_builds_total'), [], 'nothing served yet: nothing built')
  t.equal(await get(first.base, ''), 200)
  // The next poll of the feed service (100 ms) records that the workspace feed was served.
  await new Promise((resolve) => setTimeout(resolve, 500))
  await first.server.stop()

  const second = await start()
  t.teardown(() => second.server.stop())
  const ready = await readyz(second.base)
  t.equal(ready.status, 200)
  t.same(ready.body, { status: 'ready', can: { signals: true, feeds: true }, checks: { geo: true, lists: true, feeds: true, consumer: true, store: true, signals: true } })
  t.same(await samples(second.base, 'threatfeed_feed_builds_total', 'outcome="built"'), ['threatfeed_feed_builds_total{reason="start",outcome="built"} 1'],
    'one feed built before ready: the one served before the restart')
  t.equal((await samples(second.base, 'threatfeed_feed_entries', 'feed="*"')).length, 4, 'the workspace feed is in memory')
  t.same(await samples(second.base, 'threatfeed_feed_entries', list.id), [], 'the unpolled list is not')
  t.equal(await get(second.base, `/${list.id}`), 200)
  t.same(await samples(second.base, 'threatfeed_feed_builds_total', 'reason="demand"'), ['threatfeed_feed_builds_total{reason="demand",outcome="built"} 1'],
    'the list is built on its first request')
})
