/**
 * A held feed survives a restart (issue 21): the published rules and the hold are kept in the
 * store (src/feed/guards-persist.ts), so a new `threatfeed serve` process on the same data keeps
 * serving the last good bytes and ETag with `X-Feed-Held`, judges against the last published
 * version (not as a list that never published), and `list accept` still publishes the held build.
 * A second node started while the first holds does the same.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import type { AccessRuleInput } from '../../src/store/types.js'
import { NO_COVERAGE, THREATFEED_BIN } from '../helpers/cli.js'
import { startNode, stopNode, type Node } from '../helpers/cluster-nodes.js'
import { rawRequest, type RawResponse } from '../helpers/feed-server.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-guards-restart-'))
t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })

/** Hosts two apart: no two coalesce, so each is one network of the feed. */
const hosts = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}.${2 * i + 1}/32`)

const key = generateApiKey()
let workspaceId = ''
let listId = ''
{
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = await store.workspaces.create({ name: 'fleet', subscription: 'active' })
  workspaceId = ws.id
  await store.keys.create({ workspaceId, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
  listId = (await store.lists.create({ workspaceId, name: 'guarded', description: '', defaults: { guards: { maxGrowPct: 5 } }, selector: { feed: 'g' } })).id
  for (const value of hosts('11.60.1', 10)) await store.rules.upsertAccessRule(rule(value))
  await store.close()
}

function rule (value: string): AccessRuleInput {
  return { kind: 'access_rule', workspaceId, ruleRef: null, labels: { feed: 'g' }, reason: null, expiresAt: null, seq: 0, target: { type: 'ip', value }, action: 'block', name: null, confidence: null, severity: null }
}

const feed = (node: Node, headers: Record<string, string> = {}): Promise<RawResponse> =>
  rawRequest(`http://127.0.0.1:${node.port}`, `/v1/threat/feeds/${listId}`, { headers: { authorization: `Bearer ${key}`, ...headers } })

async function until (what: string, check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

function cli (...args: string[]): Promise<{ code: number | null, stdout: string, stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [THREATFEED_BIN, ...args], { env: { PATH: process.env.PATH, ...NO_COVERAGE, THREATFEED_DATA_DIR: dir } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => { stdout += c.toString() })
    child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

const env = { THREATFEED_FEED_REBUILD_MS: '0', THREATFEED_POLL_MS: '100' }

t.test('a held feed keeps its bytes, ETag and hold across a restart; list accept still publishes it', async (t) => {
  const first = await startNode(dir, env)
  const published = await feed(first)
  t.equal(published.status, 200)
  t.equal(published.body.toString(), hosts('11.60.1', 10).join('\n') + '\n')
  const etag = String(published.headers.etag)

  // 10 → 20 networks: each rule written alone is +10 % already, over the 5 % the list allows.
  {
    const store = await openStore({ kind: 'embedded', dataDir: dir })
    for (const value of hosts('11.60.2', 10)) await store.rules.upsertAccessRule(rule(value))
    await store.close()
  }
  await until('the hold', async () => (await feed(first)).headers['x-feed-held'] === 'max_grow_pct')
  let held = ''
  let heldSince = 0
  await until('list show to record the hold', async () => {
    const s = (JSON.parse((await cli('list', 'show', '--id', listId, '--json')).stdout) as { publish: { held: { digest: string, since: string, diff: { block: { added: number } } } | null } }).publish
    held = s.held?.digest ?? ''
    heldSince = s.held === null ? 0 : Date.parse(s.held.since)
    // The whole batch: a build may have caught the rules half written.
    return s.held?.diff.block.added === 10
  })

  // A second node started while the first holds: it holds the same build.
  const second = await startNode(dir, env)
  t.teardown(() => stopNode(second))
  const fromSecond = await feed(second)
  t.equal(fromSecond.status, 200, 'another node: 200')
  t.equal(fromSecond.headers.etag, etag, 'another node: the last good ETag')
  t.equal(fromSecond.headers['x-feed-held'], 'max_grow_pct', 'another node: X-Feed-Held')
  await stopNode(second)

  await stopNode(first)
  const restarted = await startNode(dir, env)
  t.teardown(() => stopNode(restarted))
  const after = await feed(restarted)
  t.equal(after.status, 200)
  t.equal(after.headers.etag, etag, 'the last good ETag after the restart')
  t.equal(after.headers['x-feed-held'], 'max_grow_pct', 'still held after the restart')
  t.same(after.body, published.body, 'the last good bytes')
  t.equal((await feed(restarted, { 'if-none-match': etag })).status, 304, 'a holder of the old tag gets its 304')
  const shown = (JSON.parse((await cli('list', 'show', '--id', listId, '--json')).stdout) as { publish: { held: { digest: string } | null } }).publish
  t.equal(shown.held?.digest, held, 'list show names the same held build')
  const printed = await cli('feed', 'get', '--workspace', workspaceId, '--list', listId)
  t.equal(printed.code, 0, printed.stderr)
  t.equal(printed.stdout, published.body.toString(), 'feed get prints what the server serves: the last good bytes')
  t.equal(printed.stderr, `threatfeed: the server serves the last published rules since ${new Date(heldSince).toISOString()}: held by a publish guard (block: max_grow_pct); threatfeed list accept publishes build ${held}\n`, 'feed get says the feed is held')

  // explain from the store: the hold, and "published" as the server serves it.
  const hold = { reason: `held by a publish guard (block: max_grow_pct); threatfeed list accept publishes build ${held}`, since: new Date(heldSince).toISOString(), guards: { block: 'max_grow_pct' }, digest: held }
  for (const [ip, published] of [['11.60.2.1', false], ['11.60.1.1', true]] as const) {
    const r = await cli('explain', ip, '--workspace', workspaceId, '--list', listId, '--json')
    t.equal(r.code, 0, r.stderr)
    const e = JSON.parse(r.stdout) as { feeds: Array<{ held?: unknown, actions: { block: { published: boolean } } }> }
    t.same(e.feeds[0]!.held, hold, `explain ${ip}: held, by which guard, since when`)
    t.equal(e.feeds[0]!.actions.block.published, published, `explain ${ip}: published as the server serves it`)
  }
  const text = await cli('explain', '11.60.2.1', '--workspace', workspaceId, '--list', listId)
  t.match(text.stdout, `  held back by the server since ${hold.since}: ${hold.reason}\n`)

  const accepted = await cli('list', 'accept', '--id', listId, '--json')
  t.equal(accepted.code, 0, accepted.stderr)
  t.same(JSON.parse(accepted.stdout), { id: listId, accepted: held })
  const all = [...hosts('11.60.1', 10), ...hosts('11.60.2', 10)]
  await until('the accepted build', async () => (await feed(restarted)).body.toString() === all.join('\n') + '\n')
  const now = await feed(restarted)
  t.equal(now.headers['x-feed-held'], undefined, 'no longer held')
  t.not(now.headers.etag, etag, 'a new ETag')
})
