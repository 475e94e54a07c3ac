/**
 * Replica set, nodes side (issue 33): three nodes starting at once on an empty database; the
 * applier lease holder killed and stopped mid-apply; the primary killed during ingest and apply;
 * clocks skewed between nodes; mass lapses and a large workspace under ingest. Gated: see rs.ts.
 * The feed promise checked throughout: every node serves the same bytes, ETag and Last-Modified
 * within the rebuild interval (1 s here) plus 1 s of the change.
 */
import t from 'tap'
import { get } from '../../helpers/cluster-nodes.js'
import { compose, markedBatch, needsCompose, newPrimary, postSignals, primaryService, replicaSetOrSkip, sleep, startCluster, untilFeedsAgree, type Cluster } from './rs.js'

/** Rebuild interval + 1 s, with room for a loaded CI machine's scheduling. */
const AGREE_MS = 2000 + 1000

/** The node whose process holds the applier lease (its owner is host/pid/…). */
async function leaseHolder (c: Cluster): Promise<number> {
  const lease = await c.store.leases!.get('applier:rules')
  const pid = Number(lease?.owner.split('/')[1])
  const i = c.nodes.findIndex((n) => n.pid === pid)
  if (i < 0) throw new Error(`no node holds the lease (${lease?.owner})`)
  return i
}

