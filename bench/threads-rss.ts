/**
 * Front-end threads' memory (issue #19): the RSS of `threatfeed serve` (bin/threatfeed.js, the
 * installed command) with THREATFEED_HTTP_THREADS=2 against =1, holding ten 131,072-entry lists.
 * Target: at most 1.2× (a body is one copy in shared memory, whichever thread sends it).
 *
 * Set-up: ten workspaces, each with a key; 131,072 distinct /32s per workspace (no two lists
 * share a network, none coalesce) posted through POST /v1/signal to a seeding server. Then,
 * rounds alternating 1 and 2 threads, each on the same data directory: start the server, poll
 * every list in every format, identity and gzip, on new connections (8 per variant, so that each
 * thread sends each body: the kernel spreads new connections over the threads' sockets), wait
 * until the RSS settles (five readings a second apart within 1 %), read /proc/<pid>/status.
 *
 * Environment: BENCH_RSS_ROUNDS (2: 1, 2, 1, 2 threads), BENCH_RSS_LISTS (10), BENCH_RSS_ENTRIES (131072).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { cpuTicks, median, repoDir, report, stealPercent, type Ratio, type Row } from './lib/report.js'
import { children, cpuSeconds, freePort, stopChildren } from './lib/processes.js'
import { openStore } from '../src/store/open.js'
import { generateApiKey, hashApiKey } from '../src/store/api-key.js'

const ROUNDS = Number(process.env.BENCH_RSS_ROUNDS ?? 2)
const LISTS = Number(process.env.BENCH_RSS_LISTS ?? 10)
const ENTRIES = Number(process.env.BENCH_RSS_ENTRIES ?? 131_072)
const FORMATS = ['plain', 'dialect_a', 'dialect_b', 'nftables'] as const
const PER_VARIANT = 8
/** The most entries a signal batch may hold (SPEC). */
const BATCH = 1000
const geoFixtures = join(repoDir, 'test', 'fixtures', 'geo', 'maxmind')

const tmp = mkdtempSync(join(tmpdir(), 'tf-bench-threads-rss-'))
process.on('exit', () => {
  stopChildren()
  rmSync(tmp, { recursive: true, force: true })
})
process.on('SIGINT', () => { process.exit(130) })

/** One request on a new connection; the body decoded when gzip. */
function call (port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number, body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const raw = Buffer.concat(chunks)
        resolve({ status: res.statusCode ?? 0, body: res.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw })
      })
    })
    req.on('error', reject)
    req.end(body)
  })
}

/** A feed poll; a 500 `feed unavailable` (the first build still running on a loaded machine) is asked again. */
async function poll (port: number, path: string, headers: Record<string, string>): Promise<{ status: number, body: Buffer }> {
  for (let i = 0; ; i++) {
    const r = await call(port, 'GET', path, headers)
    if (r.status !== 500 || i >= 60) return r
    await new Promise((resolve) => setTimeout(resolve, 2000))
  }
}

interface Running { readonly child: ChildProcess, readonly port: number }

async function serve (dataDir: string, threads: number): Promise<Running> {
  const port = await freePort()
  const child = spawn(process.execPath, [join(repoDir, 'bin', 'threatfeed.js'), 'serve'], {
    cwd: repoDir,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      THREATFEED_DATA_DIR: dataDir,
      THREATFEED_HTTP_THREADS: String(threads),
      THREATFEED_LOG_LEVEL: 'warn',
      THREATFEED_GEO_COUNTRY_DB: join(geoFixtures, 'GeoLite2-Country-Test.mmdb'),
      THREATFEED_GEO_ASN_DB: join(geoFixtures, 'GeoLite2-ASN-Test.mmdb'),
    },
  })
  children.add(child)
  child.on('exit', () => { children.delete(child) })
  // Ready once /readyz answers 200 (every thread listens before the start ends).
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`threatfeed serve exited with ${child.exitCode}`)
    const r = await call(port, 'GET', '/readyz', {}).catch(() => null)
    if (r?.status === 200) return { child, port }
    if (i > 1200) throw new Error('threatfeed serve not ready within 10 minutes (it may be building dist/)')
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
}

async function stop (s: Running): Promise<void> {
  const exited = new Promise((resolve) => s.child.once('exit', resolve))
  s.child.kill('SIGTERM')
  await exited
}

function ipOf (list: number, i: number): string {
  // Every other address from 11.0.0.0, 2^18 addresses a list: distinct across lists, none adjacent.
  const a = 0x0b000000 + list * 0x40000 + i * 2
  return `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}`
}

/** kB from /proc/<pid>/status. */
function memory (pid: number): { rss: number, anon: number, file: number, shmem: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN)
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile'), shmem: kb('RssShmem') }
}

async function settled (pid: number): Promise<ReturnType<typeof memory>> {
  const seen: Array<ReturnType<typeof memory>> = []
  for (let i = 0; i < 60; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1000))
    seen.push(memory(pid))
    const last = seen.slice(-5)
    if (last.length === 5 && Math.max(...last.map((m) => m.rss)) <= 1.01 * Math.min(...last.map((m) => m.rss))) break
  }
  return seen.at(-1)!
}

