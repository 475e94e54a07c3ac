/**
 * A running server with what each console page shows, made through the public interfaces: signals
 * posted (a rule named like an HTML attack among them), a list whose publish guard holds its new
 * build, the workspace feed polled by two consumers of which one stops (stale), a batch with a
 * failed entry, an admin key to sign in with, and an admin:all key with a second workspace whose
 * rule only it can explain and whose workspace feed's guard holds a build.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'node:http'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer, type RunningServer } from '../../src/main.js'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'

/** The name of a rule and a list: rendered as HTML it would run a script. */
export const HOSTILE = '<img src=x onerror=alert(1)>'
/** The guarded list and its addresses (20 published, then 15 unblocked: a 71 % shrink of 21, held). */
export const GUARDED = 'edge'
// Odd last octets: no two coalesce, so the feed has one line per address.
export const BLOCKED = Array.from({ length: 20 }, (_, i) => `198.51.100.${2 * i + 1}`)
export const EXPLAINED = BLOCKED[0]!
export const FAILED_REASON = 'Entry 1: rule.target.ip: IPv4 octet 300 is out of range'
/** A list of 64 shards whose shards were all polled (history seeded): its variant table must stay short. */
export const SHARDED = 'shards-64'
export const LONG_USER_AGENT = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.6099.71 Safari/537.36 threatfeed-sync/2.4.1'
/** A v2 batch of 7 entries refused whole: 2 WAF rules without rule.type (DECISIONS §3). */
export const REFUSED_OUTCOME = 'refused whole: 7 entries, 2 invalid, none accepted'
/** A second workspace, and an address blocked only there (explain with an admin:all key). */
export const OTHER_WORKSPACE = 'fleet-b'
export const OTHER_EXPLAINED = '203.0.113.9'
export const OTHER_RULE_NAME = 'fleet-b scanner'
/** Blocked in the second workspace, then unblocked: its workspace feed (min_entries 2) holds that build. */
export const OTHER_DROPPED = '203.0.113.11'

export interface ConsoleFixture {
  readonly server: RunningServer
  readonly base: string
  readonly adminKey: string
  readonly adminKeyId: string
  /** signals:write and feeds:read: a valid key without an admin scope. */
  readonly feedKey: string
  /** feedKey's id: what the batches page names as the poster. */
  readonly feedKeyId: string
  /** admin:all, in the first workspace. */
  readonly rootKey: string
  readonly otherWorkspaceId: string
  readonly workspaceId: string
  readonly guardedId: string
  readonly shardedId: string
  /** GET on the API with the admin key. */
  api<T> (path: string): Promise<T>
  /** Polls the workspace feed as the consumer that goes on polling; stop() ends it. */
  stop (): Promise<void>
}

async function until (what: string, probe: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await probe()) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`console fixture: ${what} did not happen within ${ms} ms`)
}

/** A feed poll from a loopback address of its own, so the two consumers are two appliances. */
function poll (port: number, path: string, key: string, from: string, userAgent: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, localAddress: from, headers: { authorization: `Bearer ${key}`, 'user-agent': userAgent } }, (res) => {
      res.resume()
      res.on('end', () => { resolve(res.statusCode ?? 0) })
    })
    req.on('error', reject)
    req.end()
  })
}

/**
 * 30 days of hourly size points for the default variant of the workspace feed and of the guarded
 * list, written to the journal as the server's sampler writes them (src/http/admin-journal.ts,
 * every 5 minutes, with no setting to make it sooner): a test cannot wait a month. Entries climb
 * in steps so the charts have changes to draw.
 */
