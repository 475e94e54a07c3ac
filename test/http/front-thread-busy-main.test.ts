/**
 * Front-end threads never wait on a busy main thread (feed/snapshot-port.ts): with a workspace of
 * millions of rules the main thread's rebuild slices and collections hold it for tens to hundreds
 * of milliseconds, and a thread that blocked on it for a body held every poll it had
 * (bench/bigws). Here the main thread is held for real — a busy loop right after a swap — while a
 * client in a thread of its own polls: polls of bodies asked for before the swap come with the new
 * snapshot and answer at once; a body never asked for waits for the main thread, and only the
 * polls that need it do.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { startFeedServer, StaticFeedSource, bearer, swapSnapshots } from '../helpers/feed-server.js'

process.env.THREATFEED_HTTP_THREADS = '2'

/** How long the main thread is held, and the most a poll of a held body may take meanwhile: half
 *  the hold, since a poll that waited for the main thread waits for the rest of the hold (a
 *  tighter bound fails on a starved machine for a poll merely preempted). */
const HOLD_MS = 5000
const MAX_MS = HOLD_MS / 2
/** What the client writes once every connection has had an answer. */
const POLLING = 'polling\n'

/**
 * The client, in a process of its own (the test's thread is the one held): `conns` keep-alive connections
 * poll `held` back to back; once one of them sees `newTag`, four more connections ask for `fresh`
 * (a variant nobody asked for before). Posts every answer with its latency.
 */
const CLIENT = `
const { base, headers, held, fresh, newTag, conns, runMs } = JSON.parse(process.argv[1])
const get = async (path, init) => {
  const sent = performance.now()
  try {
    const res = await fetch(base + path, { headers, ...init })
    const body = await res.text()
    return { path, status: res.status, etag: res.headers.get('etag') ?? '', body, sent, ms: performance.now() - sent }
  } catch (e) {
    return { path, status: 0, etag: '', body: String(e), sent, ms: performance.now() - sent }
  }
}
const seen = []
const fresher = []
let asked = false
const stopAt = performance.now() + runMs
let started = 0
const poll = async () => {
  await get(held) // connecting and the first answers: not counted
  if (++started === conns) process.stdout.write('polling\\n')
  while (performance.now() < stopAt) {
    const r = await get(held)
    seen.push(r)
    if (r.etag === newTag && !asked) {
      asked = true
      for (let i = 0; i < 4; i++) fresher.push(get(fresh, { headers: { ...headers, connection: 'close' } }))
    }
  }
}
Promise.all(Array.from({ length: conns }, poll)).then(async () => {
  process.stdout.write(JSON.stringify({ seen, fresher: await Promise.all(fresher) }))
})
`

t.test('polls of bodies asked for before a swap wait for nothing while the main thread is held; a new body waits alone', async (t) => {
  const source = new StaticFeedSource()
  const server = await startFeedServer(() => source)
  t.teardown(() => server.stop())
  const { v1, v2 } = swapSnapshots(server.workspace.id)
  source.set(v1)
  const newTag = v2.variants.get('plain|v4|block|')!.identity.etag
  const freshBody = Buffer.from(v2.variants.get('dialect_b|v4|block|')!.identity.body).toString('utf8')

  const args = { base: server.base, headers: { ...bearer(server.key), 'accept-encoding': 'identity' }, held: '/v1/threat/feeds?format=plain&family=v4', fresh: '/v1/threat/feeds?format=dialect_b&family=v4', newTag, conns: 16, runMs: 4000 + HOLD_MS + 3000 }
  const client = spawn(process.execPath, ['-e', CLIENT, JSON.stringify(args)], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => { client.kill() })
  let out = ''
  let polling: () => void = () => {}
  const pollingNow = new Promise<void>((resolve) => { polling = resolve })
  client.stdout.setEncoding('utf8').on('data', (c: string) => {
    out += c
    if (out.startsWith(POLLING)) polling()
  })
  const done = new Promise<{ seen: Array<{ status: number, etag: string, body: string, sent: number, ms: number }>, fresher: Array<{ status: number, etag: string, body: string, ms: number }> }>((resolve, reject) => {
    client.once('exit', () => { try { resolve(JSON.parse(out.slice(POLLING.length))) } catch (e) { reject(e) } })
  })
  // v1's body is asked for by both threads (16 connections spread over them), then the swap, and
  // the main thread is held at once: nothing it would answer is answered until the hold ends.
  await pollingNow
  await new Promise((resolve) => setTimeout(resolve, 300))
  source.set(v2)
  const heldFrom = performance.now()
  while (performance.now() - heldFrom < HOLD_MS) { /* the main thread is busy, as in a rebuild slice or a full collection */ }
  const { seen, fresher } = await done

  const after = seen.filter((s) => s.etag === newTag)
  t.ok(after.length > 50, `polls of the new snapshot answered while the main thread was held (${after.length})`)
  t.ok(seen.every((s) => s.status === 200), `every poll answered 200 (${[...new Set(seen.map((s) => `${s.status} ${s.body.slice(0, 100)}`))].join(', ')})`)
  const slowest = Math.max(...seen.map((s) => s.ms))
  t.ok(slowest < MAX_MS, `no poll waited for the held main thread: slowest ${slowest.toFixed(0)} ms of ${seen.length} (held ${HOLD_MS} ms)`)
  t.equal(fresher.length, 4, 'the never-asked variant was asked for on four connections')
  t.ok(fresher.every((f) => f.status === 200 && f.body === freshBody), 'its answers carry the new snapshot\'s bytes, once the main thread handed them over')
})
