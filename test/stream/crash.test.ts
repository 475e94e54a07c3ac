/**
 * Crash test: the server (a child process) is SIGKILLed in the middle of a bulk import and
 * restarted on the same data. Every entry that was acknowledged ends up applied, exactly once:
 * one rule per identity, carrying the seq of the last stream record for it, and the consumer's
 * checkpoint reaches the head (DECISIONS §3: durable before the answer; the consumer resumes).
 *
 * The import runs the loader of `threatfeed import` in this process and watches its progress.
 * This process keeps the store open the whole time, as an operator's CLI or a second server
 * would: with lmdb-js's overlapping sync that made the restarted server panic (MDB_PANIC) in
 * about half the runs (test/regressions/lmdb-meta-page-panic.test.ts has the cause).
 */
import t from 'tap'
import { createReadStream } from 'node:fs'
import { loadEntries } from '../../src/ingest/bulk/load.js'
import { readEntries } from '../../src/ingest/bulk/read-entries.js'
import { openStore } from '../../src/store/open.js'
import type { AccessRule } from '../../src/store/types.js'
import { prepareCrashRun } from '../fixtures/ingest/serve-child-process.js'

const N = 20_000
const { dataDir, port, file, ipOf, startChild } = await prepareCrashRun(t, 'tf-crash-', N)

const first = await startChild(true)
let current = first.child
// Opened before the kill and kept open across it and the restart: the scenario that failed.
const store = await openStore({ kind: 'embedded', dataDir })
t.teardown(() => store.close())
t.teardown(() => { current.kill('SIGKILL') })
const { keys, workspace } = first.info


t.test('SIGKILL during a bulk import loses and duplicates nothing', async (t) => {
  let killed: Promise<void> | null = null
  let acceptedAtKill = 0
  const summary = await loadEntries(readEntries(createReadStream(file)), {
    url: `http://127.0.0.1:${port}/v1/signal`,
    key: keys.all!,
    concurrency: 4,
    retry: { attempts: 100, baseMs: 20, maxMs: 250 },
    onProgress: (p) => {
      // Kill once a third of the entries is acknowledged, with batches still in flight.
      if (killed === null && p.accepted >= N / 3) {
        acceptedAtKill = p.accepted
        current.kill('SIGKILL')
        killed = new Promise<void>((resolve) => current.once('exit', () => resolve()))
          .then(async () => { current = (await startChild(false)).child })
      }
    },
  })
  await killed
  t.ok(acceptedAtKill > 0 && acceptedAtKill < N, `killed with ${acceptedAtKill} of ${N} acknowledged`)
  t.match(summary, { entries: N, accepted: N, failed: 0, stopped: null })
  t.ok(summary.retries > 0, `the loader retried through the outage (${summary.retries} retries)`)

  // The restarted consumer resumes from its checkpoint and catches up with the head.
  const head = await store.stream.head()
  const deadline = Date.now() + 10_000
  while (await store.stream.getCheckpoint('rules') < head && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(await store.stream.getCheckpoint('rules'), head, 'applied up to the head')

  const rules = (await store.rules.list(workspace, 'access_rule')) as AccessRule[]
  const targets = new Set(rules.map((r) => r.target.value))
  t.equal(rules.length, N, 'one rule per entry')
  t.equal(targets.size, N, 'no duplicates')
  t.same(Array.from({ length: N }, (_, i) => `${ipOf(i)}/32`).filter((x) => !targets.has(x)), [], 'every acknowledged entry is applied')

  // Exactly once, in order: each rule was last written by the last record of its target.
  const lastSeq = new Map<string, number>()
  for (let from = 1; from <= head; from += 10_000) {
    for (const rec of await store.stream.read(from, 10_000)) lastSeq.set(`${(JSON.parse(rec.payload) as { ip: string }).ip}/32`, rec.seq)
  }
  t.equal(rules.filter((r) => r.seq !== lastSeq.get(r.target.value)).length, 0, 'each rule carries the seq of its last record')
  t.comment(`${head - N} records were appended twice (batches retried after their answer was lost)`)
})
