/**
 * One catalog for every front-end thread (feed/catalog.ts, catalog-port.ts): with
 * THREATFEED_HTTP_THREADS=2 and the default THREATFEED_POLL_MS, a key revoked from the CLI in
 * another process is refused by both threads within 1 s (DECISIONS §1), and no request after that
 * is answered 200 by either.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { bearer, rawRequest, startFeedServer, StaticFeedSource, swapSnapshots, type FeedServer } from '../helpers/feed-server.js'

process.env.THREATFEED_HTTP_THREADS = '2'
const exec = promisify(execFile)

/**
 * Feed answers of `status` each front-end thread counted. A thread that does not answer the
 * metrics question within its second is left out of threadMetrics (a busy machine): ask again
 * until both have answered, so that the counts stay each thread's own.
 */
async function byThread (server: FeedServer, status: number): Promise<number[]> {
  let threads = await server.http.threadMetrics()
  for (const deadline = Date.now() + 30_000; threads.length < 2 && Date.now() < deadline;) threads = await server.http.threadMetrics()
  if (threads.length < 2) throw new Error(`only ${threads.length} front-end thread answered the metrics question in 30 s`)
  return threads.map((m) => m.requests.filter(([route, s]) => route === 'feeds' && s === status).reduce((n, [, , count]) => n + count, 0))
}

t.test('a key revoked from the CLI is refused on every front-end thread within 1 s', async (t) => {
  const source = new StaticFeedSource()
  const server = await startFeedServer(() => source, { env: { THREATFEED_POLL_MS: '250' } })
  t.teardown(() => server.stop())
  source.set(swapSnapshots(server.workspace.id).v1)
  const key = generateApiKey()
  const stored = await server.store.keys.create({ workspaceId: server.workspace.id, hash: hashApiKey(key), scopes: ['feeds:read'] })
  // A new connection per request: the kernel spreads them over both threads' listening sockets.
  // `at` is when the request was sent: a request sent more than 1 s after the revoke must be
  // refused, whenever its answer arrives (on a loaded machine an answer decided in time can
  // arrive late).
  const poll = async (): Promise<{ status: number, at: number }> => {
    const at = performance.now()
    const r = await rawRequest(server.base, '/v1/threat/feeds?format=plain&family=v4', { headers: { ...bearer(key), connection: 'close' } })
    return { status: r.status, at }
  }

  // Accepted on both threads before the revoke.
  for (let i = 0; i < 400 && (await byThread(server, 200)).some((n) => n === 0); i++) t.equal((await poll()).status, 200)
  const accepted = await byThread(server, 200)
  t.equal(accepted.length, 2, 'two front-end threads')
  t.ok(accepted.every((n) => n > 0), `both threads accepted the key (${accepted.join(' and ')})`)

  // Four clients poll, each every 25 ms (flat out, they slowed the CLI's start to 35 s). The last
  // 200 any of them gets after the revoke is committed (seen by a read of the store's admin
  // revision every 5 ms) is the revoke's lag.
  const { admin } = await server.store.revisions()
  const started = performance.now()
  const revoking = exec(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'key', 'revoke', '--id', stored.id], { env: { ...process.env, THREATFEED_DATA_DIR: server.dir } })
  const seen: Array<{ status: number, at: number }> = []
  let stop = false
  const clients = Array.from({ length: 4 }, async () => {
    while (!stop) {
      seen.push(await poll())
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
  })
  let failed: unknown = null
  revoking.catch((e: unknown) => { failed = e })
  let revokedAt = -1
  while (revokedAt < 0) {
    if (failed !== null) throw failed
    if ((await server.store.revisions()).admin !== admin) revokedAt = performance.now()
    else await new Promise((resolve) => setTimeout(resolve, 5))
  }
  await revoking
  t.comment(`the CLI committed ${(revokedAt - started).toFixed(0)} ms after it was started and exited ${(performance.now() - revokedAt).toFixed(0)} ms after`)
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, revokedAt + 1500 - performance.now())))
  const refusedBefore = await byThread(server, 401)
  // Past 1 s, until each thread has refused the key again: none answers 200.
  for (let i = 0; i < 400; i++) {
    const refused = await byThread(server, 401)
    if (refused.every((n, j) => n > refusedBefore[j]!)) break
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  stop = true
  await Promise.all(clients)
  const refused = await byThread(server, 401)
  t.ok(refused.every((n, j) => n > refusedBefore[j]!), `both threads refused the key after 1 s (401s: ${refusedBefore.join(', ')} → ${refused.join(', ')})`)
  t.same(seen.filter((r) => r.status !== 200 && r.status !== 401), [], 'only 200 and 401')
  const lastAccepted = Math.max(revokedAt, ...seen.filter((r) => r.status === 200).map((r) => r.at))
  const lag = lastAccepted - revokedAt
  t.ok(lag < 1000, `no 200 later than 1 s after the revoke was committed (last ${lag.toFixed(0)} ms after)`)
  t.equal(seen.filter((r) => r.status === 200 && r.at > revokedAt + 1000).length, 0)
})