async function seedHistory (server: RunningServer, workspaceId: string, shardedId: string): Promise<void> {
  const journal = server.store.journal
  if (journal === undefined) throw new Error('console fixture: the store has no journal')
  const hour = 3_600_000
  const start = Math.floor(Date.now() / hour) * hour - 30 * 24 * hour
  const lists = await server.store.lists.list(workspaceId)
  const guarded = lists.find((l) => l.name === GUARDED)
  const entries = []
  for (const feed of guarded === undefined ? ['*'] : ['*', guarded.id]) {
    for (let i = 0; i < 30 * 24; i++) {
      const n = 6 + Math.floor(i / 48) + (i % 97 === 0 ? 3 : 0)
      entries.push({ table: 'feed_size' as const, partition: `${workspaceId}/${feed}`, at: start + i * hour, id: 'plain|both|block|', data: { entries: n, bytes: n * 16, gzip_bytes: n * 6 + 20, status: 200, sampled_at: start + i * hour } })
    }
  }
  // One recent point per shard of two formats, as if each of the 64 shards had been polled.
  for (const format of ['plain', 'dialect_a']) {
    for (let i = 1; i <= 64; i++) {
      entries.push({ table: 'feed_size' as const, partition: `${workspaceId}/${shardedId}`, at: start + 30 * 24 * hour - hour, id: `${format}|both|block||${i}/64`, data: { entries: 100 + i, bytes: (100 + i) * 16, gzip_bytes: (100 + i) * 6, status: 200, sampled_at: start } })
    }
  }
  await journal.put(entries)
}

