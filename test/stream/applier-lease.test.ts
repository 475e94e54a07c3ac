/**
 * One applier at a time (applier-lease.ts): of two consumers of one name on one store, one
 * applies and the other follows the checkpoint — its read-your-writes within 1 s all the same —
 * and when the applier dies, the other takes over within 5 s.
 */
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../../src/store/open.js'
import type { BatchingStore } from '../../src/store/batch-types.js'
import type { StreamRecordInput } from '../../src/store/types.js'
import { StreamConsumer } from '../../src/stream/consumer.js'

async function withStore (t: Test): Promise<BatchingStore> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-lease-'))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }) })
  return store
}

/** A node's view of the store: counts the ops it applied; once `dead`, every call fails (a node gone). */
function node (store: BatchingStore): { store: BatchingStore, applied: () => number, attempts: () => number, kill: () => void } {
  let applied = 0
  let attempts = 0
  let dead = false
  const view = new Proxy(store, {
    get (target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown
      if (prop === 'applyRuleBatch') {
        return async (batch: Parameters<BatchingStore['applyRuleBatch']>[0]) => {
          if (dead) throw new Error('node is dead')
          attempts++
          const r = await target.applyRuleBatch(batch)
          if (r.applied) applied += batch.ops.length
          return r
        }
      }
      if (prop === 'leases' && target.leases !== undefined) {
        const leases = target.leases
        return {
          claim: async (name: string, owner: string, ttlMs: number) => { if (dead) throw new Error('node is dead'); return leases.claim(name, owner, ttlMs) },
          release: async (name: string, owner: string) => { if (dead) throw new Error('node is dead'); await leases.release(name, owner) },
          get: async (name: string) => leases.get(name),
        }
      }
      return value
    },
  })
  return { store: view, applied: () => applied, attempts: () => attempts, kill: () => { dead = true } }
}

function records (from: number, n: number): StreamRecordInput[] {
  return Array.from({ length: n }, (_, i) => ({ workspaceId: 'w', payload: `{"type":"access_rules","action":"block","ip":"198.51.100.${(from + i) % 250}"}`, acceptedAt: Date.now() }))
}

t.test('two consumers of one name: one applies, the other follows within 1 s, and takes over within 5 s of its death', async (t) => {
  const store = await withStore(t)
  const a = node(store)
  const b = node(store)
  const ca = new StreamConsumer(a.store, { pollMs: 50, batchSize: 50 })
  const cb = new StreamConsumer(b.store, { pollMs: 50, batchSize: 50 })
  await ca.start()
  await cb.start()
  t.teardown(async () => { await ca.stop().catch(() => undefined); await cb.stop() })

  for (let i = 0; i < 10; i++) {
    const seqs = await store.stream.append(records(i * 20, 20))
    const last = seqs[seqs.length - 1]!
    const started = Date.now()
    const [seenA, seenB] = await Promise.all([ca.waitFor(last, 1000), cb.waitFor(last, 1000)])
    t.ok(seenA && seenB, `batch ${i}: both nodes saw it applied within 1 s (${Date.now() - started} ms)`)
  }
  t.equal(a.applied() + b.applied(), 200, 'every record applied once')
  t.ok(a.attempts() === 0 || b.attempts() === 0, `one applier: the other never tried a slice (attempts: a ${a.attempts()}, b ${b.attempts()})`)

  const [applier, follower, followerConsumer] = a.applied() > 0 ? [a, b, cb] : [b, a, ca]
  applier.kill()
  const died = Date.now()
  const seqs = await store.stream.append(records(500, 5))
  t.ok(await followerConsumer.waitFor(seqs[seqs.length - 1]!, 5000), 'the follower applied what was appended after the death')
  const took = Date.now() - died
  t.ok(took < 5000, `taken over in ${took} ms`)
  t.equal(follower.applied(), 5, 'by the follower')
})

t.test('a consumer that stops hands the lease over at once', async (t) => {
  const store = await withStore(t)
  const a = new StreamConsumer(store, { pollMs: 50 })
  await a.start()
  const b = new StreamConsumer(store, { pollMs: 50 })
  await b.start()
  t.teardown(() => b.stop())
  await a.stop()
  const started = Date.now()
  const seqs = await store.stream.append(records(0, 3))
  t.ok(await b.waitFor(seqs[2]!, 2000), 'the other consumer applies')
  t.ok(Date.now() - started < 1500, `within a renewal period or two (${Date.now() - started} ms), not a lease's lapse`)
})
