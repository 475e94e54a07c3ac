/**
 * The batch journal's bounds as the operator sets them (THREATFEED_BATCH_JOURNAL_MAX and
 * _RETENTION), seen through /v1/admin/batches: a small cap holds without waiting for the timed
 * sweep (a tenth of the cap written starts one), a cap of 0 records nothing, and a batch report
 * is gone once it is older than the retention. And the feed-size sampler, on a real feed service:
 * it samples what was published without counting as a poll, so an unpolled feed is still let go.
 */
import t from 'tap'
import { AdminJournal, JOURNAL_BOUNDS, journalBounds, journalSweepMs } from '../../src/http/admin-journal.js'
import { FeedService } from '../../src/feed/feed-service.js'
import { createLogger } from '../../src/log.js'
import { createPool } from '../../src/pool/pool.js'
import { addRules, rule, silentLog, tempStore, testGeo } from '../feed/fixtures.js'
import { startAdminServer, type AdminServer, type Json } from '../helpers/admin-server.js'

/** A v1 batch of `n` blocks, answered 200; the report's `entries` tells the batches apart. */
async function post (srv: AdminServer, n: number, first = 0): Promise<number> {
  const body = Array.from({ length: n }, (_, i) => ({ type: 'access_rules', action: 'block', ip: `198.51.100.${first + i}` }))
  const r = await fetch(`${srv.base}/v1/signal`, { method: 'POST', headers: { authorization: `Bearer ${srv.keys.signals}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
  await r.arrayBuffer()
  return r.status
}

async function batches (srv: AdminServer): Promise<Json[]> {
  return (await srv.call('GET', '/v1/admin/batches?limit=500', 'admin')).body.items
}

t.test('the timed sweep\'s interval: a tenth of the shortest age kept, 1 s to 10 min', async (t) => {
  const cases: Array<{ description: string, keepMs: number, expected: number }> = [
    { description: 'the defaults (7 days)', keepMs: JOURNAL_BOUNDS.batch.keepMs, expected: 600_000 },
    { description: 'an hour', keepMs: 3_600_000, expected: 360_000 },
    { description: 'a minute, the shortest allowed', keepMs: 60_000, expected: 6000 },
    { description: 'shorter than 10 s', keepMs: 5000, expected: 1000 },
  ]
  for (const c of cases) t.equal(journalSweepMs(journalBounds({ keepMs: c.keepMs, maxPerPartition: 10 })), c.expected, c.description)
})

t.test('a cap of 5: the five newest batches after the sweep that a tenth of the cap starts', async (t) => {
  const srv = await startAdminServer({ THREATFEED_BATCH_JOURNAL_MAX: '5' })
  t.teardown(() => srv.close())
  const statuses: number[] = []
  for (let n = 1; n <= 12; n++) statuses.push(await post(srv, n))
  t.same(statuses, Array(12).fill(200))
  // Flushed within a second, then swept at once (the timed sweep is 10 minutes away): poll until
  // the newest is there and the cap holds, or give up after 10 s.
  let items: Json[] = []
  for (let i = 0; i < 200; i++) {
    items = await batches(srv)
    if (items[0]?.entries === 12 && items.length <= 5) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.same(items.map((b) => b.entries), [12, 11, 10, 9, 8], 'the cap holds, the oldest dropped first')
  // More batches than the cap in one flush each: still at most the cap once each sweep is done.
  for (let round = 0; round < 3; round++) {
    for (let n = 1; n <= 7; n++) t.equal(await post(srv, n, 100), 200)
    await srv.server.adminJournal.flush()
    await srv.server.adminJournal.sweep(Date.now())
    t.same((await batches(srv)).map((b) => b.entries), [7, 6, 5, 4, 3], `round ${round}: the newest five`)
  }
  t.same((await srv.call('GET', '/v1/admin/batches', 'otherAdmin')).body.items, [], 'another workspace has none')
})

t.test('a cap of 0 records no batch', async (t) => {
  const srv = await startAdminServer({ THREATFEED_BATCH_JOURNAL_MAX: '0' })
  t.teardown(() => srv.close())
  t.equal(await post(srv, 3), 200)
  // A refused batch too: its reasons would quote the refused value.
  const r = await fetch(`${srv.base}/v1/signal`, { method: 'POST', headers: { authorization: `Bearer ${srv.keys.signals}`, 'content-type': 'application/json' }, body: '[{"type":"access_rules","action":"block","ip":"10.0.0.1/4"}]' })
  t.equal(r.status, 400)
  await srv.server.adminJournal.flush()
  t.same(await batches(srv), [])
})

t.test('a retention of 1m: a report older than a minute is swept', async (t) => {
  const srv = await startAdminServer({ THREATFEED_BATCH_JOURNAL_RETENTION: '1m' })
  t.teardown(() => srv.close())
  t.equal(await post(srv, 2), 200)
  await srv.server.adminJournal.flush()
  const journal = srv.server.adminJournal
  t.equal(await journal.sweep(Date.now() + 50_000), 0, 'not yet a minute old')
  t.same((await batches(srv)).map((b) => b.entries), [2])
  t.equal(await journal.sweep(Date.now() + 61_000), 1, 'a minute and a second on')
  t.same(await batches(srv), [])
})

t.test('feed sizes: the published snapshots are sampled, and sampling is no poll (an idle feed is let go)', async (t) => {
  const tmp = await tempStore()
  const pool = createPool({ workers: 1, taskTimeoutMs: 10_000 })
  // The worker's start from the TypeScript sources takes a second or more: before any timing.
  await pool.compute({ block: [], allow: [], carve: { confidence: 'high', severity: 'high', ips: '', asns: [], countries: [] }, meta: '' })
  const idleMs = 1000
  const feeds = new FeedService({ store: tmp.store, pool, config: { feedRebuildMs: 50, pollMs: 25 }, log: silentLog, geo: await testGeo(), awaitMs: 8000, idleMs })
  const journal = new AdminJournal({ store: tmp.store, log: createLogger('silent'), feeds })
  t.teardown(async () => { await journal.stop(); await feeds.stop(); await pool.destroy(); await tmp.cleanup() })
  const ws = await tmp.store.workspaces.create({ name: 'sizes', subscription: 'active' })
  await addRules(tmp.store, [rule(ws.id, '192.0.2.0/24')])
  await feeds.start()
  t.equal(await journal.sampleFeeds(), 0, 'nothing published yet')
  const asked = Date.now()
  await feeds.awaitSnapshot(ws.id, '*', asked)
  const n = await journal.sampleFeeds()
  t.ok(n > 0, `the polled feed's ${n} variants sampled`)
  const plain = (await tmp.store.journal!.page('feed_size', `${ws.id}/*`, 100)).find((e) => e.id === 'plain|v4|block|')
  t.match(plain?.data, { entries: 1, bytes: '192.0.2.0/24\n'.length })
  // Sampled every 50 ms and never polled again: let go idleMs after the poll, then nothing is sampled.
  let left = n
  while (left > 0 && Date.now() - asked < 5 * idleMs) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    left = await journal.sampleFeeds()
  }
  t.equal(left, 0, 'let go')
  t.ok(Date.now() - asked >= idleMs, `${Date.now() - asked} ms after the poll, idle after ${idleMs} ms`)
})
