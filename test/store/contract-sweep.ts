/** Store contract, housekeeping side: the sweep of lapsed rules, their tombstones, the stream trim. */
import type { BatchingStore } from '../../src/store/batch-types.js'
import { SWEEP_GRAIN_MS, TOMBSTONE_MS, type StreamRecordInput } from '../../src/store/types.js'
import type { StoreTest } from './contract.js'
import { accessInput, expressionInput, freshWorkspaceId, ip } from './contract-fixtures.js'

/** Sweeps until a pass says there is nothing more; returns the passes' totals. */
export async function sweepAll (store: BatchingStore, now: number, limit: number): Promise<{ removed: number, tombstonesDropped: number, passes: number, largest: number }> {
  let largest = 0
  let removed = 0
  let tombstonesDropped = 0
  let passes = 0
  for (let more = true; more; passes++) {
    if (passes > 10_000) throw new Error('the sweep never ends')
    const pass = await store.rules.sweepLapsed(now, limit)
    removed += pass.removed
    tombstonesDropped += pass.tombstonesDropped
    largest = Math.max(largest, pass.removed)
    more = pass.more
  }
  return { removed, tombstonesDropped, passes, largest }
}

async function trimAll (store: BatchingStore, acceptedBefore: number, limit: number): Promise<{ records: number, passes: number }> {
  let records = 0
  let passes = 0
  for (let more = true; more; passes++) {
    if (passes > 10_000) throw new Error('the trim never ends')
    const pass = await store.stream.trim(acceptedBefore, limit)
    records += pass.records
    more = pass.more
  }
  return { records, passes }
}

function appendOf (workspaceId: string, n: number, acceptedAt: number): StreamRecordInput[] {
  return Array.from({ length: n }, (_, i) => ({ workspaceId, schemaVersion: 2, payload: `{"n":${i}}`, acceptedAt }))
}

