/**
 * Explain says when a publish guard holds a feed back (issue 20 with issue 21): the feed it
 * explains is the last good build, and the answer carries `held` with the guard and the digest
 * `threatfeed list accept` takes. Through the server as `threatfeed serve` composes it.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer } from '../../src/main.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import type { AccessRuleInput } from '../../src/store/types.js'
import type { Explanation } from '../../src/feed/explain.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-explain-held-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const server = await startServer(loadConfig({
  HOST: '127.0.0.1',
  PORT: '0',
  THREATFEED_DATA_DIR: dir,
  THREATFEED_LOG_LEVEL: 'silent',
  THREATFEED_POLL_MS: '50',
  THREATFEED_FEED_REBUILD_MS: '50',
  THREATFEED_WORKERS: '1',
  THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
  THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
}), createLogger('silent'))
t.teardown(() => server.stop())
const base = `http://127.0.0.1:${server.port}`

const ws = await server.store.workspaces.create({ name: 'acme', subscription: 'active' })
const key = generateApiKey()
await server.store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['feeds:read', 'rules:read'] })
const headers = { authorization: `Bearer ${key}` }
const rule = (ip: string): AccessRuleInput => ({ kind: 'access_rule', workspaceId: ws.id, ruleRef: null, labels: { feed: 'edl' }, reason: null, expiresAt: null, seq: 0, target: { type: 'ip', value: ip }, action: 'block', name: null, confidence: null, severity: null })
const hosts = ['198.51.100.1/32', '198.51.100.3/32', '198.51.100.5/32', '198.51.100.7/32', '198.51.100.9/32']
for (const h of hosts) await server.store.rules.upsertAccessRule(rule(h))
const list = await server.store.lists.create({ workspaceId: ws.id, name: 'edl', description: '', defaults: { guards: { minEntries: 5 } }, selector: { feed: 'edl' } })

async function until (what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
const feed = (): Promise<Response> => fetch(`${base}/v1/threat/feeds/${list.id}`, { headers })
async function explain (ip: string): Promise<Explanation> {
  const r = await fetch(`${base}/v1/threat/explain?ip=${ip}&list=${list.id}`, { headers })
  t.equal(r.status, 200)
  return await r.json() as Explanation
}

t.test('a feed held by a guard is explained from its last good build, and says it is held', async (t) => {
  await until('the list to publish', async () => (await feed()).status === 200)
  const before = await explain('198.51.100.1')
  t.notOk('held' in before.feeds[0]!, 'nothing held: no held field')
  t.equal(before.feeds[0]!.actions.block.published, true)

  await server.store.rules.deleteAccessByTarget(ws.id, { type: 'ip', value: '198.51.100.1/32' })
  await until('the guard to hold', async () => (await feed()).headers.get('x-feed-held') === 'min_entries')
  const held = await explain('198.51.100.1')
  const hold = held.feeds[0]!.held
  t.ok(hold !== undefined, 'held is there')
  t.match(hold!.reason, /block: min_entries/)
  t.match(hold!.reason, /list accept publishes build [0-9a-f]{32}/)
  t.ok(!Number.isNaN(Date.parse(hold!.since)), 'since is a time')
  t.equal(held.feeds[0]!.actions.block.published, true, 'the held feed still publishes the deleted rule\'s address')
  t.match(hold, { guards: { block: 'min_entries' }, digest: /^[0-9a-f]{32}$/ }, 'the guard per action and the digest accept takes')
  // Issue 36: not "the next build drops it" — the next build stays held until it is accepted.
  const block = held.feeds[0]!.actions.block
  t.same(block.reasons.map((r) => r.code), ['held'])
  t.match(block.reasons[0]!.message, new RegExp(`^no current block rule selected here covers 198\\.51\\.100\\.1, but a publish guard \\(min_entries\\) holds this feed's new block builds since .* until build ${hold!.digest} is accepted`))
})
