/**
 * The trim under a crash: while a bulk import runs against a server (a child process), this
 * process — a second process on the same data directory, as a second server's housekeeping
 * would be — trims the stream with no retention at all, as far as the checkpoint allows. The
 * server is SIGKILLed mid-import and restarted: the restarted consumer resumes from its
 * checkpoint and needs no record the trim removed (every acknowledged entry is applied), and
 * the first position kept is never past the checkpoint.
 */
import t from 'tap'
import { createReadStream } from 'node:fs'
import { loadEntries } from '../../src/ingest/bulk/load.js'
import { readEntries } from '../../src/ingest/bulk/read-entries.js'
import { openStore } from '../../src/store/open.js'
import type { AccessRule } from '../../src/store/types.js'
import { prepareCrashRun } from '../fixtures/ingest/serve-child-process.js'

const N = 12_000
const { dataDir, port, file, ipOf, startChild } = await prepareCrashRun(t, 'tf-trim-crash-', N)

const first = await startChild(true)
let current = first.child
const store = await openStore({ kind: 'embedded', dataDir })
t.teardown(() => store.close())
t.teardown(() => { current.kill('SIGKILL') })
const { keys, workspace } = first.info


t.test('trimming to the checkpoint during a crash and restart loses nothing acknowledged', async (t) => {
  let trimming = true
  let trimmed = 0
  const pastCheckpoint: string[] = []
  const trimmer = (async () => {
    while (trimming) {
      trimmed += (await store.stream.trim(Date.now() + 60_000, 500)).records
      // Read after the trim: a checkpoint only moves forward, so first <= checkpoint must hold.
      const { first: kept } = await store.stream.retained()
      const checkpoint = await store.stream.getCheckpoint('rules')
      if (trimmed > 0 && kept > checkpoint) pastCheckpoint.push(`first kept ${kept}, checkpoint ${checkpoint}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  })()

  let killed: Promise<void> | null = null
  const summary = await loadEntries(readEntries(createReadStream(file)), {
    url: `http://127.0.0.1:${port}/v1/signal`,
    key: keys.all!,
    concurrency: 4,
    retry: { attempts: 100, baseMs: 20, maxMs: 250 },
    onProgress: (p) => {
      if (killed === null && p.accepted >= N / 3) {
        current.kill('SIGKILL')
        killed = new Promise<void>((resolve) => current.once('exit', () => resolve()))
          .then(async () => { current = (await startChild(false)).child })
      }
    },
  })
  await killed
  t.match(summary, { entries: N, accepted: N, failed: 0, stopped: null })

  const head = await store.stream.head()
  const deadline = Date.now() + 15_000
  while (await store.stream.getCheckpoint('rules') < head && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  trimming = false
  await trimmer
  t.equal(await store.stream.getCheckpoint('rules'), head, 'the restarted consumer applied up to the head')
  t.ok(trimmed > 0, `the trim ran meanwhile (${trimmed} records)`)
  t.same(pastCheckpoint, [], 'the first position kept was never past the checkpoint')

  const rules = (await store.rules.list(workspace, 'access_rule')) as AccessRule[]
  const targets = new Set(rules.map((r) => r.target.value))
  t.equal(rules.length, N, 'one rule per entry')
  t.same(Array.from({ length: N }, (_, i) => `${ipOf(i)}/32`).filter((x) => !targets.has(x)), [], 'every acknowledged entry is applied')
  const kept = await store.stream.retained()
  t.ok(kept.first <= head && kept.first > 1, `the stream keeps ${kept.first}–${kept.last}`)
})