export function describeSweepContract (test: StoreTest): void {
  // A sweep at NOW removes what lapsed before the start of NOW's grain.
  const NOW = 1_000_000 * SWEEP_GRAIN_MS + 4000
  const CUT = NOW - 4000
  /** The tombstone cap of the test that sets one. */
  const CAP = 10

  test('sweep: removes lapsed rules only, leaves a tombstone each, raises only their workspaces', async (t, store) => {
    const ws = freshWorkspaceId()
    const other = freshWorkspaceId()
    const target = ip('192.0.2.0/24')
    await store.rules.upsertAccessRule(accessInput(ws, { target, expiresAt: CUT - 60_000 }))
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'keyed', target, expiresAt: CUT - 1 }))
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'at-cut', expiresAt: CUT }))
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'live', expiresAt: NOW + 3_600_000 }))
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'never' }))
    await store.rules.upsertExpressionRule(expressionInput(ws, { ruleRef: 'e-old', expiresAt: CUT - 5 * SWEEP_GRAIN_MS }))
    // Renewed after it lapsed: the store must not take it for the lapsed rule it was.
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'renewed', expiresAt: CUT - 20_000 }))
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'renewed', expiresAt: NOW + 60_000 }))
    // Deleted before the sweep: no tombstone, nothing counted.
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'deleted', target: ip('198.51.100.7/32'), expiresAt: CUT - 30_000 }))
    await store.rules.deleteByRef(ws, 'access_rule', 'deleted')
    await store.rules.upsertAccessRule(accessInput(other, { ruleRef: 'o-live', expiresAt: NOW + 60_000 }))
    const before = { ws: await store.rules.revisionOf(ws), other: await store.rules.revisionOf(other) }

    const first = await sweepAll(store, NOW, 1000)
    t.equal(first.removed, 3, 'the unkeyed and the keyed rule of the /24, and e-old')
    t.same((await store.rules.list(ws, 'access_rule')).map((r) => r.ruleRef).sort(), ['at-cut', 'live', 'never', 'renewed'])
    t.same(await store.rules.list(ws, 'waf_rule'), [])
    t.ok(await store.rules.revisionOf(ws) > before.ws, 'the swept workspace\'s revision rose')
    t.equal(await store.rules.revisionOf(other), before.other, 'a workspace with nothing swept keeps its revision')
    t.equal(await store.rules.deleteAccessByTarget(ws, target), 0, 'the target index forgot the swept rules')

    t.same(await store.rules.lapsedTombstones(ws, target), [
      { workspaceId: ws, kind: 'access_rule', target, ruleRef: 'keyed', lapsedAt: CUT - 1, action: 'block' },
      { workspaceId: ws, kind: 'access_rule', target, ruleRef: null, lapsedAt: CUT - 60_000, action: 'block' },
    ], 'both rules of the target, latest lapse first')
    t.same(await store.rules.lapsedTombstones(ws, { kind: 'waf_rule', ruleRef: 'e-old' }), [
      { workspaceId: ws, kind: 'waf_rule', target: null, ruleRef: 'e-old', lapsedAt: CUT - 5 * SWEEP_GRAIN_MS },
    ])
    t.same(await store.rules.lapsedTombstones(ws, ip('198.51.100.7/32')), [], 'a deleted rule leaves no tombstone')
    t.same(await store.rules.lapsedTombstones(other, target), [], 'tombstones are per workspace')

    const again = await sweepAll(store, NOW, 1000)
    t.equal(again.removed, 0, 'a second sweep finds nothing: idempotent')
    t.equal((await sweepAll(store, NOW + SWEEP_GRAIN_MS, 1000)).removed, 1, 'at-cut goes once its grain has ended')
  })

  test('sweep: bounded passes remove everything due, and tombstones go a day after the lapse', async (t, store) => {
    const ws = freshWorkspaceId()
    const n = 250
    await store.applyRuleBatch({
      ops: Array.from({ length: n }, (_, i) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws, { target: ip(`10.0.${i >> 8}.${i & 255}/32`), expiresAt: CUT - 1 - (i % 7) * SWEEP_GRAIN_MS }) })),
    })
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'live', expiresAt: NOW + 1 }))
    const swept = await sweepAll(store, NOW, 40)
    t.equal(swept.removed, n, 'every lapsed rule, over several passes')
    // The embedded store handles whole expiry-log entries (those of one bucket and transaction).
    t.ok(swept.passes >= 3 && swept.largest <= 2 * 40, `in bounded passes (${swept.passes}, at most ${swept.largest} rules each)`)
    t.same((await store.rules.list(ws, 'access_rule')).map((r) => r.ruleRef), ['live'])
    t.equal((await store.rules.lapsedTombstones(ws, ip('10.0.0.5/32'))).length, 1)

    t.equal((await sweepAll(store, CUT + TOMBSTONE_MS - 7 * SWEEP_GRAIN_MS, 1000)).tombstonesDropped, 0, 'all kept within a day of their lapse')
    const late = await sweepAll(store, CUT + TOMBSTONE_MS + 1, 40)
    t.equal(late.tombstonesDropped, n, 'then dropped, in bounded passes')
    t.same(await store.rules.lapsedTombstones(ws, ip('10.0.0.5/32')), [])
  })

  test('sweep: at most the tombstone cap is kept, oldest lapse dropped first, in bounded passes', async (t, store) => {
    const ws = freshWorkspaceId()
    const n = 30
    // Lapse times 1 … 30 grains before the cut, one rule each: rule i lapses i grains early.
    await store.applyRuleBatch({
      ops: Array.from({ length: n }, (_, i) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws, { target: ip(`10.1.0.${i}/32`), expiresAt: CUT - 1 - i * SWEEP_GRAIN_MS }) })),
    })
    const swept = await sweepAll(store, NOW, 4)
    t.equal(swept.removed, n, 'every lapsed rule swept')
    t.equal(swept.tombstonesDropped, n - CAP, 'all but the cap dropped, well within a day of their lapse')
    t.ok(swept.passes >= 3, `in bounded passes (${swept.passes})`)
    const kept = async (): Promise<number[]> => {
      const found: number[] = []
      for (let i = 0; i < n; i++) if ((await store.rules.lapsedTombstones(ws, ip(`10.1.0.${i}/32`))).length > 0) found.push(i)
      return found
    }
    t.same(await kept(), Array.from({ length: CAP }, (_, i) => i), 'the latest lapses kept, the oldest gone')
    t.same(await sweepAll(store, NOW, 4), { removed: 0, tombstonesDropped: 0, passes: 1, largest: 0 }, 'at the cap, nothing more goes')

    // Renewed, then lapsed again: its latest lapse is the one read back, and no other rule's
    // tombstone goes for it. Its earlier tombstone is replaced (MongoDB) or, appended to
    // (embedded, tombstones.ts), is the oldest and goes first.
    await store.rules.upsertAccessRule(accessInput(ws, { target: ip(`10.1.0.${CAP - 1}/32`), expiresAt: CUT - 1 + 2 * SWEEP_GRAIN_MS }))
    const relapsed = await sweepAll(store, NOW + 3 * SWEEP_GRAIN_MS, 100)
    t.ok(relapsed.tombstonesDropped <= 1, `at most its own earlier tombstone dropped (${relapsed.tombstonesDropped})`)
    t.same(await kept(), Array.from({ length: CAP }, (_, i) => i), 'every identity still has its tombstone')
    t.same((await store.rules.lapsedTombstones(ws, ip(`10.1.0.${CAP - 1}/32`))).map((x) => x.lapsedAt), [CUT - 1 + 2 * SWEEP_GRAIN_MS], 'one tombstone: the latest lapse')
    await store.rules.upsertAccessRule(accessInput(ws, { target: ip('10.2.0.1/32'), expiresAt: CUT - 1 + 2 * SWEEP_GRAIN_MS }))
    const next = await sweepAll(store, NOW + 3 * SWEEP_GRAIN_MS, 100)
    t.same({ removed: next.removed, tombstonesDropped: next.tombstonesDropped }, { removed: 1, tombstonesDropped: 1 }, 'one more lapse: the oldest one goes')
    t.same(await kept(), [...Array.from({ length: CAP - 2 }, (_, i) => i), CAP - 1], `tombstone ${CAP - 2}, now the oldest, went; ${CAP - 1} lapsed again and stays`)
    t.equal((await store.rules.lapsedTombstones(ws, ip('10.2.0.1/32'))).length, 1, 'the new lapse is kept')
    t.equal((await sweepAll(store, CUT + TOMBSTONE_MS + 3 * SWEEP_GRAIN_MS, 100)).tombstonesDropped, CAP, 'a day on, the rest go as before')
  }, { tombstoneMax: CAP })

  test('trim: nothing goes without a checkpoint; then whole appends below every checkpoint and older than the cut', async (t, store) => {
    const ws = freshWorkspaceId()
    for (let a = 0; a < 5; a++) await store.stream.append(appendOf(ws, 10, 1000 + a)) // seqs 10a+1 … 10a+10
    t.same(await store.stream.trim(Infinity, 1000), { records: 0, more: false }, 'no consumer has applied anything')
    const full = await store.stream.retained()
    t.same({ first: full.first, last: full.last, records: full.records }, { first: 1, last: 50, records: 50 })
    t.ok(full.bytes > 0, 'a size in bytes')

    await store.stream.setCheckpoint('a', 25)
    await store.stream.setCheckpoint('b', 45)
    t.same(await trimAll(store, 1001, 1000), { records: 10, passes: 1 }, 'only the append accepted before the cut')
    t.equal((await store.stream.retained()).first, 11)

    const rest = await trimAll(store, Infinity, 1000)
    const kept = await store.stream.retained()
    t.ok(kept.first <= 25, `the record the lowest checkpoint names is kept (first ${kept.first})`)
    t.ok(kept.first > 20, 'appends wholly below it are gone')
    t.equal(rest.records, kept.first - 11, 'the counts add up')
    t.same({ last: kept.last, records: kept.records }, { last: 50, records: 51 - kept.first })
    t.same((await store.stream.read(kept.first, 100)).map((r) => r.seq), Array.from({ length: 51 - kept.first }, (_, i) => kept.first + i), 'what is kept reads back whole')
    t.same(await store.stream.trim(Infinity, 1000), { records: 0, more: false }, 'idempotent')

    await store.stream.setCheckpoint('a', 50)
    await trimAll(store, Infinity, 1)
    const later = await store.stream.retained()
    t.ok(later.first > 40 && later.first <= 45, `now checkpoint b bounds it (first ${later.first})`)
    t.equal(await store.stream.getCheckpoint('b'), 45, 'the checkpoints are untouched')
    t.same((await store.stream.append(appendOf(ws, 1, 2000))), [51], 'appends continue after the head')
  })

  test('forgetCheckpoint: a stale consumer stops holding back the trim; the others are untouched', async (t, store) => {
    const ws = freshWorkspaceId()
    for (let a = 0; a < 5; a++) await store.stream.append(appendOf(ws, 10, 1000 + a)) // seqs 10a+1 … 10a+10
    await store.stream.setCheckpoint('rules', 45)
    await store.stream.setCheckpoint('old-node', 5)
    t.same(await store.stream.checkpoints(), [{ consumer: 'old-node', seq: 5 }, { consumer: 'rules', seq: 45 }], 'listed by name')
    await trimAll(store, Infinity, 1000)
    t.equal((await store.stream.retained()).first, 1, 'the stale checkpoint holds everything back')

    t.equal(await store.stream.forgetCheckpoint('old-node'), true, 'there was one')
    t.same(await store.stream.checkpoints(), [{ consumer: 'rules', seq: 45 }])
    t.equal(await store.stream.getCheckpoint('old-node'), 0, 'a forgotten consumer starts from the beginning')
    await trimAll(store, Infinity, 1000)
    const kept = await store.stream.retained()
    t.ok(kept.first > 40 && kept.first <= 45, `now the remaining checkpoint bounds the trim (first ${kept.first})`)
    t.equal(await store.stream.forgetCheckpoint('old-node'), false, 'forgetting again finds nothing')
    t.equal(await store.stream.forgetCheckpoint('never-was'), false, 'nor does an unknown name')
    t.equal(await store.stream.getCheckpoint('rules'), 45, 'the other checkpoint is untouched')

    t.equal(await store.stream.forgetCheckpoint('rules'), true)
    t.same(await store.stream.checkpoints(), [])
    t.same(await store.stream.trim(Infinity, 1000), { records: 0, more: false }, 'with no checkpoint left nothing goes')
  })
}
