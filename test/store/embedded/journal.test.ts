/**
 * The admin journal on LMDB (types.ts JournalStore): newest first with cursors, replace on the
 * same (table, partition, at, id), and the sweep's bounds by age and by count per partition.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../../../src/store/open.js'
import type { JournalBounds, JournalTable } from '../../../src/store/types.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-journal-'))
const store = await openStore({ kind: 'embedded', dataDir: dir })
t.teardown(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }) })
const journal = store.journal!

t.test('pages newest first, strictly before the cursor; a put with the same key replaces', async (t) => {
  await journal.put(Array.from({ length: 5 }, (_, i) => ({ table: 'batch' as const, partition: 'w1', at: 1000 + i, id: `b${i}`, data: { i } })))
  await journal.put([{ table: 'batch', partition: 'w2', at: 5000, id: 'x', data: {} }])
  const first = await journal.page('batch', 'w1', 2)
  t.same(first.map((e) => e.id), ['b4', 'b3'])
  const second = await journal.page('batch', 'w1', 10, { at: 1003, id: 'b3' })
  t.same(second.map((e) => e.id), ['b2', 'b1', 'b0'], 'other partitions stay out')
  await journal.put([{ table: 'batch', partition: 'w1', at: 1004, id: 'b4', data: { i: 40 } }])
  t.same((await journal.page('batch', 'w1', 1))[0]?.data, { i: 40 })
  t.same(await journal.page('audit', 'w1', 10), [], 'tables are apart')
})

t.test('the sweep keeps each partition within its age and count', async (t) => {
  await journal.put(Array.from({ length: 30 }, (_, i) => ({ table: 'audit' as const, partition: 'w3', at: 10_000 + i, id: `a${String(i).padStart(2, '0')}`, data: {} })))
  const bounds: Record<JournalTable, JournalBounds> = {
    batch: { keepMs: 1e12, maxPerPartition: 3 },
    feed_size: { keepMs: 1e12, maxPerPartition: 10 },
    audit: { keepMs: 15, maxPerPartition: 10 },
  }
  let removed = 0
  for (;;) {
    const pass = await journal.sweep(10_030, bounds, 4)
    t.ok(pass.removed <= 4, 'bounded pass')
    removed += pass.removed
    if (!pass.more) break
  }
  // audit w3: older than 10_015 go (15), then of the 15 left the 10 newest stay; batch w1: 3 of 5 stay.
  t.equal(removed, 20 + 2)
  t.same((await journal.page('audit', 'w3', 100)).map((e) => e.at), Array.from({ length: 10 }, (_, i) => 10_029 - i))
  t.same((await journal.page('batch', 'w1', 100)).map((e) => e.id), ['b4', 'b3', 'b2'])
  t.equal((await journal.page('batch', 'w2', 100)).length, 1)
})