// --- set-up: workspaces and keys in the store, signals through the API ---
const dataDir = join(tmp, 'data')
const keys: string[] = []
{
  const store = await openStore({ kind: 'embedded', dataDir })
  for (let l = 0; l < LISTS; l++) {
    const ws = await store.workspaces.create({ name: `list-${l}`, subscription: 'active' })
    const key = generateApiKey()
    await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
    keys.push(key)
  }
  await store.close()
}
process.stderr.write(`bench/threads-rss: posting ${LISTS} × ${ENTRIES} signals through /v1/signal…\n`)
{
  const seeder = await serve(dataDir, 1)
  // One poster per list at a time: each key stays far below its rate limit.
  await Promise.all(keys.map(async (key, l) => {
    for (let start = 0; start < ENTRIES; start += BATCH) {
      const batch = Array.from({ length: Math.min(BATCH, ENTRIES - start) }, (_, i) => ({ type: 'access_rules', action: 'block', ip: ipOf(l, start + i), expiration: 7 * 86_400 }))
      const r = await call(seeder.port, 'POST', '/v1/signal', { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, JSON.stringify(batch))
      if (r.status !== 200) throw new Error(`/v1/signal answered ${r.status}: ${r.body.toString().slice(0, 300)}`)
    }
  }))
  // Every signal applied before the seeder stops (a 200 means appended; the consumer applies
  // after): otherwise the first measured server would do the rest, and hold its garbage.
  for (let l = 0; l < LISTS; l++) {
    for (let i = 0; ; i++) {
      const r = await poll(seeder.port, '/v1/threat/feeds?format=plain&family=v4', { authorization: `Bearer ${keys[l]!}` })
      if (r.status === 200 && r.body.toString().split('\n').filter((x) => x !== '').length === ENTRIES) break
      if (i > 300) throw new Error(`list ${l}: not ${ENTRIES} entries after 10 minutes`)
      await new Promise((resolve) => setTimeout(resolve, 2000))
    }
  }
  await stop(seeder)
}

// --- rounds ---
const steal0 = cpuTicks()
const rss: Record<1 | 2, Array<ReturnType<typeof memory>>> = { 1: [], 2: [] }
for (let round = 0; round < ROUNDS; round++) {
  for (const threads of [1, 2] as const) {
    const s = await serve(dataDir, threads)
    const cpu0 = cpuSeconds(s.child.pid!)
    for (let l = 0; l < LISTS; l++) {
      for (const format of FORMATS) {
        for (const encoding of ['identity', 'gzip']) {
          for (let c = 0; c < PER_VARIANT; c++) {
            const r = await poll(s.port, `/v1/threat/feeds?format=${format}&family=v4`, { authorization: `Bearer ${keys[l]!}`, 'accept-encoding': encoding })
            if (r.status !== 200) throw new Error(`list ${l} ${format} ${encoding}: ${r.status} ${r.body.toString().slice(0, 200)}`)
            if (format === 'plain' && c === 0 && r.body.toString().split('\n').filter((x) => x !== '').length !== ENTRIES) throw new Error(`list ${l}: not ${ENTRIES} entries`)
          }
        }
      }
    }
    const m = await settled(s.child.pid!)
    rss[threads].push(m)
    process.stderr.write(`  round ${round + 1}, ${threads} thread(s): RSS ${(m.rss / 1024).toFixed(1)} MiB (anon ${(m.anon / 1024).toFixed(1)}, file ${(m.file / 1024).toFixed(1)}, shmem ${(m.shmem / 1024).toFixed(1)}), ${(cpuSeconds(s.child.pid!) - cpu0).toFixed(1)} s CPU to build and serve\n`)
    await stop(s)
  }
}

const rows: Row[] = ([1, 2] as const).map((n) => ({
  case: `RSS, ${LISTS} lists × ${ENTRIES} entries, every format polled on every thread`,
  subject: `${n} thread${n === 1 ? '' : 's'}`,
  value: median(rss[n].map((m) => m.rss / 1024)),
  unit: 'MiB',
  runs: rss[n].map((m) => m.rss / 1024),
  extra: { anon_mib: median(rss[n].map((m) => m.anon / 1024)), file_mib: median(rss[n].map((m) => m.file / 1024)) },
}))
const ratio = median(rss[2].map((m, i) => m.rss / rss[1][i]!.rss))
const ratios: Ratio[] = [{ case: 'RSS', label: '2 threads / 1 thread', value: ratio, target: '<= 1.2', pass: ratio <= 1.2 }]
report('threads-rss', 'Front-end threads: RSS with 2 threads against 1 (ten 131,072-entry lists)', rows, ratios, {
  lists: LISTS,
  entries: ENTRIES,
  rounds: ROUNDS,
  stealPercent: stealPercent(steal0, cpuTicks()),
})
