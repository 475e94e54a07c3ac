/**
 * Consumer-tracking floods (issue 35 item 2): what one feed key can make a server hold. Starts a
 * built server (`dist/` of BENCH_FLOOD_ROOT, default this checkout) on a fresh data directory,
 * then sends one flood per run and reports the server's RSS, the data directory's size and the
 * `/v1/admin/consumers` answer before and after:
 *
 *   lists  polls naming distinct non-existent 2 KB list names   (BENCH_FLOOD_LISTS, 20000)
 *   ua     polls with distinct 4 KB User-Agents                 (BENCH_FLOOD_UAS, 30000)
 *   xff    polls through a trusted proxy naming distinct clients (BENCH_FLOOD_XFF, 30000)
 *
 * Usage: node --import=tsx bench/consumer-flood.ts [lists|ua|xff ...]
 *        BENCH_FLOOD_ROOT=/path/to/other/checkout node --import=tsx bench/consumer-flood.ts
 *        BENCH_FLOOD_ENV='THREATFEED_CONSUMER_TRACKING=off' …   (more server settings, blank-separated)
 *
 * RSS includes what the traffic itself costs (the young generation: 2 × 64 MB semi-spaces under
 * `--max-semi-space-size=64` once touched); a run with tracking off gives that floor. The V8 heap
 * in use is read from /metrics (threatfeed_nodejs_heap_size_used_bytes) after the flushes.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { Agent, createServer, request } from 'node:http'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { generateApiKey, hashApiKey } from '../src/store/api-key.js'
import { openStore } from '../src/store/open.js'

const ROOT = resolve(process.env.BENCH_FLOOD_ROOT ?? '.')
const GEO = resolve('test/fixtures/geo/maxmind')
const COUNTS = {
  lists: Number(process.env.BENCH_FLOOD_LISTS ?? 20_000),
  ua: Number(process.env.BENCH_FLOOD_UAS ?? 30_000),
  xff: Number(process.env.BENCH_FLOOD_XFF ?? 30_000),
} as const
type Flood = keyof typeof COUNTS
const IN_FLIGHT = 32

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

function rssMiB (pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(m?.[1] ?? NaN) / 1024
}

/** Bytes the data directory's files take on disk (allocated blocks, as du counts). */
function diskMiB (dir: string): number {
  let bytes = 0
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) bytes += statSync(join(e.parentPath, e.name)).blocks * 512
  }
  return bytes / 1024 / 1024
}

function get (port: number, agent: Agent, path: string, headers: Record<string, string>): Promise<{ status: number, bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers, agent }, (res) => {
      let bytes = 0
      res.on('data', (c: Buffer) => { bytes += c.length }).on('end', () => { resolve({ status: res.statusCode ?? 0, bytes }) })
    })
    req.on('error', reject)
    req.end()
  })
}

function metricsOf (port: number, agent: Agent): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: '/metrics', agent }, (res) => {
      let text = ''
      res.setEncoding('utf8').on('data', (c: string) => { text += c }).on('end', () => { resolve(text) })
    }).on('error', reject).end()
  })
}

function heapMiB (metrics: string): number {
  const line = metrics.split('\n').find((l) => l.startsWith('threatfeed_nodejs_heap_size_used_bytes '))
  return Number(line?.split(' ')[1] ?? NaN) / 1024 / 1024
}

async function freePort (): Promise<number> {
  const srv = createServer()
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve))
  const port = (srv.address() as { port: number }).port
  await new Promise((resolve) => srv.close(resolve))
  return port
}

async function startServer (dir: string): Promise<{ child: ChildProcess, port: number }> {
  const port = await freePort()
  const child = spawn(process.execPath, ['--max-semi-space-size=64', join(ROOT, 'dist/src/cli/run.js'), 'serve'], {
    env: {
      PATH: process.env.PATH,
      HOST: '127.0.0.1',
      PORT: String(port),
      THREATFEED_DATA_DIR: dir,
      THREATFEED_HTTP_THREADS: '1',
      THREATFEED_TRUSTED_PROXIES: '127.0.0.1',
      THREATFEED_FEED_REBUILD_MS: '0',
      THREATFEED_GEO_COUNTRY_DB: join(GEO, 'GeoLite2-Country-Test.mmdb'),
      THREATFEED_GEO_ASN_DB: join(GEO, 'GeoLite2-ASN-Test.mmdb'),
      THREATFEED_LOG_LEVEL: 'warn',
      ...Object.fromEntries((process.env.BENCH_FLOOD_ENV ?? '').split(/\s+/).filter((kv) => kv !== '').map((kv) => kv.split('=', 2))),
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`server exited ${child.exitCode}`)
    const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false)
    if (ok) return { child, port }
    if (i > 600) throw new Error('server did not start')
    await sleep(100)
  }
}

