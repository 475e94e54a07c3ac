/**
 * A directed experiment for the soak's growth with sweep on: does a reader holding one LMDB
 * snapshot across its slices keep the sweep's freed pages from being reused?
 *
 * One embedded store, one workspace with SEED long-lived rules; ROUNDS rounds each insert
 * PER_ROUND rules that lapse at once and sweep them (passes of 2,000 with a turn between, as the
 * Housekeeper does). READER=held runs feed reloads back to back meanwhile (a whole read of the
 * workspace, accessRulesChangedSince from -1, sliced as a rebuild is); READER=none runs none.
 * After each round it prints data.mdb's size and, from LMDB's own counts, the pages in use by
 * every table, the free list's pages and the pages never handed out again (the rest).
 *
 *   READER=held npx tsx bench/soak/pages.ts
 *   READER=none npx tsx bench/soak/pages.ts
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { open } from 'lmdb'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import type { AccessRuleInput } from '../../src/store/types.js'

const READER = process.env.READER ?? 'held'
const ROUNDS = Number(process.env.ROUNDS ?? 12)
const PER_ROUND = Number(process.env.PER_ROUND ?? 20_000)
const SEED = Number(process.env.SEED ?? 100_000)

let seq = 1
function input (workspaceId: string, n: number, expiresAt: number | null): AccessRuleInput {
  return {
    workspaceId, kind: 'access_rule', ruleRef: null, labels: {}, reason: 'scanner seen by sensor 7', expiresAt, seq: seq++,
    target: { type: 'ip', value: `${10 + (n >>> 24)}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}/32` },
    action: 'block', name: null, confidence: null, severity: null,
  }
}

interface Stat { treeBranchPageCount: number, treeLeafPageCount: number, overflowPages: number }
const pagesOf = (s: Stat): number => s.treeBranchPageCount + s.treeLeafPageCount + s.overflowPages

const dir = mkdtempSync(join(tmpdir(), 'tf-pages-'))
const store = await openEmbeddedStore(dir)
// A read-only look at LMDB's counts (lmdb-js shares the environment within the process).
const root = open({ path: dir, noSubdir: false, maxDbs: 24, readOnly: true })
const names = Array.from(root.getKeys({}), String)
const tables = names.map((name) => ({ name, db: root.openDB(name, { encoding: 'binary' }) }))

function pages (): { file: number, used: number, free: number, byTable: Record<string, number> } {
  root.resetReadTxn()
  const all = root.getStats() as Stat & { lastPageNumber: number, free: Stat, root: Stat }
  const byTable: Record<string, number> = {}
  let used = pagesOf(all.root) + pagesOf(all.free) + 2
  for (const { name, db } of tables) {
    const p = pagesOf(db.getStats() as Stat)
    byTable[name] = p
    used += p
  }
  const file = all.lastPageNumber + 1
  return { file, used, free: file - used, byTable }
}

const ws = await store.workspaces.create({ name: 'soak', subscription: 'active' })
let n = 0
async function insert (count: number, expiresAt: () => number | null): Promise<void> {
  for (let done = 0; done < count; done += 1000) {
    await Promise.all(Array.from({ length: Math.min(1000, count - done) }, () => store.rules.upsertAccessRule(input(ws.id, n++, expiresAt()))))
  }
}
await insert(SEED, () => null)

let stop = false
let reloads = 0
const reader = (async () => {
  if (READER !== 'held') return
  while (!stop) {
    await store.rules.accessRulesChangedSince(ws.id, -1, Date.now(), () => {})
    reloads++
  }
})()

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))
const started = performance.now()
for (let round = 1; round <= ROUNDS; round++) {
  await insert(PER_ROUND, () => Date.now() + 1)
  let swept = 0
  for (;;) {
    const pass = await store.rules.sweepLapsed(Date.now() + 3_600_000, 2000)
    swept += pass.removed
    if (!pass.more) break
    await turn()
  }
  const p = pages()
  const top = Object.entries(p.byTable).filter(([, v]) => v > 50).map(([k, v]) => `${k} ${v}`).join(', ')
  console.log(`round ${round}  swept ${swept}  data.mdb ${(statSync(join(dir, 'data.mdb')).size / 2 ** 20).toFixed(1)} MiB  pages: file ${p.file} used ${p.used} free ${p.free}  reloads ${reloads}  (${top})`)
}
stop = true
await reader
console.log(`READER=${READER} ${((performance.now() - started) / 1000).toFixed(1)} s`)
await root.close()
await store.close()
rmSync(dir, { recursive: true, force: true })
