/**
 * Regression: `MDB_PANIC: Update of meta page failed` after a writer was SIGKILLed while another
 * process kept the same LMDB environment open, then an unhandled lmdb-js `commitError` rejection
 * that crashed the server.
 *
 * Cause: lmdb-js's overlapping sync guards its flush with a third robust mutex in the lock file.
 * A writer killed during that flush leaves the mutex owner-dead; the next process to take it in
 * a commit of over 500 dirty pages takes it with its write transaction still open, and LMDB's
 * dead-owner recovery — written for the write mutex (mdb_mutex_failed) — then declares that
 * process's environment hosed (MDB_PANIC) and unlocks the mutex without marking it consistent,
 * so it stays unusable for every process until all of them close the environment. A freshly
 * started process has flushed nothing yet, so its first sizeable commit is such a commit: the
 * restarted server's. When no other process holds the environment, the restarted one re-creates
 * the lock file and nothing shows: hence "only when the test kept the store open". The store now
 * opens without overlapping sync (commits flush inside the write lock; see lmdb-env.ts).
 *
 * The scenario as it failed: this process keeps the store open while a writer child is SIGKILLed
 * inside a flush (watched through /proc: a flush is too short to hit by chance on a fast disk,
 * which is why the original failure needed a loaded machine), several times; each time a new
 * writer starts and makes a big first commit, then this process writes; at the end both write
 * at once, and everything either side acknowledged must be there.
 *
 * The file is its own child: `lmdb-meta-page-panic.test.ts --child <dataDir> <start>`.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { openStore } from '../../src/store/open.js'
import type { BatchingStore, RuleOp } from '../../src/store/batch-types.js'

const WORKSPACE = '0d5e4c39-59a8-4d4b-9a52-0a8c3ad1f6b1'
const KILLS = 4

function ruleOps (tag: string, count: number, seq: number): RuleOp[] {
  return Array.from({ length: count }, (_, i) => ({
    op: 'upsertAccessRule' as const,
    input: {
      workspaceId: WORKSPACE, kind: 'access_rule' as const, ruleRef: `${tag}-${i}`, target: { type: 'ip' as const, value: `10.${(i >> 8) & 255}.${i & 255}.0/24` },
      action: 'block' as const, name: null, confidence: null, severity: null, labels: {}, reason: null, expiresAt: Date.now() + 3_600_000, seq,
    },
  }))
}

/** One write as the server makes them: a stream append, then rules with the checkpoint. */
async function writeRound (store: BatchingStore, tag: string, records: number, rules: number, pad = 100): Promise<{ first: number, count: number }> {
  const payload = `{"tag":"${tag}","pad":"${'x'.repeat(pad)}"}`
  const seqs = await store.stream.append(Array.from({ length: records }, () => ({ workspaceId: WORKSPACE, payload, acceptedAt: Date.now() })))
  await store.applyRuleBatch({ ops: ruleOps(tag, rules, seqs.at(-1)!), checkpoint: { consumer: `c-${tag}`, seq: seqs.at(-1)! } })
  return { first: seqs[0]!, count: seqs.length }
}

async function runChild (dataDir: string, start: number): Promise<void> {
  const store = await openStore({ kind: 'embedded', dataDir })
  // First a transaction of over 500 dirty pages, as a restarted server's consumer catching up
  // makes: lmdb-js takes the flush mutex before closing such a transaction, which is what turned
  // the dead-owner recovery into MDB_PANIC. Then small writes from several loops, so that the
  // process is often inside a flush.
  let i = start
  const tag = `child${i++}`
  const first = await writeRound(store, tag, 6000, 1000, 300)
  process.stdout.write(`ack ${first.first} ${first.count} ${tag}\n`)
  await Promise.all(Array.from({ length: 4 }, async () => {
    for (;;) {
      const tag = `child${i++}`
      const { first, count } = await writeRound(store, tag, 1, 1)
      process.stdout.write(`ack ${first} ${count} ${tag}\n`)
    }
  }))
}

interface Writer { child: ChildProcess, acks: Array<{ first: number, count: number, tag: string }>, stderr: string }

function startWriter (dataDir: string, start: number): Writer {
  const child = spawn(process.execPath, ['--import=tsx', fileURLToPath(import.meta.url), '--child', dataDir, String(start)], { stdio: ['ignore', 'pipe', 'pipe'] })
  const writer: Writer = { child, acks: [], stderr: '' }
  let partial = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n')
    partial = lines.pop() ?? ''
    for (const line of lines) {
      const [, first, count, tag = ''] = line.split(' ')
      writer.acks.push({ first: Number(first), count: Number(count), tag })
    }
  })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { writer.stderr += chunk })
  return writer
}

