/**
 * A rule batch that asks for a sweep (RuleBatch#sweep) on the embedded store: the pass runs in
 * the batch's own transaction, after its ops, and only when the batch applies.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { BatchingStore } from '../../../src/store/batch-types.js'
import { openStore } from '../../../src/store/open.js'
import { SWEEP_GRAIN_MS, type AccessRule } from '../../../src/store/types.js'
import { accessInput, freshWorkspaceId, ip } from '../contract-fixtures.js'

async function fresh (t: Test): Promise<BatchingStore> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-sweep-apply-'))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }) })
  return store
}

/** Before the current sweep grain: a sweep now removes it. */
const lapsed = (): number => Math.floor(Date.now() / SWEEP_GRAIN_MS) * SWEEP_GRAIN_MS - 1

const upsert = (ws: string, i: number, expiresAt: number | null) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws, { target: ip(`10.2.${i >> 8}.${i & 255}/32`), expiresAt }) })

t.test('the sweep runs in the batch\'s transaction, after its ops, and its pass comes back', async (t) => {
  const store = await fresh(t)
  const ws = freshWorkspaceId()
  // Five transactions, five expiry-log entries of ten: a pass reads entries whole.
  for (let b = 0; b < 5; b++) await store.applyRuleBatch({ ops: Array.from({ length: 10 }, (_, i) => upsert(ws, b * 10 + i, lapsed())) })
  const revision = await store.rules.revisionOf(ws)
  // Rule 0 is refreshed by the batch itself: its ops go first, so it is not swept.
  const result = await store.applyRuleBatch({ ops: [upsert(ws, 0, null), upsert(ws, 100, null)], checkpoint: { consumer: 'rules', seq: 2, expected: 0 }, sweep: { now: Date.now(), limit: 20 } })
  t.match(result, { applied: true, upserted: 2, swept: { removed: Number, more: true } })
  const first = result.swept!.removed
  t.ok(first >= 19 && first <= 30, `a bounded pass (${first} of 49)`)
  let removed = first
  for (let seq = 3; removed < 49; seq++) {
    const next = await store.applyRuleBatch({ ops: [], checkpoint: { consumer: 'rules', seq, expected: seq - 1 }, sweep: { now: Date.now(), limit: 20 } })
    removed += next.swept!.removed
    if (!next.swept!.more) break
  }
  t.equal(removed, 49, 'every lapsed rule but the refreshed one')
  const left = await store.rules.list(ws, 'access_rule')
  t.same(left.map((r) => (r as AccessRule).target.value).sort(), ['10.2.0.0/32', '10.2.0.100/32'])
  t.ok(await store.rules.revisionOf(ws) > revision, 'the workspace\'s revision rose')
  t.equal(store.housekeeping.rulesSwept, 49, 'counted as a sweep')
  t.equal((await store.rules.lapsedTombstones(ws, ip('10.2.0.7/32'))).length, 1, 'with a tombstone')
})

t.test('a batch whose checkpoint moved applies nothing and sweeps nothing', async (t) => {
  const store = await fresh(t)
  const ws = freshWorkspaceId()
  await store.applyRuleBatch({ ops: Array.from({ length: 10 }, (_, i) => upsert(ws, i, lapsed())), checkpoint: { consumer: 'rules', seq: 5 } })
  const result = await store.applyRuleBatch({ ops: [], checkpoint: { consumer: 'rules', seq: 9, expected: 4 }, sweep: { now: Date.now(), limit: 100 } })
  t.same(result, { applied: false, checkpoint: 5, upserted: 0, deleted: 0 })
  t.equal((await store.rules.list(ws, 'access_rule')).length, 10)
})

t.test('a sweep with scrub: false removes lapses only; the stale references of later buckets wait for one that scrubs', async (t) => {
  const store = await fresh(t)
  const ws = freshWorkspaceId()
  const hour = Math.floor(Date.now() / SWEEP_GRAIN_MS) * SWEEP_GRAIN_MS + 3_600_000
  // Ten rules logged in a bucket an hour away, then moved to the next bucket: their first
  // references are stale, in a bucket that has not ended (the purge does not reach them).
  await store.applyRuleBatch({ ops: Array.from({ length: 10 }, (_, i) => upsert(ws, i, hour)) })
  await store.applyRuleBatch({ ops: Array.from({ length: 10 }, (_, i) => upsert(ws, i, hour + SWEEP_GRAIN_MS)) })
  await lapsedIn(store, ws, 3)
  const cases = [
    { description: 'scrub: false: the lapses, no scrub', scrub: false as boolean | undefined, expected: { removed: 3, staleCleaned: 0 } },
    { description: 'scrub absent: the rest of the budget scrubs', scrub: undefined, expected: { removed: 0, staleCleaned: 10 } },
  ]
  let seq = 1
  for (const { description, scrub, expected } of cases) {
    const sweep = { now: Date.now(), limit: 100, ...(scrub === undefined ? {} : { scrub }) }
    const result = await store.applyRuleBatch({ ops: [], checkpoint: { consumer: 'rules', seq, expected: seq - 1 }, sweep })
    seq++
    t.match(result.swept, expected, description)
  }
  t.equal((await store.rules.list(ws, 'access_rule')).length, 10, 'the moved rules stay')
})

/** `n` rules of `ws` that lapsed before the current sweep grain, in one transaction. */
async function lapsedIn (store: BatchingStore, ws: string, n: number): Promise<void> {
  await store.applyRuleBatch({ ops: Array.from({ length: n }, (_, i) => upsert(ws, 200 + i, lapsed())) })
}
