/**
 * `threatfeed serve` with front-end threads runs its background threads niced
 * (THREATFEED_BACKGROUND_NICE, src/pool/thread-priority.ts): the main thread, the build workers and
 * the stream consumer, read per thread from /proc/<pid>/task. Linux only.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { NICE_MAX, currentNice } from '../src/pool/thread-priority.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from './helpers/server.js'

/** Each thread's nice value (field 19 of its stat line, counted after the command name). */
function niceByThread (pid: number): Map<number, number> {
  const out = new Map<number, number>()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
    out.set(Number(tid), Number(stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[16]))
  }
  return out
}

t.test('serve with two front-end threads: main thread, build worker and consumer niced', { skip: process.platform !== 'linux' && 'per-thread nice values are read from Linux /proc' }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-serve-nice-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const base = currentNice()
  const expected = Math.min(NICE_MAX, base + 4)
  const child = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], {
    env: {
      ...process.env, HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: join(dir, 'data'), THREATFEED_HTTP_THREADS: '2', THREATFEED_WORKERS: '1',
      THREATFEED_BACKGROUND_NICE: '4', THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB, THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  t.teardown(() => { child.kill('SIGKILL') })
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no "listening" log line within 60 s')), 60_000)
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const rec = JSON.parse(line) as Record<string, unknown>
      if (rec.msg === 'listening') { clearTimeout(timer); resolve(rec.port as number) }
    })
  })
  // Ready: started, so the main thread has niced itself (runServer, after the threads exist).
  let ready = 0
  for (let i = 0; i < 600 && ready !== 200; i++) {
    ready = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status, () => 0)
    if (ready !== 200) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.equal(ready, 200, '/readyz 200')
  // A feed poll: it builds on the worker, so the worker has started for sure.
  await fetch(`http://127.0.0.1:${port}/v1/threat/feeds`).catch(() => null)
  const nices = niceByThread(child.pid!)
  t.equal(nices.get(child.pid!), expected, `the main thread runs at ${expected}`)
  const niced = [...nices.values()].filter((n) => n === expected).length
  t.ok(niced >= 3, `main, build worker and consumer: ${niced} threads at ${expected} (all: ${[...nices.values()].join(', ')})`)
  child.kill('SIGTERM')
  t.equal(await exited, 0, 'a clean stop')
})
