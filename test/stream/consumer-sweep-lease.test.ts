/**
 * Issue 33, item 2: only the applier sweeps. Two consumers of one store (two nodes): the one
 * holding the applier lease sweeps, in turn with its applies; the one following its checkpoint
 * never does — on MongoDB every node sweeping unleased starved the apply with write conflicts.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../../src/store/open.js'
import type { BatchingStore } from '../../src/store/batch-types.js'
import { SWEEP_GRAIN_MS, type RuleStore } from '../../src/store/types.js'
import { StreamConsumer } from '../../src/stream/consumer.js'
import { accessInput, ip } from '../store/contract-fixtures.js'

/** The store as one node sees it, counting that node's sweep passes of its own. */
function counted (store: BatchingStore): { store: BatchingStore, sweeps: () => number } {
  let sweeps = 0
  const rules = new Proxy(store.rules, {
    get (target, prop, receiver) {
      if (prop === 'sweepLapsed') return (...args: Parameters<RuleStore['sweepLapsed']>) => { sweeps++; return target.sweepLapsed(...args) }
      return Reflect.get(target, prop, receiver) as unknown
    },
  })
  const proxied = new Proxy(store, { get: (target, prop, receiver) => prop === 'rules' ? rules : Reflect.get(target, prop, receiver) as unknown })
  return { store: proxied, sweeps: () => sweeps }
}

t.test('the consumer that follows another\'s lease does not sweep; the lease holder does', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-sweep-lease-'))
  const raw = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(async () => { await raw.close(); rmSync(dir, { recursive: true, force: true }) })
  const expiresAt = Math.floor(Date.now() / SWEEP_GRAIN_MS) * SWEEP_GRAIN_MS - 1
  for (let b = 0; b < 4; b++) {
    await raw.applyRuleBatch({ ops: Array.from({ length: 10 }, (_, i) => ({ op: 'upsertAccessRule' as const, input: accessInput('w', { target: ip(`10.4.${b}.${i}/32`), expiresAt }) })) })
  }
  const holder = counted(raw)
  const follower = counted(raw)
  const a = new StreamConsumer(holder.store, { pollMs: 50 })
  await a.start()
  t.teardown(() => a.stop())
  const b = new StreamConsumer(follower.store, { pollMs: 50 })
  await b.start()
  t.teardown(() => b.stop())
  b.setSweep(5)
  a.setSweep(5)
  for (let i = 0; i < 300 && (await raw.rules.list('w', 'access_rule')).length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal((await raw.rules.list('w', 'access_rule')).length, 0, 'everything lapsed was swept')
  // A few more polls of the follower, each of which used to sweep.
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.ok(holder.sweeps() > 0, `the holder swept (${holder.sweeps()} passes)`)
  t.equal(follower.sweeps(), 0, 'the follower never did')
})