async function run (flood: Flood): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-flood-'))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = await store.workspaces.create({ name: 'flood', subscription: 'active' })
  const key = generateApiKey()
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['feeds:read', 'admin'] })
  await store.lists.create({ workspaceId: ws.id, name: 'edl', description: '', defaults: {}, selector: {} })
  await store.close()
  const { child, port } = await startServer(dir)
  const agent = new Agent({ keepAlive: true, maxSockets: IN_FLIGHT })
  const auth = { authorization: `Bearer ${key}` }
  try {
    for (let i = 0; i < 20; i++) await get(port, agent, '/v1/threat/feeds/edl', { ...auth, 'user-agent': 'warm-up' })
    await sleep(6000)
    const before = { rss: rssMiB(child.pid!), disk: diskMiB(dir), heap: heapMiB(await metricsOf(port, agent)) }
    const n = COUNTS[flood]
    const pad = (i: number, len: number): string => String(i).padStart(8, '0') + 'x'.repeat(len - 8)
    const statuses = new Map<number, number>()
    let next = 0
    const t0 = Date.now()
    await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
      while (next < n) {
        const i = next++
        const r = flood === 'lists'
          ? await get(port, agent, `/v1/threat/feeds/${pad(i, 2048)}`, { ...auth, 'user-agent': 'flood' })
          : flood === 'ua'
            ? await get(port, agent, '/v1/threat/feeds/edl', { ...auth, 'user-agent': pad(i, 4096) })
            : await get(port, agent, '/v1/threat/feeds/edl', { ...auth, 'user-agent': 'flood', 'x-forwarded-for': `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}` })
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
      }
    }))
    const seconds = (Date.now() - t0) / 1000
    // Two flushes and an evaluation.
    await sleep(12_000)
    const admin = await get(port, agent, '/v1/admin/consumers', auth)
    const metrics = await metricsOf(port, agent)
    const after = { rss: rssMiB(child.pid!), disk: diskMiB(dir), heap: heapMiB(metrics) }
    const dropped = metrics.split('\n').filter((l) => l.startsWith('threatfeed_feed_consumers_dropped_total')).join('; ')
    process.stdout.write(`${flood}: ${n} polls in ${seconds.toFixed(1)} s (${[...statuses].map(([s, c]) => `${c}× ${s}`).join(', ')}); ` +
      `RSS ${before.rss.toFixed(0)} → ${after.rss.toFixed(0)} MiB (+${(after.rss - before.rss).toFixed(0)}), ` +
      `heap used ${before.heap.toFixed(0)} → ${after.heap.toFixed(0)} MiB (+${(after.heap - before.heap).toFixed(0)}), ` +
      `data dir ${before.disk.toFixed(1)} → ${after.disk.toFixed(1)} MiB (+${(after.disk - before.disk).toFixed(1)}), ` +
      `/v1/admin/consumers ${admin.status} ${(admin.bytes / 1024).toFixed(0)} KiB${dropped === '' ? '' : `; ${dropped}`}\n`)
  } finally {
    agent.destroy()
    child.kill('SIGTERM')
    await new Promise((resolve) => child.once('exit', resolve))
    rmSync(dir, { recursive: true, force: true })
  }
}

const floods = (process.argv.length > 2 ? process.argv.slice(2) : ['lists', 'ua', 'xff']) as Flood[]
process.stdout.write(`consumer floods against ${ROOT}${process.env.BENCH_FLOOD_ENV === undefined ? '' : ` with ${process.env.BENCH_FLOOD_ENV}`}\n`)
for (const f of floods) await run(f)
