/**
 * `threatfeed serve` as a process: answers /readyz, creates its data directory, and on SIGTERM
 * stops and exits 0 well within 10 s (DECISIONS §6); with front-end threads only they keep the
 * process's priority (src/pool/thread-priority.ts).
 */
import t, { type Test } from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { NICE_MAX, currentNice } from '../src/pool/thread-priority.js'

t.test('serve starts, answers, and stops on SIGTERM with exit 0', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-serve-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const dataDir = join(dir, 'data')
  const child = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], {
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const lines = createInterface({ input: child.stdout })
  const logs: Array<Record<string, unknown>> = []
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no "listening" log line within 60 s')), 60_000)
    lines.on('line', (line) => {
      const rec = JSON.parse(line) as Record<string, unknown>
      logs.push(rec)
      if (rec.msg === 'listening') { clearTimeout(timer); resolve(rec.port as number) }
    })
  })
  t.ok(existsSync(dataDir), 'data directory created')
  t.ok(logs.every((l) => typeof l.time === 'string' && typeof l.level === 'number'), 'JSON log lines')
  const h = await fetch(`http://127.0.0.1:${port}/healthz`)
  t.equal(h.status, 200)
  // With no geo configuration the embedded default is used (DB-IP Lite country, ASN built from the
  // registry CSV into the data directory), and the service becomes ready.
  let ready = 0
  for (const deadline = Date.now() + 120_000; ready !== 200 && Date.now() < deadline;) {
    ready = (await fetch(`http://127.0.0.1:${port}/readyz`)).status
    if (ready !== 200) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.equal(ready, 200, '/readyz 200')
  t.ok(existsSync(join(dataDir, 'geo', 'asn.mmdb')), 'default ASN database built in the data directory')

  const t0 = Date.now()
  child.kill('SIGTERM')
  const code = await exited
  t.equal(code, 0, 'exit code 0')
  t.ok(Date.now() - t0 < 10_000, `stopped in ${Date.now() - t0} ms`)
  t.ok(logs.some((l) => l.msg === 'stopped'), 'logged the stop')
})

/**
 * `threatfeed serve` with two front-end threads; `onLine` sees each log record as it comes (after
 * it is kept in `logs`). Resolves with the exit code and signal.
 */
function serveWithThreads (t: Test, onLine: (rec: Record<string, unknown>, logs: Array<Record<string, unknown>>, child: ChildProcess) => void, env: Record<string, string> = {}): { exited: Promise<[number | null, string | null]>, logs: Array<Record<string, unknown>> } {
  const dir = mkdtempSync(join(tmpdir(), 'tf-serve-threads-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const child = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], {
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: join(dir, 'data'), THREATFEED_HTTP_THREADS: '2', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<[number | null, string | null]>((resolve) => child.on('exit', (code, signal) => resolve([code, signal])))
  const logs: Array<Record<string, unknown>> = []
  createInterface({ input: child.stdout }).on('line', (line) => {
    const rec = JSON.parse(line) as Record<string, unknown>
    logs.push(rec)
    onLine(rec, logs, child)
  })
  return { exited, logs }
}

t.test('SIGTERM as soon as a listener is up, while the start goes on: still a clean stop with exit 0', async (t) => {
  const { exited, logs } = serveWithThreads(t, (rec, logs, child) => {
    // The first front-end thread's listener logs (a debug line) while the others and the main thread still start.
    if (rec.msg === 'thread listening' && logs.filter((l) => l.msg === 'thread listening').length === 1) child.kill('SIGTERM')
  }, { THREATFEED_LOG_LEVEL: 'debug' })
  t.same(await exited, [0, null], 'exit code 0')
  t.ok(logs.some((l) => l.msg === 'stopped'), 'logged the stop')
})

t.test('with front-end threads the port is announced once, when every thread listens', async (t) => {
  const { exited, logs } = serveWithThreads(t, (rec, _logs, child) => {
    if (rec.msg === 'listening') setTimeout(() => child.kill('SIGTERM'), 300)
  })
  t.same(await exited, [0, null], 'exit code 0')
  const msgs = logs.map((l) => l.msg)
  t.equal(msgs.filter((m) => m === 'listening').length, 1, 'one "listening" line for the one port')
  t.ok(msgs.indexOf('front-end threads listening') < msgs.indexOf('listening'), 'after the threads are bound')
  t.notOk(msgs.includes('thread listening'), "the threads' own lines are debug lines")
})

t.test('a second SIGTERM during the stop does not end the process half way: exit 0', async (t) => {
  const { exited, logs } = serveWithThreads(t, (rec, _logs, child) => {
    if (rec.msg === 'front-end threads listening' || rec.msg === 'shutting down') child.kill('SIGTERM')
  })
  t.same(await exited, [0, null], 'exit code 0, not ended by the second signal')
  t.equal(logs.filter((l) => l.msg === 'shutting down').length, 1, 'one stop')
  t.ok(logs.some((l) => l.msg === 'stopped'), 'logged the stop')
})

/** [tid, nice] of each thread of a process (field 19 of its stat line, counted after the command name). */
function threadNices (pid: number): Array<[number, number]> {
  return readdirSync(`/proc/${pid}/task`).flatMap((tid): Array<[number, number]> => {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
      return [[Number(tid), Number(stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[16])]]
    } catch {
      return [] // ended meanwhile
    }
  })
}

const base = currentNice()
t.test('with front-end threads, every other thread — the runtime\'s own too — runs at the background nice', {
  skip: process.platform !== 'linux' ? 'per-thread nice values are read from Linux /proc' : base >= NICE_MAX - 3 ? `at nice ${base} there is no lower priority to tell the threads apart` : false,
}, async (t) => {
  const background = Math.min(NICE_MAX, base + 3)
  let seen: { kept: number[], nices: Array<[number, number]> } | null = null
  const { exited, logs } = serveWithThreads(t, (rec, _logs, child) => {
    if (rec.msg !== 'background threads niced') return
    seen = { kept: rec.kept as number[], nices: threadNices(child.pid!) }
    child.kill('SIGTERM')
  }, { THREATFEED_BACKGROUND_NICE: '3' })
  t.same(await exited, [0, null], 'exit code 0')
  t.ok(seen !== null, `logged the sweep (${logs.map((l) => l.msg).join(', ')})`)
  const { kept, nices } = seen!
  t.equal(kept.length, 2, 'the two front-end threads kept')
  const byTid = new Map(nices)
  for (const tid of kept) t.equal(byTid.get(tid), base, `front-end thread ${tid} at the process's nice ${base}`)
  const others = nices.filter(([tid]) => !kept.includes(tid))
  // main, V8's four platform workers, its delayed-task thread, the inspector's signal thread,
  // libuv's pool, the consumer thread and the build workers: more than ten, whatever the versions.
  t.ok(others.length >= 8, `${others.length} other threads`)
  t.same(others.filter(([, n]) => n !== background), [], `every other thread at ${background}`)
})