if (replicaSetOrSkip(t)) {
  t.test('three nodes starting at once on an empty database all become ready and agree', async (t) => {
    const c = await startCluster(t, 3)
    for (const n of c.nodes) t.equal((await get(n.port, '/readyz')).status, 200, `node ${n.port} ready`)
    t.equal((await postSignals(c.nodes[0]!, c.auth, markedBatch('empty-start'))).status, 200)
    t.ok(await untilFeedsAgree(c.nodes, c.auth, AGREE_MS) >= 0, 'identical feeds')
  })

  for (const how of ['SIGKILL', 'SIGSTOP'] as const) {
    t.test(`the lease holder ${how === 'SIGKILL' ? 'killed' : 'stopped'} mid-apply: another node applies, feeds agree`, async (t) => {
      const c = await startCluster(t, 3)
      const holder = await leaseHolder(c)
      const others = c.nodes.filter((_, i) => i !== holder)
      // Records in flight to the holder while it dies.
      const posting = Promise.all(Array.from({ length: 8 }, (_, i) => postSignals(c.nodes[(holder + 1) % 3]!, c.auth, markedBatch(`lh-${how}-${i}`, 500))))
      await sleep(50)
      c.nodes[holder]!.child.kill(how)
      const answers = await posting
      t.ok(answers.every((a) => a.status === 200), 'ingest on the other nodes went on')
      // Handover: lease TTL (2.5 s) + renew (0.75 s) + a poll, then the rebuild interval + 1 s.
      t.ok(await untilFeedsAgree(others, c.auth, 3500 + AGREE_MS) >= 0, 'the other nodes agree')
      const after = await c.store.stream.head()
      const cp = async (): Promise<number> => c.store.stream.getCheckpoint('rules')
      for (let i = 0; i < 100 && await cp() < after; i++) await sleep(100)
      t.equal(await cp(), after, 'everything accepted was applied by the new holder')
      if (how === 'SIGSTOP') {
        c.nodes[holder]!.child.kill('SIGCONT')
        t.ok(await untilFeedsAgree(c.nodes, c.auth, 5000 + AGREE_MS) >= 0, 'resumed, the paused node catches up and agrees')
      }
    })
  }

  t.test('kill -9 of the primary during ingest and apply: identical feeds within interval + 1 s of the new primary', { skip: needsCompose }, async (t) => {
    const c = await startCluster(t, 3)
    const primary = await primaryService(c.admin)
    let stop = false
    const ingest = (async () => {
      for (let i = 0; !stop; i++) await postSignals(c.nodes[i % 3]!, c.auth, markedBatch(`kp-${i}`, 100)).catch(() => undefined)
    })()
    await sleep(1000)
    compose('kill', '-s', 'SIGKILL', primary)
    t.teardown(() => { compose('start', primary) })
    await newPrimary(c.admin, primary)
    await sleep(2000)
    stop = true
    await ingest
    const took = await untilFeedsAgree(c.nodes, c.auth, 3500 + AGREE_MS)
    t.ok(took >= 0, `identical feeds and revisions on every node (${took} ms after ingest stopped)`)
  })

  t.test('node hop with clocks skewed ±500 ms: Last-Modified never goes back between nodes', { skip: process.env.THREATFEED_TEST_FAKETIME_LIB === undefined ? 'THREATFEED_TEST_FAKETIME_LIB (libfaketime.so.1) is not set' : false }, async (t) => {
    const c = await startCluster(t, 1)
    const lib = process.env.THREATFEED_TEST_FAKETIME_LIB!
    c.nodes.push(await c.startNode({ LD_PRELOAD: lib, FAKETIME: '+0.5s', FAKETIME_DONT_RESET: '1' }))
    c.nodes.push(await c.startNode({ LD_PRELOAD: lib, FAKETIME: '-0.5s', FAKETIME_DONT_RESET: '1' }))
    let last = 0
    for (let i = 0; i < 20; i++) {
      t.equal((await postSignals(c.nodes[i % 3]!, c.auth, markedBatch(`hop-${i}`, 1))).status, 200)
      await untilFeedsAgree(c.nodes, c.auth, AGREE_MS)
      const lm = Date.parse((await get(c.nodes[(i + 1) % 3]!.port, '/v1/threat/feeds?format=plain', { authorization: c.auth })).lastModified ?? '')
      t.ok(lm > last, `hop ${i}: Last-Modified moved forward`)
      last = lm
    }
  })

  t.test('500,000 lapses during ingest on 3 nodes: applying keeps up and every node stays ready', async (t) => {
    const c = await startCluster(t, 3)
    // 500 batches of 1,000 rules that lapse in 10 s, then ingest goes on while they are swept.
    for (let b = 0; b < 500; b += 3) {
      await Promise.all(c.nodes.map((n, i) => postSignals(n, c.auth, markedBatch(`lapse-${b + i}`, 1000, 10))))
    }
    const until = Date.now() + 30_000
    while (Date.now() < until) {
      await Promise.all(c.nodes.map((n, i) => postSignals(n, c.auth, markedBatch(`live-${Date.now()}-${i}`, 100))))
      for (const n of c.nodes) t.equal((await get(n.port, '/readyz')).status, 200, `node ${n.port} ready`)
      await sleep(1000)
    }
    const head = await c.store.stream.head()
    const cp = async (): Promise<number> => c.store.stream.getCheckpoint('rules')
    for (let i = 0; i < 100 && await cp() < head; i++) await sleep(100)
    t.equal(await cp(), head, 'applied within 10 s of the last post')
  })

  t.test('a 1 M-rule workspace under ingest: nodes stay ready and agree', async (t) => {
    const c = await startCluster(t, 3)
    for (let b = 0; b < 1000; b += 3) {
      await Promise.all(c.nodes.map((n, i) => postSignals(n, c.auth, Array.from({ length: 1000 }, (_, k) => ({ type: 'access_rules', action: 'block', ip: `${10 + ((b + i) >> 8)}.${(b + i) & 255}.${k >> 8}.${k & 255}` })))))
    }
    for (let i = 0; i < 10; i++) {
      await Promise.all(c.nodes.map((n) => postSignals(n, c.auth, markedBatch(`big-${i}`, 100))))
      for (const n of c.nodes) t.equal((await get(n.port, '/readyz')).status, 200, `node ${n.port} ready`)
    }
    t.ok(await untilFeedsAgree(c.nodes, c.auth, 60_000) >= 0, 'identical feeds')
  })
}
