/**
 * Replica set, ingest side (issue 33): a step-down with appends in flight, append contention, a
 * stopped secondary. Gated: see rs.ts. Written to be obviously right rather than clever — each
 * asserts what a client may rely on, from what it was answered and what the stream holds.
 */
import t from 'tap'
import { compose, markedBatch, markersOnStream, needsCompose, postSignals, primaryService, newPrimary, replicaSetOrSkip, sleep, startCluster } from './rs.js'

if (replicaSetOrSkip(t)) {
  t.test('a step-down during 3 nodes × 16 appends in flight: every 200 on the stream once, every plain 500 absent', async (t) => {
    const c = await startCluster(t, 3)
    const posts: Array<Promise<{ marker: string, status: number, error: string }>> = []
    for (const node of c.nodes) {
      for (let i = 0; i < 16; i++) {
        const marker = `sd-${node.port}-${i}`
        posts.push(postSignals(node, c.auth, markedBatch(marker)).then((r) => ({ marker, status: r.status, error: (r.json as { error?: string }).error ?? '' })))
      }
    }
    // While they are in flight: the primary steps down (the driver sees the connection close).
    const old = await primaryService(c.admin)
    await c.admin.db('admin').command({ replSetStepDown: 10, secondaryCatchUpPeriodSecs: 5 }).catch(() => undefined)
    const answers = await Promise.all(posts)
    await newPrimary(c.admin, old)
    const stored = await markersOnStream(c.store)
    for (const a of answers) {
      const n = stored.get(a.marker) ?? 0
      if (a.status === 200) t.equal(n, 10, `${a.marker}: answered 200, stored once (10 entries)`)
      else if (a.error === 'OutcomeUnknownError') t.ok(n === 0 || n === 10, `${a.marker}: outcome unknown, stored at most once`)
      else t.equal(n, 0, `${a.marker}: answered ${a.status} ${a.error}, not stored`)
    }
    t.ok(answers.filter((a) => a.status === 200).length > 0, 'some appends succeeded around the step-down')
  })

  t.test('a retry with the Idempotency-Key after an unknown outcome is stored once', async (t) => {
    const c = await startCluster(t, 1)
    const old = await primaryService(c.admin)
    const batch = markedBatch('idem-stepdown')
    const first = postSignals(c.nodes[0]!, c.auth, batch, { 'idempotency-key': 'idem-stepdown' })
    await c.admin.db('admin').command({ replSetStepDown: 10, secondaryCatchUpPeriodSecs: 5 }).catch(() => undefined)
    await first
    await newPrimary(c.admin, old)
    let retry = await postSignals(c.nodes[0]!, c.auth, batch, { 'idempotency-key': 'idem-stepdown' })
    for (let i = 0; i < 20 && retry.status !== 200; i++) {
      await sleep(500)
      retry = await postSignals(c.nodes[0]!, c.auth, batch, { 'idempotency-key': 'idem-stepdown' })
    }
    t.equal(retry.status, 200)
    t.equal((await markersOnStream(c.store)).get('idem-stepdown'), 10, 'stored once')
  })

  t.test('append contention: 3 nodes × 32 concurrent posts, none refused, p99 under the 2 s deadline', async (t) => {
    const c = await startCluster(t, 3)
    const times: number[] = []
    const statuses: number[] = []
    await Promise.all(c.nodes.flatMap((node) => Array.from({ length: 32 }, async (_, i) => {
      for (let round = 0; round < 5; round++) {
        const started = performance.now()
        const r = await postSignals(node, c.auth, markedBatch(`ct-${node.port}-${i}-${round}`, 100))
        times.push(performance.now() - started)
        statuses.push(r.status)
      }
    })))
    times.sort((a, b) => a - b)
    const p99 = times[Math.floor(times.length * 0.99)]!
    t.same([...new Set(statuses)], [200], 'every post answered 200')
    t.ok(p99 < 2000, `p99 ${Math.round(p99)} ms`)
  })

  t.test('a stopped secondary: signals still 200 within 2 s, feeds still served', { skip: needsCompose }, async (t) => {
    const c = await startCluster(t, 3)
    const primary = await primaryService(c.admin)
    const secondary = ['mongo1', 'mongo2', 'mongo3'].find((s) => s !== primary)!
    compose('stop', secondary)
    t.teardown(() => { compose('start', secondary) })
    for (const node of c.nodes) {
      const started = Date.now()
      const r = await postSignals(node, c.auth, markedBatch(`sec-${node.port}`))
      t.equal(r.status, 200, `node ${node.port}: 200`)
      t.ok(Date.now() - started < 2000, `node ${node.port}: within 2 s`)
    }
    const feeds = await Promise.all(c.nodes.map((n) => fetch(`http://127.0.0.1:${n.port}/v1/threat/feeds?format=plain`, { headers: { authorization: c.auth } })))
    t.same(feeds.map((f) => f.status), [200, 200, 200], 'feeds served')
  })
}
