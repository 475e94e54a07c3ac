/**
 * A front-end thread that is stuck or dies (README "Front-end threads"): a /metrics scrape waits
 * for it a bounded time and says it is missing; a thread that dies closes its sockets (so every
 * new connection goes to a live thread) and the server reports it lost, which `serve` turns into
 * a clean stop with exit code 1 for the supervisor to restart. The threads are reached through
 * the inspector: a real pause, a real uncaught error inside the thread.
 */
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { spawn } from 'node:child_process'
import { get } from 'node:http'
import { createInterface } from 'node:readline'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startRealServer, type RealServer } from '../helpers/real-server.js'
import { inspectThread } from '../helpers/thread-inspector.js'

const FRONT_THREAD = /front-thread-entry/
/** How long a scrape waits for a thread (README "Front-end threads"). */
const ASK_MS = 1000

async function twoThreads (t: Test): Promise<RealServer> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-thread-lost-'))
  const s = await startRealServer(dir, { THREATFEED_HTTP_THREADS: '2' })
  t.teardown(async () => {
    await s.server.stop()
    rmSync(dir, { recursive: true, force: true })
  })
  return s
}

/** One GET on a new connection; null when no answer came within `ms`. */
function getOnce (url: string, ms: number): Promise<{ status: number, body: string, ms: number } | null> {
  const started = performance.now()
  return new Promise((resolve) => {
    const req = get(url, { agent: false, timeout: ms }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { body += c })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body, ms: performance.now() - started }) })
    })
    req.on('timeout', () => { req.destroy(); resolve(null) })
    req.on('error', () => { resolve(null) })
  })
}

/**
 * A scrape answered by the main thread: a connection the kernel gave the stuck thread gets no
 * answer, so new ones are tried (each lands on either socket).
 */
async function scrape (base: string): Promise<{ status: number, body: string, ms: number, tries: number }> {
  for (let tries = 1; tries <= 12; tries++) {
    const r = await getOnce(`${base}/metrics`, ASK_MS + 2000)
    if (r !== null) return { ...r, tries }
  }
  throw new Error('no scrape answered within its bound on 12 connections')
}

function metric (body: string, name: string): number {
  const line = body.split('\n').find((l) => l.startsWith(name + ' '))
  return line === undefined ? NaN : Number(line.slice(name.length + 1))
}

t.test('a stuck thread: the scrape answers within the bound, counts the thread missing, and counts it again once it answers', async (t) => {
  const s = await twoThreads(t)
  t.equal(metric((await scrape(s.base)).body, 'threatfeed_http_threads_missing'), 0, 'both threads answer')
  const thread = await inspectThread(FRONT_THREAD)
  t.teardown(() => { thread.close() })
  await thread.call('Debugger.enable')
  await thread.call('Debugger.pause')
  try {
    const r = await scrape(s.base)
    t.equal(r.status, 200)
    t.ok(r.ms < ASK_MS + 1500, `answered in ${r.ms.toFixed(0)} ms (bound ${ASK_MS} ms), on try ${r.tries}`)
    t.equal(metric(r.body, 'threatfeed_http_threads_missing'), 1, 'the stuck thread is missing')
    t.match(r.body, /threatfeed_http_requests_total\{route="metrics",status="200"\} \d+/, 'the main thread\'s own counts are in it')
  } finally {
    // Resumed whatever happened: a paused thread would hold the server's stop.
    await thread.call('Debugger.resume')
  }
  t.equal(metric((await scrape(s.base)).body, 'threatfeed_http_threads_missing'), 0, 'resumed, it answers again')
})

t.test('a thread that dies: the process lives on, every new connection is answered, the scrape counts it missing, and the server reports it lost', async (t) => {
  const s = await twoThreads(t)
  t.equal((await s.feed()).status, 200)
  const thread = await inspectThread(FRONT_THREAD)
  t.teardown(() => { thread.close() })
  // An uncaught error inside the thread, as a bug there would throw.
  await thread.call('Runtime.evaluate', { expression: 'setTimeout(() => { throw new Error(\'killed by the test\') })' })
  const lost = await Promise.race([s.server.threadLost, new Promise<null>((resolve) => setTimeout(() => { resolve(null) }, 10_000))])
  t.ok(lost !== null, 'the server reports the lost thread')
  t.match(lost?.message, /^front-end thread \d exited \(1\): killed by the test$/)
  const answers: Array<number | null> = []
  for (let i = 0; i < 40; i++) answers.push((await getOnce(`${s.base}/healthz`, 3000))?.status ?? null)
  t.same(answers, Array(40).fill(200), '40 new connections, each answered (none left on a dead socket)')
  const feed = await s.feed()
  t.equal(feed.status, 200, 'feeds are answered')
  const r = await scrape(s.base)
  t.equal(r.tries, 1, 'the scrape is answered on its first connection')
  t.ok(r.ms < ASK_MS + 1500, `in ${r.ms.toFixed(0)} ms`)
  t.equal(metric(r.body, 'threatfeed_http_threads_missing'), 1, 'the dead thread is missing')
})

t.test('threatfeed serve with a thread that dies: a clean stop (logged, in-flight work finished) and exit code 1, for the supervisor to restart it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-thread-lost-serve-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const child = spawn(process.execPath, ['--import=tsx', '--import=./test/fixtures/kill-front-thread.ts', 'src/cli/run.ts', 'serve'], {
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: join(dir, 'data'), THREATFEED_HTTP_THREADS: '2' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => { resolve(code) }))
  const logs: Array<Record<string, unknown>> = []
  const lines = createInterface({ input: child.stdout })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => { reject(new Error('no "front-end threads listening" line within 120 s')) }, 120_000)
    lines.on('line', (line) => {
      const rec = JSON.parse(line) as Record<string, unknown>
      logs.push(rec)
      if (rec.msg === 'front-end threads listening') { clearTimeout(timer); resolve() }
    })
  })
  const killedAt = Date.now()
  child.kill('SIGUSR2')
  const code = await Promise.race([exited, new Promise<'running'>((resolve) => setTimeout(() => { resolve('running') }, 30_000))])
  t.equal(code, 1, 'exit code 1')
  t.ok(Date.now() - killedAt < 15_000, `stopped ${Date.now() - killedAt} ms after the thread was killed`)
  t.ok(logs.some((l) => l.level === 60 && typeof l.thread === 'number' && typeof l.msg === 'string' && l.msg.startsWith(`front-end thread ${l.thread} exited (1)`)), 'a fatal line names the thread')
  t.ok(logs.some((l) => l.msg === 'stopped'), 'the stop ran to its end (store flushed)')
})
