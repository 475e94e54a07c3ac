/**
 * The sweep's freed pages are reused while feed reloads run: rules that lapse and are swept in
 * rounds, with whole reads of the workspace (what a feed's first build and the admin API's rule
 * list do, in slices the event loop interleaves) running back to back meanwhile. A read that held
 * one LMDB snapshot across its slices kept every page freed after its start from being reused, so
 * the file grew by what the sweep freed during each read (bench/soak/pages.ts); reads that renew
 * the snapshot per slice leave the file at the size of the first rounds.
 */
import t from 'tap'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import type { RuleOp } from '../../src/store/batch-types.js'
import { accessInput, ip } from './contract-fixtures.js'

const LIVE = 30_000
const ROUNDS = 6
const PER_ROUND = 5000

t.test('the data file stops growing under sweeps while reloads run back to back', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-reload-reuse-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  // No tombstones and no change-log retention: what stays is the live rules, so any growth is
  // pages not reused.
  const store = await openEmbeddedStore(dir, { tombstoneMax: 0, changesKeptMs: 0 })
  t.teardown(() => store.close())
  const ws = (await store.workspaces.create({ name: 'acme', subscription: 'active' })).id
  const batch = async (from: number, count: number, expiresAt: number | null): Promise<void> => {
    const ops: RuleOp[] = []
    for (let i = from; i < from + count; i++) ops.push({ op: 'upsertAccessRule', input: accessInput(ws, { target: ip(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}/32`), expiresAt, seq: i + 1 }) })
    await store.applyRuleBatch({ ops })
  }
  for (let i = 0; i < LIVE; i += 5000) await batch(i, 5000, null)

  let stop = false
  let reloads = 0
  const reloading = (async () => {
    while (!stop) {
      await store.rules.accessRulesChangedSince(ws, -1, Date.now(), () => {})
      reloads++
    }
  })()
  const sizes: number[] = []
  let next = LIVE
  for (let round = 0; round < ROUNDS; round++) {
    const reloadsBefore = reloads
    for (let i = 0; i < PER_ROUND; i += 1000, next += 1000) await batch(next, 1000, Date.now() + 1)
    for (let more = true; more;) {
      more = (await store.rules.sweepLapsed(Date.now() + 3_600_000, 500)).more
      await new Promise((resolve) => setImmediate(resolve))
    }
    // At least one reload ends in every round, whatever the machine's speed: a reload that was
    // running while this round wrote and swept (on a slow machine one reload spans rounds).
    while (reloads === reloadsBefore) await new Promise((resolve) => setTimeout(resolve, 5))
    sizes.push(statSync(join(dir, 'data.mdb')).size)
    t.comment(`round ${round}: ${(sizes.at(-1)! / 2 ** 20).toFixed(1)} MiB, ${reloads} reloads`)
  }
  stop = true
  await reloading
  t.comment(`${reloads} reloads in ${ROUNDS} rounds`)
  t.equal((await store.rules.listAccessRules(ws, Date.now())).length, LIVE, 'only the live rules are left')
  t.ok(sizes.at(-1)! <= sizes[2]! * 1.05, `the file stopped growing after the first rounds: ${sizes.map((s) => (s / 2 ** 20).toFixed(1)).join(', ')} MiB`)
})
