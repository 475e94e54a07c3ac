/**
 * Feed build workers run niced (workers/feed-worker.ts): while builds fill the cores, the thread
 * answering polls is scheduled first. Linux only (the nice value of each thread is in
 * /proc/self/task/<tid>/stat); the main thread keeps the default.
 */
import { readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import { createPool } from '../../src/pool/pool.js'

/** The nice value of each thread of this process (field 19 of /proc/<pid>/task/<tid>/stat). */
function niceByThread (): Map<number, number> {
  const out = new Map<number, number>()
  for (const tid of readdirSync('/proc/self/task')) {
    const fields = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ')
    out.set(Number(tid), Number(fields[16]))
  }
  return out
}

t.test('build workers run niced; the main thread does not', { skip: process.platform !== 'linux' && 'per-thread nice values are read from Linux /proc' }, async (t) => {
  const before = niceByThread()
  const pool = createPool({ workers: 1, taskTimeoutMs: 30_000 })
  t.teardown(() => pool.destroy())
  const empty = { confidence: 'high', severity: 'high', ips: '192.0.2.1/32\n', asns: [], countries: [] }
  await pool.compute({ block: [empty], allow: [], carve: { ...empty, ips: '' }, meta: '' })
  const after = niceByThread()
  const added = [...after].filter(([tid]) => !before.has(tid)).map(([, nice]) => nice)
  t.ok(added.includes(10), `a new thread runs at nice 10 (new threads: ${added.join(', ')})`)
  t.equal(after.get(process.pid), before.get(process.pid), 'the main thread keeps its nice value')
})
