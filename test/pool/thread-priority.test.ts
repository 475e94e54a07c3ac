/**
 * Background threads run niced (src/pool/thread-priority.ts): a nice value set with
 * niceThisThread is the calling thread's alone (Linux: read back from inside the thread, in
 * /proc/thread-self/stat), a thread is never raised, and the pool's workers take the value they are
 * given. Linux only: per-thread nice values are read from /proc.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import t from 'tap'
import { createPool } from '../../src/pool/pool.js'
import { NICE_MAX, backgroundNice, currentNice } from '../../src/pool/thread-priority.js'

const linuxOnly = { skip: process.platform !== 'linux' && 'per-thread nice values are read from Linux /proc' }
const NICE_THREAD = fileURLToPath(new URL('../fixtures/pool/nice-thread.mjs', import.meta.url))

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
