/**
 * The running server sweeps lapsed rules (THREATFEED_SWEEP_INTERVAL) while its feeds keep
 * answering: rules with a short expiry leave the feed at their expiry, later leave the store
 * (tombstones in their place, a log line per pass), and the sweep changes nothing a client sees —
 * the same bytes, ETag and Last-Modified.
 */
import { PassThrough } from 'node:stream'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer } from '../../src/main.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { SWEEP_GRAIN_MS } from '../../src/store/types.js'
import { accessInput, ip } from '../store/contract-fixtures.js'
import { rawRequest, type RawResponse } from '../helpers/feed-server.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'

const LAPSING = 200

const dir = mkdtempSync(join(tmpdir(), 'tf-sweep-srv-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const logLines: Array<Record<string, unknown>> = []
const logStream = new PassThrough()
logStream.setEncoding('utf8').on('data', (chunk: string) => {
  for (const line of chunk.split('\n')) if (line !== '') logLines.push(JSON.parse(line) as Record<string, unknown>)
})
const config = loadConfig({
  HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: dir, THREATFEED_POLL_MS: '50', THREATFEED_FEED_REBUILD_MS: '0',
  THREATFEED_SWEEP_INTERVAL: '1s', THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB, THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
})
const server = await startServer(config, createLogger('info', logStream))
t.teardown(() => server.stop())
const base = `http://127.0.0.1:${server.port}`
const store = server.store

t.test('lapsed rules are swept from the store while the feed stays byte-identical', async (t) => {
  const ws = await store.workspaces.create({ name: 'sweep', subscription: 'active' })
  const key = generateApiKey()
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['feeds:read'] })
  const feed = async (): Promise<RawResponse> => {
    const r = await rawRequest(base, '/v1/threat/feeds?format=plain', { headers: { authorization: `Bearer ${key}` } })
    if (r.status !== 200) throw new Error(`feed: ${r.status} ${r.body.toString()}`)
    return r
  }
  // The server learns of the key made behind its back at its next poll of the store.
  for (const deadline = Date.now() + 30_000; (await rawRequest(base, '/v1/threat/feeds?format=plain', { headers: { authorization: `Bearer ${key}` } })).status === 401;) {
    if (Date.now() > deadline) throw new Error('the key never became known')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }

  const live = ['203.0.113.0/24', '198.51.100.7/32']
  // Lapsing 3 s from now: time enough to be served first. A sweep removes only what lapsed
  // before its 10-second grain began, so none can take them before they lapse.
  const lapsesAt = Date.now() + 3000
  const lapsing = Array.from({ length: LAPSING }, (_, i) => `10.9.${i >> 8}.${i & 255}/32`)
  await store.applyRuleBatch({
    ops: [
      ...lapsing.map((v) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws.id, { target: ip(v), expiresAt: lapsesAt }) })),
      ...live.map((v) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws.id, { target: ip(v), expiresAt: null }) })),
    ],
  })
  const sweptBefore = store.housekeeping.rulesSwept
  let first: RawResponse | null = null
  for (const deadline = Date.now() + 10_000; first === null;) {
    const r = await feed()
    if (r.body.toString().includes('10.9.')) first = r
    else if (Date.now() > deadline) throw new Error(`the rules never reached the feed: ${r.body.toString()}`)
    else await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.match(first.body.toString(), /^10\.9\.0\.0\/25\n10\.9\.0\.128\/26\n10\.9\.0\.192\/29\n198\.51\.100\.7\/32\n203\.0\.113\.0\/24\n$/, 'all rules served (coalesced) before their expiry')

  // From their expiry on, never served; then the feed holds the live rules only.
  let after: RawResponse | null = null
  let servedLapsed = false
  for (const deadline = lapsesAt + 10_000; after === null;) {
    const sent = Date.now()
    const r = await feed()
    if (!r.body.toString().includes('10.9.')) after = r
    else if (sent >= lapsesAt) servedLapsed = true
    if (Date.now() > deadline) throw new Error('lapsed rules still served')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  t.notOk(servedLapsed, 'a lapsed rule is never served, swept or not')
  t.equal(after.body.toString(), '198.51.100.7/32\n203.0.113.0/24\n')
  // Sweepable once the grain after their lapse begins — which may be milliseconds after it: the
  // count is only meaningful if this read began before then.
  const sweepableAt = (Math.floor(lapsesAt / SWEEP_GRAIN_MS) + 1) * SWEEP_GRAIN_MS
  const readAt = Date.now()
  const stored = (await store.rules.list(ws.id, 'access_rule')).length
  if (readAt < sweepableAt) t.equal(stored, LAPSING + live.length, 'lapsed, not yet swept: still stored')
  else t.comment(`the lapsed rules became sweepable (${sweepableAt - lapsesAt} ms after their lapse) before the store was read: ${stored} stored`)

  // The sweep removes them once their grain has ended (at most 10 s, plus the 1 s interval).
  // Both the store and the sweep's own count: a read sees the commit before the sweep counts it.
  for (const deadline = lapsesAt + SWEEP_GRAIN_MS + 30_000; (await store.rules.list(ws.id, 'access_rule')).length > live.length || store.housekeeping.rulesSwept - sweptBefore < LAPSING;) {
    if (Date.now() > deadline) throw new Error('the lapsed rules were never swept')
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.equal(store.housekeeping.rulesSwept - sweptBefore, LAPSING, 'every lapsed rule swept, each once')
  t.same(await store.rules.lapsedTombstones(ws.id, ip('10.9.0.7/32')), [{ workspaceId: ws.id, kind: 'access_rule', target: ip('10.9.0.7/32'), ruleRef: null, lapsedAt: lapsesAt, action: 'block' }], 'a tombstone says when it lapsed')
  // A run logs once it is over, which can be after its last pass's commit is visible.
  const sweepLines = (): typeof logLines => logLines.filter((l) => l.msg === 'sweep: lapsed rules removed')
  for (const deadline = Date.now() + 30_000; sweepLines().reduce((n, l) => n + (l.rules as number), 0) < LAPSING && Date.now() < deadline;) {
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const logged = sweepLines()
  t.ok(logged.length > 0 && logged.every((l) => typeof l.rules === 'number' && typeof l.ms === 'number' && typeof l.passes === 'number'), 'a log line per run that removed something, with counts and duration')
  t.equal(logged.reduce((n, l) => n + (l.rules as number), 0), LAPSING, 'the logged counts add up')

  // Long enough for the server to see the sweep's revision and rebuild (its poll is 50 ms).
  await new Promise((resolve) => setTimeout(resolve, 500))
  const swept = await feed()
  t.equal(swept.body.toString(), after.body.toString(), 'the same bytes')
  t.equal(swept.headers.etag, after.headers.etag, 'the same ETag')
  t.equal(swept.headers['last-modified'], after.headers['last-modified'], 'the same Last-Modified: the sweep changed nothing served')
})
