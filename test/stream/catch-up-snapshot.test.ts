/**
 * A consumer catching up with a long backlog does not pin the stream's read snapshot for the whole
 * catch-up: it yields to the event loop between passes, so lmdb-js's timer that ends a read
 * snapshot runs and LMDB may reuse the pages freed meanwhile (a trim). The observable is LMDB's
 * reader table (readerList: pid, thread, txnid of every open snapshot): while other appends keep
 * committing, the oldest snapshot any reader holds must move on during the catch-up.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { open } from 'lmdb'
import { openStore } from '../../src/store/open.js'
import { ThreadedConsumer } from '../../src/stream/consumer-thread.js'

const BACKLOG = 40_000

/** The oldest snapshot in the reader table, or null when no reader holds one. */
function oldestReader (list: string): number | null {
  let oldest: number | null = null
  for (const line of list.split('\n')) {
    const m = /^\s*\d+\s+[0-9a-f]+\s+(\d+)\s*$/.exec(line)
    if (m !== null) oldest = Math.min(oldest ?? Infinity, Number(m[1]))
  }
  return oldest
}

t.test('the stream snapshot moves on during a long catch-up', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-catchup-'))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const streamEnv = open({ path: join(dir, 'stream'), noSubdir: false, maxDbs: 4 })
  t.teardown(async () => { await streamEnv.close(); await store.close(); rmSync(dir, { recursive: true, force: true }) })
  const ws = await store.workspaces.create({ name: 'w', subscription: 'active' })
  const entry = (n: number) => ({ workspaceId: ws.id, acceptedAt: Date.now(), payload: `{"type":"access_rules","action":"block","ip":"10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}"}` })
  for (let b = 0; b < BACKLOG / 1000; b++) await store.stream.append(Array.from({ length: 1000 }, (_, i) => entry(b * 1000 + i)))

  const consumer = new ThreadedConsumer({ handoff: store.consumerThread!, pollMs: 60_000, batchSize: 250, logLevel: 'silent', log: { info: () => {}, warn: () => {}, error: () => {} } })
  let caughtUp = false
  const started = consumer.start().then(() => { caughtUp = true })
  t.teardown(() => consumer.stop())
  // Appends from this thread commit new stream transactions while the consumer thread catches up.
  const oldest: number[] = []
  let n = BACKLOG
  while (!caughtUp) {
    await store.stream.append([entry(n++)])
    const o = oldestReader(streamEnv.readerList())
    if (o !== null) oldest.push(o)
    await sleep(5)
  }
  await started
  t.ok(oldest.length >= 10, `sampled the reader table during the catch-up (${oldest.length} samples)`)
  // Pinned, the consumer's snapshot stays at the one it took first, the oldest for the whole run.
  const first = oldest[0]!
  const last = oldest[oldest.length - 1]!
  t.ok(last > first, `the oldest snapshot moved on (from txn ${first} to ${last})`)
})