export async function startConsoleFixture (): Promise<ConsoleFixture> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-console-'))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = await store.workspaces.create({ name: 'fleet-a', subscription: 'active' })
  const adminKey = generateApiKey()
  const feedKey = generateApiKey()
  const rootKey = generateApiKey()
  const otherKey = generateApiKey()
  const adminKeyId = (await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(adminKey), scopes: ['admin'] })).id
  const feedKeyId = (await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(feedKey), scopes: ['signals:write', 'feeds:read'] })).id
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(rootKey), scopes: ['admin:all'] })
  const other = await store.workspaces.create({ name: OTHER_WORKSPACE, subscription: 'active' })
  await store.keys.create({ workspaceId: other.id, hash: hashApiKey(otherKey), scopes: ['signals:write', 'feeds:read'] })
  await store.workspaces.update(other.id, { feedGuards: { minEntries: 2 } })
  await store.close()
  const config = loadConfig({
    HOST: '127.0.0.1',
    PORT: '0',
    THREATFEED_DATA_DIR: dir,
    THREATFEED_LOG_LEVEL: 'silent',
    THREATFEED_POLL_MS: '100',
    THREATFEED_FEED_REBUILD_MS: '0',
    THREATFEED_CONSUMER_STALE: '2s',
    THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
    THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
  })
  const server = await startServer(config, createLogger(config.logLevel))
  const base = `http://127.0.0.1:${server.port}`
  const send = async (method: string, path: string, key: string, body?: unknown): Promise<{ status: number, body: unknown }> => {
    const r = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
    const text = await r.text()
    return { status: r.status, body: text === '' ? null : JSON.parse(text) }
  }
  const must = async (method: string, path: string, key: string, body: unknown, status: number): Promise<unknown> => {
    const r = await send(method, path, key, body)
    if (r.status !== status) throw new Error(`console fixture: ${method} ${path} answered ${r.status}, not ${status}: ${JSON.stringify(r.body)}`)
    return r.body
  }
  const api = async <T>(path: string): Promise<T> => (await must('GET', path, adminKey, undefined, 200)) as T

  const guarded = await must('POST', '/v1/admin/lists', adminKey, { name: GUARDED, description: 'edge firewalls', guards: { max_shrink_pct: 50, mode: 'hold' } }, 201) as { id: string }
  await must('POST', '/v1/admin/lists', adminKey, { name: HOSTILE, description: HOSTILE }, 201)
  const sharded = await must('POST', '/v1/admin/lists', adminKey, { name: SHARDED, description: 'a fleet polling 64 shards', shards: 64 }, 201) as { id: string }
  await seedHistory(server, ws.id, sharded.id)
  await must('POST', '/v1/signal', otherKey, [{ type: 'access_rules', action: 'block', ip: OTHER_EXPLAINED, name: OTHER_RULE_NAME }, { type: 'access_rules', action: 'block', ip: OTHER_DROPPED }], 200)
  const otherFeed = (): Promise<Response> => fetch(`${base}/v1/threat/feeds`, { headers: { authorization: `Bearer ${otherKey}` } })
  await until('the second workspace\'s feed published with 2 entries', async () => (await (await otherFeed()).text()).trim().split('\n').length === 2)
  await must('POST', '/v1/signal', otherKey, [{ type: 'access_rules', action: 'unblock', ip: OTHER_DROPPED }], 200)
  await until('the second workspace\'s feed held', async () => {
    const r = await otherFeed()
    await r.arrayBuffer()
    const w = await must('GET', `/v1/admin/workspaces/${other.id}`, rootKey, undefined, 200) as { publish?: { held: unknown } }
    return r.headers.get('x-feed-held') !== null && w.publish?.held !== null && w.publish?.held !== undefined
  })
  await must('POST', '/v1/signal', feedKey, BLOCKED.map((ip, i) => ({ type: 'access_rules', action: 'block', ip, ...(i === 0 ? { name: HOSTILE, description: HOSTILE } : {}) })), 200)
  // Refused whole, before the 206 one (which stays the newest failure, shown first).
  const waf = (ref: string): unknown => ({ kind: 'waf_rule', op: 'upsert', rule_ref: ref, rule: { name: ref, expression: 'http.request.uri.path eq "/x"', action: 'block' } })
  await must('POST', '/v2/signal', feedKey, [...[1, 2, 3, 4, 5].map((i) => ({ kind: 'access_rule', op: 'upsert', rule_ref: `refused-${i}`, rule: { target: { ip: `192.0.2.${100 + i}` } } })), waf('no-type-1'), waf('no-type-2')], 400)
  // v2 with one bad entry: the batch the batches page shows first, with its reason.
  await must('POST', '/v2/signal', feedKey, [
    { kind: 'access_rule', op: 'upsert', rule_ref: 'ok-1', rule: { target: { ip: '192.0.2.10' } } },
    { kind: 'access_rule', op: 'upsert', rule_ref: 'bad-1', rule: { target: { ip: '300.1.1.1' } } },
  ], 206)

  const listFeed = `/v1/threat/feeds/${GUARDED}`
  // The 20 blocked addresses and the v2 batch's one good entry.
  await until('the guarded list published with 21 entries', async () => {
    const r = await fetch(`${base}${listFeed}`, { headers: { authorization: `Bearer ${feedKey}` } })
    return r.status === 200 && (await r.text()).trim().split('\n').length === BLOCKED.length + 1
  })
  // Two appliances poll the workspace feed; B stops after three polls and goes stale (2 s).
  for (let i = 0; i < 3; i++) {
    await poll(server.port, '/v1/threat/feeds', feedKey, '127.0.0.2', 'FortiGate-A')
    await poll(server.port, '/v1/threat/feeds', feedKey, '127.0.0.3', 'PAN-OS-B')
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  // A third appliance with a browser-like User-Agent, polling the sharded list's first shard:
  // the consumers table must not break its words (or any address) at 1280 px.
  await poll(server.port, `/v1/threat/feeds/${sharded.id}?shard=1&of=64&client=edge-fw-03.dc-west`, feedKey, '127.0.0.4', LONG_USER_AGENT)
  let polling = true
  const a = (async () => {
    while (polling) {
      await poll(server.port, '/v1/threat/feeds', feedKey, '127.0.0.2', 'FortiGate-A')
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  })()
  // 15 of 21 unblocked: a 71 % shrink, over max_shrink_pct 50, so the new build is held.
  await must('POST', '/v1/signal', feedKey, BLOCKED.slice(5).map((ip) => ({ type: 'access_rules', action: 'unblock', ip })), 200)
  await until('the guarded list held', async () => {
    await fetch(`${base}${listFeed}`, { headers: { authorization: `Bearer ${feedKey}` } }).then((r) => r.arrayBuffer())
    const l = await api<{ publish?: { held: unknown } }>(`/v1/admin/lists/${guarded.id}`)
    return l.publish?.held !== null && l.publish?.held !== undefined
  })
  await until('consumer B stale', async () => {
    const c = await api<{ items: Array<{ user_agent: string | null, stale: boolean }> }>('/v1/admin/consumers')
    return c.items.some((x) => x.user_agent === 'PAN-OS-B' && x.stale)
  })
  return {
    server,
    base,
    adminKey,
    adminKeyId,
    feedKey,
    feedKeyId,
    rootKey,
    otherWorkspaceId: other.id,
    workspaceId: ws.id,
    guardedId: guarded.id,
    shardedId: sharded.id,
    api,
    async stop () {
      polling = false
      await a
      await server.stop()
    },
  }
}
