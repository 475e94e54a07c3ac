/**
 * THREATFEED_HTTP_THREADS=2 (README "Architecture"): two front-end threads answer on one port
 * (the main thread on none); a snapshot swap is seen by both at once; a per-key rate limit, /metrics and consumer tracking cover the
 * process, whichever thread took the connection.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, request } from 'node:http'
import { buildTestSnapshot, startFeedServer, StaticFeedSource, bearer, swapSnapshots, type FeedServer } from '../helpers/feed-server.js'
import { startRealServer } from '../helpers/real-server.js'
import { WORKSPACE_FEED } from '../../src/feed/snapshot-types.js'

process.env.THREATFEED_HTTP_THREADS = '2'

/** Feed answers (200 and 304) each front-end thread counted. */
async function answeredByThread (server: FeedServer): Promise<number[]> {
  const threads = await server.http.threadMetrics()
  return threads.map((m) => m.requests.filter(([route]) => route === 'feeds').reduce((n, [, , count]) => n + count, 0))
}

function get (agent: Agent, base: string, path: string, headers: Record<string, string>): Promise<{ status: number, etag: string, body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(base + path, { headers, agent }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { body += c })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, etag: String(res.headers.etag ?? ''), body }) })
    })
    req.on('error', reject)
    req.end()
  })
}

t.test('a swap is seen by every thread at once: no old ETag 10 ms after the first new one, under polling', async (t) => {
  const source = new StaticFeedSource()
  const server = await startFeedServer(() => source)
  t.teardown(() => server.stop())
  const { v1, v2 } = swapSnapshots(server.workspace.id)
  source.set(v1)
  const oldTag = v1.variants.get('plain|v4|block|')!.identity.etag
  const newTag = v2.variants.get('plain|v4|block|')!.identity.etag
  t.not(oldTag, newTag)

  // 16 keep-alive connections: the kernel spreads them over both listening sockets.
  const agent = new Agent({ keepAlive: true, maxSockets: 16 })
  t.teardown(() => { agent.destroy() })
  const before = await answeredByThread(server)
  const seen: Array<{ sent: number, received: number, etag: string, body: string }> = []
  let stop = false
  const swapAt = performance.now() + 400
  const poller = async (): Promise<void> => {
    while (!stop) {
      const sent = performance.now()
      const r = await get(agent, server.base, '/v1/threat/feeds?format=plain&family=v4', bearer(server.key))
      seen.push({ sent, received: performance.now(), etag: r.etag, body: r.body })
    }
  }
  const pollers = Array.from({ length: 16 }, poller)
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, swapAt - performance.now())))
  source.set(v2)
  await new Promise((resolve) => setTimeout(resolve, 600))
  stop = true
  await Promise.all(pollers)

  const byThread = (await answeredByThread(server)).map((n, i) => n - (before[i] ?? 0))
  t.equal(byThread.length, 2, 'two front-end threads')
  t.ok(byThread.every((n) => n > 0), `both threads answered: ${byThread.join(' and ')} of ${seen.length}`)
  // The main thread holds the public ports of no listener (tls-listeners.ts leavePublicPortsToThreads).
  t.equal(byThread.reduce((a, b) => a + b, 0), seen.length, 'every answer came from a front-end thread, none from the main thread')
  const firstNew = Math.min(...seen.filter((s) => s.etag === newTag).map((s) => s.received))
  t.ok(Number.isFinite(firstNew), 'the new snapshot was served')
  const late = seen.filter((s) => s.etag === oldTag && s.sent > firstNew + 10)
  t.same(late, [], `no request sent more than 10 ms after the first new answer got the old ETag (${seen.length} answers)`)
  t.ok(seen.every((s) => s.etag === oldTag || s.etag === newTag), 'only the two tags')
  t.ok(seen.filter((s) => s.etag === newTag).every((s) => s.body === '192.0.2.1/32\n198.51.100.0/24\n'), 'the new tag comes with the new body, on every thread')
})

