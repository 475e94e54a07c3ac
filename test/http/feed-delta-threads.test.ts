/**
 * Front-end threads and deltas (docs/deltas.md): a fleet between changes polls with `since` naming
 * the version it holds, and those 304s are answered on the front-end thread, like any other 304;
 * only a delta body goes to the main thread, which keeps the history. Shown by holding the main
 * thread for real (a busy loop, as a rebuild slice would) while a client in its own process polls:
 * polls of the current version answer at once, the delta waits for the main thread and is right.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startRealServer } from '../helpers/real-server.js'
import { rawRequest, type RawResponse } from '../helpers/feed-server.js'

const HOLD_MS = 4000
/** Half the hold: a poll that waited for the main thread waits for the rest of it. */
const MAX_MS = HOLD_MS / 2
const READY = 'ready\n'

/** Polls `current` on 8 keep-alive connections; asks for `behind` once, after `behindAfterMs`. */
const CLIENT = `
const { base, headers, current, behind, behindAfterMs, runMs } = JSON.parse(process.argv[1])
const get = async (path) => {
  const sent = performance.now()
  try {
    const res = await fetch(base + path, { headers })
    const body = await res.text()
    return { status: res.status, delta: res.headers.get('x-feed-delta'), body, sent, ms: performance.now() - sent }
  } catch (e) {
    return { status: 0, delta: null, body: String(e), sent, ms: performance.now() - sent }
  }
}
const seen = []
let started = 0
let startedAt = 0
let late = null
const poll = async () => {
  await get(current)
  if (++started === 8) { startedAt = performance.now(); process.stdout.write('ready\\n'); late = new Promise((r) => setTimeout(r, behindAfterMs)).then(() => get(behind)) }
  while (startedAt === 0 || performance.now() - startedAt < runMs) seen.push(await get(current))
}
Promise.all(Array.from({ length: 8 }, poll)).then(async () => {
  process.stdout.write(JSON.stringify({ seen, behind: await late }))
})
`

t.test('since naming the current version is a 304 from the front-end thread; an older one a delta from the main thread', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-delta-threads-'))
  const s = await startRealServer(dir, { THREATFEED_FEED_REBUILD_MS: '0', THREATFEED_HTTP_THREADS: '2' })
  t.teardown(async () => {
    await s.server.stop()
    rmSync(dir, { recursive: true, force: true })
  })
  const auth = { authorization: `Bearer ${s.key}` }
  const get = (query: string): Promise<RawResponse> => rawRequest(s.base, `/v1/threat/feeds?${query}`, { headers: auth })
  const until = async (check: (r: RawResponse) => boolean): Promise<RawResponse> => {
    for (let i = 0; i < 200; i++) {
      const r = await get('format=plain&family=v4')
      if (r.status === 200 && check(r)) return r
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    throw new Error('the feed never reached the expected content')
  }
  await s.postBlocks(['45.1.0.7', '45.1.1.7', '45.1.2.7'])
  const v0 = await until((r) => r.body.toString() === '45.1.0.7/32\n45.1.1.7/32\n45.1.2.7/32\n')
  await s.postBlocks(['45.2.0.1'])
  const v1 = await until((r) => r.body.toString().includes('45.2.0.1/32'))
  const q = (etag: string): string => `/v1/threat/feeds?format=plain&family=v4&since=${encodeURIComponent(etag)}`

  const args = { base: s.base, headers: { ...auth, 'accept-encoding': 'identity' }, current: q(v1.headers.etag!), behind: q(v0.headers.etag!), behindAfterMs: 300, runMs: HOLD_MS + 1500 }
  const client = spawn(process.execPath, ['-e', CLIENT, JSON.stringify(args)], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => { client.kill() })
  let out = ''
  let ready: () => void = () => {}
  const readyNow = new Promise<void>((resolve) => { ready = resolve })
  client.stdout.setEncoding('utf8').on('data', (c: string) => {
    out += c
    if (out.startsWith(READY)) ready()
  })
  const done = new Promise<{ seen: Array<{ status: number, ms: number }>, behind: { status: number, delta: string | null, body: string, sent: number, ms: number } }>((resolve, reject) => {
    client.once('exit', () => { try { resolve(JSON.parse(out.slice(READY.length))) } catch (e) { reject(e) } })
  })
  await readyNow
  const heldFrom = performance.now()
  while (performance.now() - heldFrom < HOLD_MS) { /* the main thread is busy */ }
  const { seen, behind } = await done

  t.ok(seen.length > 50, `polls of the current version answered (${seen.length})`)
  t.ok(seen.every((p) => p.status === 304), `every one a 304 (${[...new Set(seen.map((p) => p.status))].join(', ')})`)
  const slowest = Math.max(...seen.map((p) => p.ms))
  t.ok(slowest < MAX_MS, `none waited for the held main thread: slowest ${slowest.toFixed(0)} ms (held ${HOLD_MS} ms)`)
  t.equal(behind.status, 200)
  t.equal(behind.delta, 'delta', 'the poll one version behind got a delta')
  t.equal(behind.body, '+45.2.0.1/32\n', 'its body is the change')
  t.ok(behind.ms > MAX_MS, `it was answered by the main thread, once free (${behind.ms.toFixed(0)} ms)`)
})
