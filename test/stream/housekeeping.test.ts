/**
 * The server's housekeeping schedule (src/stream/housekeeping.ts) over a real embedded store: a
 * run sweeps and trims until nothing is left, a failing pass is logged and retried at the next
 * interval, and stop() lets the pass under way finish and starts no other.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { ThreatfeedError } from '../../src/errors.js'
import type { BatchingStore } from '../../src/store/batch-types.js'
import { openStore } from '../../src/store/open.js'
import { SWEEP_GRAIN_MS, addSweepPass, newHousekeepingCounters } from '../../src/store/types.js'
import { Housekeeper } from '../../src/stream/housekeeping.js'
import { accessInput, freshWorkspaceId, ip } from '../store/contract-fixtures.js'

async function fresh (t: Test): Promise<BatchingStore> {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-housekeeping-'))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(async () => {
    await store.close()
    await rm(dir, { recursive: true, force: true })
  })
  return store
}

function logger (): { info: (o: object, msg: string) => void, warn: (o: object, msg: string) => void, lines: Array<{ level: string, msg: string, o: Record<string, unknown> }> } {
  const lines: Array<{ level: string, msg: string, o: Record<string, unknown> }> = []
  return {
    lines,
    info: (o, msg) => { lines.push({ level: 'info', msg, o: o as Record<string, unknown> }) },
    warn: (o, msg) => { lines.push({ level: 'warn', msg, o: o as Record<string, unknown> }) },
  }
}

async function lapsedRules (store: BatchingStore, n: number): Promise<string> {
  const ws = freshWorkspaceId()
  const expiresAt = Math.floor(Date.now() / SWEEP_GRAIN_MS) * SWEEP_GRAIN_MS - 1
  await store.applyRuleBatch({ ops: Array.from({ length: n }, (_, i) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws, { target: ip(`10.1.${i >> 8}.${i & 255}/32`), expiresAt }) })) })
  return ws
}

t.test('one run sweeps and trims everything due, in passes, and logs what it removed', async (t) => {
  const store = await fresh(t)
  const ws = await lapsedRules(store, 1000)
  for (let a = 0; a < 10; a++) await store.stream.append([{ workspaceId: ws, payload: '{}', acceptedAt: Date.now() - 5000 }])
  await store.stream.setCheckpoint('rules', 10)
  const log = logger()
  const keeper = new Housekeeper({ store, intervalMs: 60_000, retentionMs: 1000, log, passLimit: 100 })
  t.same(await keeper.runOnce(), { rulesSwept: 1000, tombstonesDropped: 0, staleCleaned: 0, recordsTrimmed: 9 })
  t.same(await store.rules.list(ws, 'access_rule'), [])
  t.equal(store.housekeeping.sweepPasses > 1, true, `several sweep passes (${store.housekeeping.sweepPasses})`)
  t.match(log.lines, [
    { level: 'info', msg: 'sweep: lapsed rules removed', o: { rules: 1000, passes: Number, ms: Number } },
    { level: 'info', msg: 'stream trimmed', o: { records: 9, passes: Number, ms: Number } },
  ])
  t.same(await keeper.runOnce(), { rulesSwept: 0, tombstonesDropped: 0, staleCleaned: 0, recordsTrimmed: 0 }, 'a second run finds nothing')
  t.equal(log.lines.length, 2, 'and logs nothing')
})

t.test('a failing pass is logged, and the next interval runs again', async (t) => {
  const store = await fresh(t)
  await lapsedRules(store, 10)
  let failures = 1
  const failing = new Proxy(store.rules, {
    get (target, prop, receiver) {
      if (prop === 'sweepLapsed' && failures > 0) {
        failures--
        return async () => { throw new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: new Error('disk full') }) }
      }
      const v = Reflect.get(target, prop, receiver) as unknown
      return typeof v === 'function' ? v.bind(target) : v
    },
  })
  const log = logger()
  const keeper = new Housekeeper({ store: { ...store, kind: store.kind, rules: failing, stream: store.stream, housekeeping: store.housekeeping } as unknown as BatchingStore, intervalMs: 1000, retentionMs: 1000, log })
  keeper.start()
  t.teardown(() => keeper.stop())
  // The store counts a pass as it commits; the run logs when all its passes are done, so wait for the line.
  for (const deadline = Date.now() + 5000; !log.lines.some((l) => l.msg === 'sweep: lapsed rules removed');) {
    if (Date.now() > deadline) throw new Error(`never swept: ${JSON.stringify(log.lines)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.match(log.lines[0], { level: 'warn', msg: 'sweep failed; retrying at the next interval' })
  t.equal(store.housekeeping.rulesSwept, 10, 'the next run swept')
})

t.test('stop() waits for the pass under way and starts no other', async (t) => {
  const store = await fresh(t)
  await lapsedRules(store, 3000)
  const log = logger()
  const keeper = new Housekeeper({ store, intervalMs: 60_000, retentionMs: 1000, log, passLimit: 100 })
  const run = keeper.runOnce()
  await new Promise((resolve) => setImmediate(resolve))
  await keeper.stop()
  const passes = store.housekeeping.sweepPasses
  const result = await run
  t.ok(result.rulesSwept > 0 && result.rulesSwept < 3000, `stopped part way (${result.rulesSwept} swept)`)
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(store.housekeeping.sweepPasses, passes, 'no pass after stop() resolved')
  keeper.start()
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(store.housekeeping.sweepPasses, passes, 'a stopped housekeeper does not start again')
})

t.test('a sweep with a long way to go does not hold the trim back: their passes take turns', async (t) => {
  const order: string[] = []
  let sweeps = 0
  const store = {
    rules: { sweepLapsed: async () => { order.push('sweep'); sweeps++; return { removed: 1, tombstonesDropped: 0, staleCleaned: 0, more: sweeps < 5 } } },
    stream: { trim: async () => { order.push('trim'); return { records: 1, more: order.filter((o) => o === 'trim').length < 2 } } },
  } as unknown as BatchingStore
  const keeper = new Housekeeper({ store, intervalMs: 60_000, retentionMs: 1000, log: { info: () => {}, warn: () => {} } })
  const result = await keeper.runOnce()
  t.same(order, ['sweep', 'trim', 'sweep', 'trim', 'sweep', 'sweep', 'sweep'])
  t.same(result, { rulesSwept: 5, tombstonesDropped: 0, staleCleaned: 0, recordsTrimmed: 2 })
})

t.test('a run ends after maxRunMs with work left, says so, and the next run goes on', async (t) => {
  const store = await fresh(t)
  const ws = await lapsedRules(store, 3000)
  const log = logger()
  const keeper = new Housekeeper({ store, intervalMs: 60_000, retentionMs: 86_400_000, log, passLimit: 100, maxRunMs: 1 })
  const first = await keeper.runOnce()
  t.ok(first.rulesSwept > 0 && first.rulesSwept < 3000, `the first run stopped part-way (${first.rulesSwept} of 3000)`)
  t.match(log.lines, [
    { level: 'info', msg: 'sweep: lapsed rules removed', o: { rules: first.rulesSwept, more: true } },
    { level: 'warn', msg: 'housekeeping run ended with work left; the next run goes on', o: { maxRunMs: 1, sweepMore: true } },
  ])
  let swept = first.rulesSwept
  for (let run = 0; run < 200 && swept < 3000; run++) swept += (await keeper.runOnce()).rulesSwept
  t.equal(swept, 3000, 'later runs sweep the rest')
  t.same(await store.rules.list(ws, 'access_rule'), [])
})

t.test('with a sweeper, start() hands it the sweep and stop() takes it back; the runs only trim', async (t) => {
  const calls: Array<number | null> = []
  let trims = 0
  const housekeeping = newHousekeepingCounters()
  const store = {
    rules: { sweepLapsed: async () => { throw new Error('the sweeper sweeps, not the Housekeeper') } },
    stream: { trim: async () => { trims++; return { records: 3, more: false } } },
    housekeeping,
  } as unknown as BatchingStore
  const log = logger()
  const keeper = new Housekeeper({ store, intervalMs: 60_000, retentionMs: 1000, log, passLimit: 500, sweeper: { setSweep: (limit) => { calls.push(limit) } } })
  keeper.start()
  t.same(calls, [500], 'the pass limit, at start')
  t.same(await keeper.runOnce(), { rulesSwept: 0, tombstonesDropped: 0, staleCleaned: 0, recordsTrimmed: 3 })
  t.ok(trims >= 1)
  // What the sweeper did (main.ts adds its passes to the store's counters) is logged by the next run.
  addSweepPass(housekeeping, { removed: 7, tombstonesDropped: 2, staleCleaned: 1, more: false })
  t.same(await keeper.runOnce(), { rulesSwept: 7, tombstonesDropped: 2, staleCleaned: 1, recordsTrimmed: 3 })
  t.match(log.lines.filter((l) => l.msg.startsWith('sweep')), [{ level: 'info', msg: 'sweep: lapsed rules removed', o: { rules: 7, tombstones: 2, stale: 1, passes: 1, ms: Number, by: 'consumer' } }])
  t.notMatch(log.lines, [{ level: 'warn' }], 'no failed sweep logged')
  await keeper.stop()
  t.same(calls, [500, null], 'taken back at stop')
})
