/**
 * Two servers on one data directory each run a consumer of the same name: one here, one in a
 * child process, racing over records appended while both run. LMDB's write lock spans processes
 * and the checkpoint is a compare-and-set, so between them every record is applied exactly once,
 * in order, and the rules are those of one consumer alone.
 *
 * The file is its own child: `consumer-processes.test.ts --child <dataDir> <head>`.
 */
import { spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import type { BatchingStore } from '../../src/store/batch-types.js'
import { openStore } from '../../src/store/open.js'
import type { AccessRule, StreamRecordInput } from '../../src/store/types.js'
import { StreamConsumer } from '../../src/stream/consumer.js'

const RECORDS = 1200

/** A store whose applyRuleBatch counts the ops it applied and the batches it refused. */
function counting (store: BatchingStore): { store: BatchingStore, counts: { applied: number, refused: number } } {
  const counts = { applied: 0, refused: 0 }
  const proxy = new Proxy(store, {
    get (target, prop, receiver) {
      if (prop === 'applyRuleBatch') {
        return async (batch: Parameters<BatchingStore['applyRuleBatch']>[0]) => {
          const r = await target.applyRuleBatch(batch)
          if (r.applied) counts.applied += batch.ops.length
          else counts.refused++
          return r
        }
      }
      return Reflect.get(target, prop, receiver) as unknown
    },
  })
  return { store: proxy, counts }
}

async function runChild (dataDir: string, head: number): Promise<void> {
  const opened = await openStore({ kind: 'embedded', dataDir })
  const { store, counts } = counting(opened)
  const consumer = new StreamConsumer(store, { pollMs: 5, batchSize: 13, lease: false })
  await consumer.start()
  process.stdout.write('started\n')
  while (!await consumer.waitFor(head, 1000)) { /* records are still being appended */ }
  await consumer.stop()
  await opened.close()
  process.stdout.write(JSON.stringify(counts) + '\n')
}

function recordsFor (i: number): StreamRecordInput[] {
  return Array.from({ length: 40 }, (_, j) => {
    const n = i + j
    const ip = `192.0.2.${n % 29}`
    return {
      workspaceId: 'w',
      acceptedAt: 1_700_000_000_000,
      payload: n % 5 === 4
        ? `{"type":"access_rules","action":"unblock","ip":"${ip}"}`
        : `{"type":"access_rules","action":"block","ip":"${ip}","expiration":${60 + n}}`,
    }
  })
}

async function runTest (): Promise<void> {
  const { default: t } = await import('tap')
  t.test('a consumer here and one in another process apply every record once, in order', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'threatfeed-consumers-'))
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    const opened = await openStore({ kind: 'embedded', dataDir: dir })
    t.teardown(() => opened.close())
    const { store, counts } = counting(opened)

    const child = spawn(process.execPath, ['--import=tsx', fileURLToPath(import.meta.url), '--child', dir, String(RECORDS)], { stdio: ['ignore', 'pipe', 'inherit'] })
    t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
    t.equal((await lines.next()).value, 'started')

    const consumer = new StreamConsumer(store, { pollMs: 5, batchSize: 17, lease: false })
    await consumer.start()
    t.teardown(() => consumer.stop())
    for (let i = 0; i < RECORDS; i += 40) {
      await opened.stream.append(recordsFor(i))
      consumer.poll()
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
    t.ok(await consumer.waitFor(RECORDS, 10_000), 'this consumer saw the head applied')
    const theirs = JSON.parse(String((await lines.next()).value)) as { applied: number, refused: number }
    t.equal(counts.applied + theirs.applied, RECORDS, 'every record applied exactly once, by one or the other')
    t.ok(counts.applied > 0 && theirs.applied > 0, `both applied some (${counts.applied} here, ${theirs.applied} there)`)
    t.comment(`refused after losing a race: ${counts.refused} here, ${theirs.refused} there`)

    // One consumer alone over the same records, in a second directory.
    const aloneDir = await mkdtemp(join(tmpdir(), 'threatfeed-consumers-alone-'))
    t.teardown(() => rm(aloneDir, { recursive: true, force: true }))
    const alone = await openStore({ kind: 'embedded', dataDir: aloneDir })
    t.teardown(() => alone.close())
    for (let i = 0; i < RECORDS; i += 40) await alone.stream.append(recordsFor(i))
    const single = new StreamConsumer(alone, { pollMs: 1000 })
    await single.start()
    await single.stop()
    const view = async (s: BatchingStore) => ((await s.rules.list('w', 'access_rule')) as AccessRule[]).map((r) => [r.target.value, r.expiresAt, r.seq]).sort()
    t.same(await view(opened), await view(alone), 'the rules of one consumer alone')
  })
}

if (process.argv[2] === '--child') await runChild(process.argv[3]!, Number(process.argv[4]))
else await runTest()
