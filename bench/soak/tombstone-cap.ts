/**
 * A directed experiment for the soak's jump at the tombstone cap: what does a sweep pass cost,
 * and how does the data file grow, before and after the tombstones reach THREATFEED_TOMBSTONE_MAX?
 *
 * One embedded store with a cap of CAP tombstones, one workspace with SEED long-lived rules;
 * ROUNDS rounds each insert PER_ROUND random-target rules that lapse at once and sweep them in
 * passes of 2,000 with a turn between (as the Housekeeper does). After each round: tombstones
 * kept, the sweep's total and longest pass, data.mdb's size, and the pages (from LMDB's own
 * counts) and bytes per tombstone of the two tombstone tables.
 *
 *   CAP=40000 PER_ROUND=10000 ROUNDS=10 npx tsx bench/soak/tombstone-cap.ts
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { open } from 'lmdb'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import type { AccessRuleInput } from '../../src/store/types.js'

const CAP = Number(process.env.CAP ?? 40_000)
const ROUNDS = Number(process.env.ROUNDS ?? 10)
const PER_ROUND = Number(process.env.PER_ROUND ?? 10_000)
const SEED = Number(process.env.SEED ?? 50_000)

let seq = 1
function input (workspaceId: string, expiresAt: number | null): AccessRuleInput {
  const n = Math.floor(Math.random() * 2 ** 30)
  return {
    workspaceId, kind: 'access_rule', ruleRef: null, labels: {}, reason: null, expiresAt, seq: seq++,
    target: { type: 'ip', value: `${11 + (n >>> 24)}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}/32` },
    action: 'block', name: null, confidence: null, severity: null,
  }
}

interface Stat { treeBranchPageCount: number, treeLeafPageCount: number, overflowPages: number, entryCount: number }
const pagesOf = (s: Stat): number => s.treeBranchPageCount + s.treeLeafPageCount + s.overflowPages

const dir = mkdtempSync(join(tmpdir(), 'tf-tombcap-'))
const store = await openEmbeddedStore(dir, { tombstoneMax: CAP })
const root = open({ path: dir, noSubdir: false, maxDbs: 24, readOnly: true })
const tomb = root.openDB('tombstones-by-target', { encoding: 'binary' })
const byTime = root.openDB('tombstone-log', { encoding: 'binary' })

const ws = await store.workspaces.create({ name: 'soak', subscription: 'active' })
async function insert (count: number, expiresAt: () => number | null): Promise<void> {
  for (let done = 0; done < count; done += 1000) {
    await Promise.all(Array.from({ length: Math.min(1000, count - done) }, () => store.rules.upsertAccessRule(input(ws.id, expiresAt()))))
  }
}
await insert(SEED, () => null)

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))
let lapse = Date.now() - 3_600_000
for (let round = 1; round <= ROUNDS; round++) {
  // Lapse times in the past, later each round (oldest-first eviction drops earlier rounds' first).
  await insert(PER_ROUND, () => lapse++)
  let swept = 0
  let dropped = 0
  let passes = 0
  let longest = 0
  const t0 = performance.now()
  for (;;) {
    const p0 = performance.now()
    const pass = await store.rules.sweepLapsed(Date.now(), 2000)
    longest = Math.max(longest, performance.now() - p0)
    swept += pass.removed
    dropped += pass.tombstonesDropped
    passes++
    if (!pass.more) break
    await turn()
  }
  const ms = performance.now() - t0
  root.resetReadTxn()
  const t = tomb.getStats() as Stat
  const b = byTime.getStats() as Stat
  const all = root.getStats() as Stat & { pageSize: number }
  const kept = t.entryCount
  const bytes = (pagesOf(t) + pagesOf(b)) * all.pageSize
  console.log(`round ${round}  swept ${swept}  dropped ${dropped}  kept ${kept}  passes ${passes}  sweep ${ms.toFixed(0)} ms (longest pass ${longest.toFixed(1)} ms)  data.mdb ${(statSync(join(dir, 'data.mdb')).size / 2 ** 20).toFixed(1)} MiB  tombstone tables ${(bytes / 2 ** 20).toFixed(1)} MiB = ${kept === 0 ? '-' : (bytes / kept).toFixed(0)} B each (by key ${pagesOf(t)} pages, by time ${pagesOf(b)})`)
}
await root.close()
await store.close()
rmSync(dir, { recursive: true, force: true })