async function waitForAcks (writer: Writer, n: number): Promise<void> {
  const deadline = Date.now() + 30_000
  while (writer.acks.length < n) {
    if (writer.child.exitCode !== null) throw new Error(`writer exited with ${writer.child.exitCode}: ${writer.stderr}`)
    if (Date.now() > deadline) throw new Error(`writer made ${writer.acks.length} of ${n} writes in 30 s: ${writer.stderr}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

async function kill (writer: Writer): Promise<void> {
  if (writer.child.exitCode !== null || writer.child.signalCode !== null) return
  const exited = new Promise((resolve) => writer.child.once('exit', resolve))
  writer.child.kill('SIGKILL')
  await exited
}

/** fsync and fdatasync, by architecture (Linux syscall tables). */
const FLUSH_SYSCALLS: Partial<Record<string, readonly string[]>> = { x64: ['74', '75'], arm64: ['82', '83'] }

/**
 * SIGKILLs the writer while one of its threads is inside fsync/fdatasync — inside LMDB's flush,
 * where the old build held the flush mutex — watching /proc/<pid>/task/<tid>/syscall. A flush
 * takes well under a millisecond on a fast disk, so a kill at a random time almost never landed
 * there (the original failure needed a loaded machine). Returns whether it did land there.
 */
async function killDuringFlush (writer: Writer, flushSyscalls: readonly string[]): Promise<boolean> {
  const pid = writer.child.pid!
  const deadline = Date.now() + 3000
  let landed = false
  while (!landed && Date.now() < deadline && writer.child.exitCode === null) {
    let tasks: string[] = []
    try {
      tasks = readdirSync(`/proc/${pid}/task`)
    } catch {
      break
    }
    for (const tid of tasks) {
      let syscall = ''
      try {
        syscall = readFileSync(`/proc/${pid}/task/${tid}/syscall`, 'latin1')
      } catch {
        continue
      }
      if (flushSyscalls.includes(syscall.slice(0, syscall.indexOf(' ')))) {
        writer.child.kill('SIGKILL')
        landed = true
        break
      }
    }
    // Let the event loop breathe now and then (stdout of the writer, timers).
    if (!landed && (Date.now() & 15) === 0) await new Promise((resolve) => setImmediate(resolve))
  }
  await kill(writer)
  return landed
}

async function runTest (): Promise<void> {
  const { default: t } = await import('tap')
  const flushSyscalls = FLUSH_SYSCALLS[process.arch]
  if (process.platform !== 'linux' || flushSyscalls === undefined) {
    t.plan(0, 'needs /proc/<pid>/task/<tid>/syscall (Linux on x64 or arm64)')
    return
  }
  t.test('a writer SIGKILLed while this process holds the environment open leaves it usable for both', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'threatfeed-meta-panic-'))
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown): void => { unhandled.push(reason) }
    process.on('unhandledRejection', onUnhandled)
    t.teardown(() => { process.off('unhandledRejection', onUnhandled) })

    const store = await openStore({ kind: 'embedded', dataDir: dir })
    t.teardown(() => store.close())
    let landed = 0
    const acked: Array<{ first: number, count: number, tag: string }> = []
    let start = 0
    let writer = startWriter(dir, start)
    for (let k = 0; k < KILLS; k++) {
      await waitForAcks(writer, 5)
      if (await killDuringFlush(writer, flushSyscalls)) landed++
      acked.push(...writer.acks)
      t.notMatch(writer.stderr, /MDB_PANIC|commitError/, `writer ${k + 1}: no panic`)
      // The restarted writer commits first, as the restarted server did: a fresh process has
      // flushed nothing yet, so its first commit took the flush mutex with its transaction still
      // open — the case that panicked. Then this process writes too.
      start += 1000
      writer = startWriter(dir, start)
      await waitForAcks(writer, 1)
      const mine = await writeRound(store, `parent${k}`, 1000, 1000)
      acked.push({ ...mine, tag: `parent${k}` })
    }
    const last = writer
    t.teardown(() => kill(last))
    await waitForAcks(last, 1)
    for (let i = 0; i < 3; i++) acked.push({ ...await writeRound(store, `both${i}`, 1000, 1000), tag: `both${i}` })
    await waitForAcks(last, last.acks.length + 2)
    await kill(last)
    acked.push(...last.acks)
    t.notMatch(last.stderr, /MDB_PANIC|commitError/, 'the last writer saw no panic')
    // Without kills inside a flush this test would not test the case that failed.
    t.ok(landed >= KILLS / 2, `${landed} of ${KILLS} kills landed inside a flush`)

    // Everything acknowledged by either side is there, at its seqs.
    const missing: string[] = []
    for (const a of acked) {
      const records = await store.stream.read(a.first, a.count)
      if (records.length !== a.count || records.some((r, i) => r.seq !== a.first + i || !r.payload.startsWith(`{"tag":"${a.tag}"`))) missing.push(a.tag)
    }
    t.same(missing, [], `all ${acked.length} acknowledged appends are readable`)
    // Writes committed but killed before their line was printed may be there too.
    const refs = new Set((await store.rules.list(WORKSPACE, 'access_rule')).map((r) => r.ruleRef))
    const rulesMissing = acked.filter((a) => !refs.has(`${a.tag}-0`) || (a.tag.startsWith('child') ? false : !refs.has(`${a.tag}-999`)))
    t.same(rulesMissing.map((a) => a.tag), [], 'and every acknowledged rule batch')
    t.same(unhandled, [], 'no unhandled rejection in this process')
  })
}

if (process.argv[2] === '--child') await runChild(process.argv[3]!, Number(process.argv[4]))
else await runTest()
