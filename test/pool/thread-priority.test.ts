/**
 * Background threads run niced (src/pool/thread-priority.ts): a nice value set with
 * niceThisThread is the calling thread's alone (Linux: read back from inside the thread, in
 * /proc/thread-self/stat), a thread is never raised, and the pool's workers take the value they are
 * given; niceAllThreadsBut reaches the threads no code of ours runs on (in a process of its own).
 * Linux only: per-thread nice values are read from /proc.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { execFileSync } from 'node:child_process'
import t from 'tap'
import { createPool } from '../../src/pool/pool.js'
import { NICE_MAX, backgroundNice, currentNice, niceAllThreadsBut, threadId } from '../../src/pool/thread-priority.js'
import { NO_COVERAGE } from '../helpers/cli.js'

const linuxOnly = { skip: process.platform !== 'linux' && 'per-thread nice values are read from Linux /proc' }
const NICE_THREAD = fileURLToPath(new URL('../fixtures/pool/nice-thread.mjs', import.meta.url))
const NICE_ALL_BUT = fileURLToPath(new URL('../fixtures/pool/nice-all-but.mjs', import.meta.url))

/** Field 19 (nice) of a /proc stat line; fields are counted after the command name. */
function niceOfStat (stat: string): number {
  return Number(stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[16])
}

/** The nice value of each thread of this process. */
function niceByThread (): Map<number, number> {
  const out = new Map<number, number>()
  for (const tid of readdirSync('/proc/self/task')) out.set(Number(tid), niceOfStat(readFileSync(`/proc/self/task/${tid}/stat`, 'utf8')))
  return out
}

/** Starts a thread that calls niceThisThread(nice) and answers what it reads of itself. */
async function niceInThread (nice: number | null): Promise<{ tid: number, returned: number, nice: number }> {
  const worker = new Worker(NICE_THREAD, { workerData: nice, execArgv: [] })
  try {
    return await new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
  } finally {
    await worker.terminate()
  }
}

t.test('a thread that nices itself reads the value in its own /proc entry; its creator keeps its own', linuxOnly, async (t) => {
  const base = currentNice()
  const target = Math.min(NICE_MAX, base + 3)
  const got = await niceInThread(target)
  t.not(got.tid, process.pid, 'another thread than the main one')
  t.equal(got.nice, target, `/proc/thread-self/stat says ${target}`)
  t.equal(got.returned, target, 'and niceThisThread says so')
  t.equal(niceByThread().get(process.pid), base, 'the main thread keeps its value')
})

t.test('a thread is never raised above its creator', linuxOnly, async (t) => {
  const base = currentNice()
  // Root may raise a thread (a lower nice value): niceThisThread must not, whoever runs it.
  const got = await niceInThread(base - 1)
  t.equal(got.nice, base, 'a value below the thread\'s own leaves it')
  t.equal((await niceInThread(null)).nice, base, 'null leaves it')
})

t.test('backgroundNice: steps below the calling thread, capped, 0 is off', async (t) => {
  const base = currentNice()
  t.equal(backgroundNice(0), null)
  t.equal(backgroundNice(4), Math.min(NICE_MAX, base + 4))
  t.equal(backgroundNice(19), NICE_MAX, 'never past the lowest priority')
})

t.test('the pool\'s workers run at the value they are given; without one, at their creator\'s', linuxOnly, async (t) => {
  const base = currentNice()
  const target = Math.min(NICE_MAX, base + 5)
  const empty = { confidence: 'high', severity: 'high', ips: '192.0.2.1/32\n', asns: [], countries: [] }
  const task = { block: [empty], allow: [], carve: { ...empty, ips: '' }, meta: '' }
  for (const [nice, expected] of [[target, target], [null, base]] as const) {
    const before = niceByThread()
    const pool = createPool({ workers: 1, taskTimeoutMs: 30_000, nice })
    await pool.compute(task)
    const added = [...niceByThread()].filter(([tid]) => !before.has(tid)).map(([, n]) => n)
    await pool.destroy()
    t.ok(added.includes(expected), `nice ${String(nice)}: a new thread runs at ${expected} (new threads: ${added.join(', ')})`)
    t.notOk(added.some((n) => n !== expected && n !== base), 'no thread at any other value')
    t.equal(niceByThread().get(process.pid), base, 'the main thread keeps its value')
  }
})

t.test('threadId is the id /proc/thread-self/stat gives the calling thread', linuxOnly, async (t) => {
  const stat = readFileSync('/proc/thread-self/stat', 'utf8')
  t.equal(threadId(), Number(stat.slice(0, stat.indexOf(' '))))
  t.equal(threadId(), process.pid, 'the main thread\'s id is the process\'s')
  t.equal(niceAllThreadsBut(null, new Set()), 0, 'null: nothing niced')
})

t.test('niceAllThreadsBut nices every thread but those kept — the runtime\'s own too — once, and later threads inherit it', {
  skip: linuxOnly.skip !== false ? linuxOnly.skip : currentNice() >= NICE_MAX ? `at nice ${currentNice()} there is no lower priority to tell the threads apart` : false,
}, async (t) => {
  const base = currentNice()
  const target = Math.min(NICE_MAX, base + 2)
  // In a process of its own: a thread is never raised again, and this one's threads must not be lowered.
  const out = execFileSync(process.execPath, [NICE_ALL_BUT, String(target)], { encoding: 'utf8', env: { ...process.env, ...NO_COVERAGE } })
  const r = JSON.parse(out) as { main: number, mainStat: number, kept: number, keptBefore: number, lowered: number, again: number, later: number, nices: Array<[number, number]> }
  t.equal(r.main, r.mainStat, 'threadId in a process of its own')
  t.equal(r.keptBefore, base, 'the kept thread started at the process\'s value')
  const byTid = new Map(r.nices)
  t.equal(byTid.get(r.kept), base, 'the kept thread keeps it')
  const others = r.nices.filter(([tid]) => tid !== r.kept && tid !== r.later)
  // The main thread, V8's platform workers, its delayed-task thread, the inspector's signal thread,
  // libuv's pool (tsx read files) and tsx's loader thread: none of them started by code of ours.
  t.ok(others.length >= 6, `${others.length} other threads`)
  t.same(others.filter(([, n]) => n !== target), [], `every other thread at ${target}`)
  t.ok(r.lowered >= 6, `${r.lowered} lowered by the first call`)
  t.equal(r.again, 0, 'a second call lowers none')
  t.equal(byTid.get(r.later), target, 'a thread started afterwards by a niced thread inherits the value')
})