t.test('a body is fetched from the main thread once and shared: gzip and identity, 200 and 304', async (t) => {
  const source = new StaticFeedSource()
  const server = await startFeedServer(() => source)
  t.teardown(() => server.stop())
  const snapshot = buildTestSnapshot({ workspaceId: server.workspace.id, feedId: WORKSPACE_FEED, networks: ['192.0.2.1/32', '2001:db8::/32'], lastModified: Date.UTC(2026, 0, 1) })
  source.set(snapshot)
  const variant = snapshot.variants.get('plain|both|block|')!
  const cases: Array<{ name: string, headers: Record<string, string>, etag: string, body: Buffer }> = [
    { name: 'identity', headers: {}, etag: variant.identity.etag, body: Buffer.from(variant.identity.body) },
    { name: 'gzip', headers: { 'accept-encoding': 'gzip' }, etag: variant.gzip.etag, body: Buffer.from(variant.gzip.body) },
  ]
  const before = await answeredByThread(server)
  for (const c of cases) {
    for (let i = 0; i < 12; i++) {
      // A new connection each time: both threads answer some.
      const r = await new Promise<{ status: number, etag: string, body: Buffer }>((resolve, reject) => {
        request(`${server.base}/v1/threat/feeds?format=plain`, { headers: { ...bearer(server.key), ...c.headers }, agent: false }, (res) => {
          const chunks: Buffer[] = []
          res.on('data', (b: Buffer) => chunks.push(b))
          res.on('end', () => { resolve({ status: res.statusCode ?? 0, etag: String(res.headers.etag), body: Buffer.concat(chunks) }) })
        }).on('error', reject).end()
      })
      t.equal(r.status, 200)
      t.equal(r.etag, c.etag, `${c.name}: tag`)
      t.ok(r.body.equals(c.body), `${c.name}: the same bytes`)
      const again = await get(new Agent(), server.base, '/v1/threat/feeds?format=plain', { ...bearer(server.key), ...c.headers, 'if-none-match': c.etag })
      t.equal(again.status, 304, `${c.name}: 304`)
    }
  }
  const byThread = (await answeredByThread(server)).map((n, i) => n - (before[i] ?? 0))
  t.ok(byThread.every((n) => n > 0), `both threads answered some (${byThread.join(' and ')})`)
})

t.test('one rate limit per key, one /metrics and one consumer count for the process', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-threads-'))
  const s = await startRealServer(dir, { THREATFEED_HTTP_THREADS: '2', THREATFEED_RATE_LIMIT_RPS: '1', THREATFEED_RATE_LIMIT_BURST: '10', THREATFEED_FEED_REBUILD_MS: '0' })
  t.teardown(async () => { await s.server.stop(); rmSync(dir, { recursive: true, force: true }) })
  // 20 signals, each on a new connection: a limiter per thread would let about 10 through on
  // each; the one limiter lets the burst of 10 through, plus one per second taken.
  const statuses: number[] = []
  const started = performance.now()
  for (let i = 0; i < 20; i++) {
    const r = await fetch(`${s.base}/v1/signal`, { method: 'POST', headers: { ...(await keyHeaders(s)), connection: 'close' }, body: JSON.stringify([{ type: 'access_rules', action: 'block', ip: `192.0.2.${i + 1}` }]) })
    await r.arrayBuffer()
    statuses.push(r.status)
  }
  const seconds = (performance.now() - started) / 1000
  const accepted = statuses.filter((x) => x === 200).length
  t.ok(seconds < 8, `fast enough to tell one limiter from two (${seconds.toFixed(1)} s)`)
  t.ok(accepted >= 10 && accepted <= 10 + Math.ceil(seconds), `one burst across threads: ${accepted} accepted in ${seconds.toFixed(1)} s (${statuses.join(' ')})`)
  t.equal(statuses.filter((x) => x !== 200 && x !== 429).length, 0, 'the rest are 429')

  const polls = 20
  for (let i = 0; i < polls; i++) {
    const r = await fetch(`${s.base}/v1/threat/feeds`, { headers: { ...(await keyHeaders(s)), connection: 'close' } })
    await r.arrayBuffer()
  }
  const scrape = await (await fetch(`${s.base}/metrics`)).text()
  const answered = [...scrape.matchAll(/^threatfeed_http_requests_total\{route="feeds",status="(\d+)"\} (\d+)$/gm)].reduce((n, m) => n + Number(m[2]), 0)
  t.equal(answered, polls, '/metrics counts the feed answers of both threads')
  t.match(scrape, /^threatfeed_process_resident_memory_bytes \d+/m, 'the process figures, once')
  t.equal([...scrape.matchAll(/^# TYPE threatfeed_process_resident_memory_bytes/gm)].length, 1)
})

/** The Authorization of startRealServer's key. */
async function keyHeaders (s: Awaited<ReturnType<typeof startRealServer>>): Promise<Record<string, string>> {
  return { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' }
}
