/**
 * Issue 33, item 3: a checkpoint that goes back. After a MongoDB failover with rollback the
 * applier's last slices may be gone and their seqs reused; a follower that kept the higher
 * position would skip the records that take those seqs. It follows the checkpoint both ways.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../../src/store/open.js'
import { StreamConsumer } from '../../src/stream/consumer.js'

t.test('a follower follows the applier\'s checkpoint back as well as forward', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-follow-back-'))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }) })
  // Another node holds the applier lease for the whole test.
  await store.leases!.claim('applier:rules', 'another-node', 60_000)
  const consumer = new StreamConsumer(store, { pollMs: 20 })
  await consumer.start()
  t.teardown(() => consumer.stop())
  const cases = [
    { description: 'forward', checkpoint: 10 },
    { description: 'back (the slices after 7 were rolled back)', checkpoint: 7 },
    { description: 'forward again', checkpoint: 9 },
  ]
  for (const c of cases) {
    await store.stream.setCheckpoint('rules', c.checkpoint)
    for (let i = 0; i < 100 && consumer.position !== c.checkpoint; i++) await new Promise((resolve) => setTimeout(resolve, 20))
    t.equal(consumer.position, c.checkpoint, c.description)
  }
})
