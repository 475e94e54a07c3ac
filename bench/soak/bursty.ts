/**
 * The soak's bursty profile (BENCH_SOAK_PROFILE=bursty npm run bench soak): a pipeline that posts
 * in bursts, not a steady stream. Every INTERVAL seconds BURST random /32 blocks expiring after
 * EXPIRY seconds (at least 60: the server raises shorter ones) are posted (v1, 1000 a batch, 4 in flight), to `threatfeed serve` in a child
 * process (a real server: its consumer thread applies and sweeps, its Housekeeper trims) with
 * THREATFEED_STREAM_RETENTION and THREATFEED_TOMBSTONE_MAX set; the workspace feed is polled
 * every 2 s as an appliance would. Just before each burst (the previous one has lapsed and been
 * swept by then) it records the data directory's size, and from `threatfeed store stats`' reading
 * of the files each table's entries and bytes, the free pages and the snapshots readers hold.
 *
 * What it shows: whether the directory levels off once the tombstone cap is reached and the
 * stream's retention is trimmed each round (freed pages reused by the next burst), or grows
 * round after round; and what a lapsed rule leaves behind, table by table.
 *
 * Environment: BENCH_BURST_ROUNDS (10), BENCH_BURST_SIZE (100000), BENCH_BURST_EXPIRY (60 s),
 * BENCH_BURST_INTERVAL (150 s), BENCH_BURST_RETENTION (2m), BENCH_BURST_TOMBSTONE_MAX (50000),
 * BENCH_BURST_SWEEP_INTERVAL (60s), BENCH_BURST_BUILD (the threatfeed checkout whose bin/threatfeed
 * serves: another build to compare; this one by default), BENCH_BURST_NODE (the node that runs it),
 * BENCH_BURST_LABEL (results name suffix), BENCH_SOAK_DIR (where the data directory goes).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import { openMaintenance, type StoreFileStats } from '../../src/store/maintenance.js'
import { repoDir, writeResults } from '../lib/report.js'
import { benchServerEnv } from '../lib/server-env.js'

const env = process.env
const ROUNDS = Number(env.BENCH_BURST_ROUNDS ?? 10)
const SIZE = Number(env.BENCH_BURST_SIZE ?? 100_000)
const EXPIRY_S = Number(env.BENCH_BURST_EXPIRY ?? 60)
const INTERVAL_S = Number(env.BENCH_BURST_INTERVAL ?? 150)
const RETENTION = env.BENCH_BURST_RETENTION ?? '2m'
const TOMBSTONE_MAX = Number(env.BENCH_BURST_TOMBSTONE_MAX ?? 50_000)
const SWEEP_INTERVAL = env.BENCH_BURST_SWEEP_INTERVAL ?? '60s'
const BUILD = env.BENCH_BURST_BUILD ?? repoDir
const NODE = env.BENCH_BURST_NODE ?? process.execPath
const LABEL = env.BENCH_BURST_LABEL ?? ''
const BATCH = 1000
const IN_FLIGHT = 4
const POLL_MS = 2000
/** The tables a lapsed rule touches (src/store/embedded/lmdb-env.ts names them). */
const TABLES = ['access-rules', 'expiry-log', 'access-changes', 'tombstone-log', 'tombstones-by-target', 'admin-journal', 'stream-chunks'] as const

/** Disk use (allocated blocks) of the files under `dir`, in bytes. */
function diskUse (dir: string): number {
  let sum = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    sum += e.isDirectory() ? diskUse(p) : statSync(p).blocks * 512
  }
  return sum
}

/** A random address in 11.0.0.0–74.255.255.255, as bench/soak.ts draws them. */
function randomV4 (): string {
  const n = (11 + Math.floor(Math.random() * 64)) * 2 ** 24 + Math.floor(Math.random() * 2 ** 24)
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`
}

interface Round {
  round: number
  t: number
  dirBytes: number
  mainBytes: number
  streamBytes: number
  freeBytes: number
  streamFreeBytes: number
  /** The most commits any reader's snapshot was behind, per file. */
  readersBehind: number[]
  tables: Record<string, { entries: number, bytes: number }>
  postMs: number
  failed: number
  loadAvg1: number
}

async function main (): Promise<void> {
  const base = env.BENCH_SOAK_DIR ?? mkdtempSync(join(tmpdir(), 'tf-bench-bursty-'))
  const dataDir = join(base, 'data')
  rmSync(dataDir, { recursive: true, force: true })
  mkdirSync(dataDir, { recursive: true })
  const store = await openEmbeddedStore(dataDir)
  const ws = await store.workspaces.create({ name: 'bursty', subscription: 'active' })
  const key = generateApiKey()
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
  await store.close()

  const child: ChildProcess = spawn(NODE, [join(BUILD, 'bin', 'threatfeed'), 'serve'], {
    cwd: BUILD,
    env: {
      PATH: env.PATH,
      ...benchServerEnv(dataDir),
      THREATFEED_LOG_LEVEL: 'info',
      THREATFEED_STREAM_RETENTION: RETENTION,
      THREATFEED_TOMBSTONE_MAX: String(TOMBSTONE_MAX),
      THREATFEED_SWEEP_INTERVAL: SWEEP_INTERVAL,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => { resolve() }))
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => { reject(new Error(`the server exited with ${code}`)) })
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const rec = JSON.parse(line) as { msg?: string, port?: number, level?: number }
        if (rec.msg === 'listening' && rec.port !== undefined) resolve(rec.port)
        else if ((rec.level ?? 0) >= 40) process.stderr.write(`server: ${line}\n`)
      } catch { /* not a log line */ }
    })
  })
  const url = `http://127.0.0.1:${port}`
  const auth = { authorization: `Bearer ${key}` }
  process.stderr.write(`bench/soak bursty: ${ROUNDS} rounds of ${SIZE} /32 blocks expiring after ${EXPIRY_S} s, every ${INTERVAL_S} s; retention ${RETENTION}, tombstone cap ${TOMBSTONE_MAX}, sweep every ${SWEEP_INTERVAL}; server ${BUILD} on ${NODE}; data in ${dataDir}\n`)

  let polling = true
  const poller = (async () => {
    while (polling) {
      const r = await fetch(`${url}/v1/threat/feeds?format=plain`, { headers: auth }).catch(() => null)
      await r?.arrayBuffer()
      await sleep(POLL_MS)
    }
  })()

  const maintenance = await openMaintenance({ kind: 'embedded', dataDir })
  const t0 = performance.now()
  const rounds: Round[] = []
  const sample = async (round: number, postMs: number, failed: number): Promise<Round> => {
    const stats = await maintenance.stats()
    const [main, stream] = stats.files as [StoreFileStats, StoreFileStats]
    const tables: Record<string, { entries: number, bytes: number }> = {}
    // stream-chunks: the stream's own file (the main file's table of that name is a format-1 relic).
    for (const name of TABLES) tables[name] = (name === 'stream-chunks' ? stream.tables[name] : main.tables[name]) ?? { entries: 0, bytes: 0 }
    return {
      round,
      t: (performance.now() - t0) / 1000,
      dirBytes: diskUse(dataDir),
      mainBytes: statSync(join(dataDir, 'data.mdb')).blocks * 512,
      streamBytes: statSync(join(dataDir, 'stream', 'data.mdb')).blocks * 512,
      freeBytes: main.freeBytes,
      streamFreeBytes: stream.freeBytes,
      readersBehind: stats.files.map((f) => Math.max(0, ...f.readers.map((r) => r.txnsBehind))),
      tables,
      postMs,
      failed,
      loadAvg1: loadavg()[0]!,
    }
  }
  const mib = (b: number): string => (b / 2 ** 20).toFixed(1)
  const print = (r: Round): void => {
    const tb = Object.entries(r.tables).map(([n, x]) => `${n} ${x.entries}/${mib(x.bytes)}`).join('  ')
    process.stderr.write(`round ${r.round}  t ${r.t.toFixed(0)} s  dir ${mib(r.dirBytes)} MiB (main ${mib(r.mainBytes)}, stream ${mib(r.streamBytes)})  free ${mib(r.freeBytes)} / ${mib(r.streamFreeBytes)} MiB  readers behind ${r.readersBehind.join('/')}  post ${(r.postMs / 1000).toFixed(1)} s failed ${r.failed}  load ${r.loadAvg1.toFixed(1)}  [${tb}]\n`)
  }

  // Each round: a burst, then its sample just before the next burst is due (the last one too).
  for (let round = 1; round <= ROUNDS; round++) {
    const posted = await burst(url, auth)
    await sleep(Math.max(0, t0 + round * INTERVAL_S * 1000 - performance.now()))
    const r = await sample(round, posted.ms, posted.failed)
    rounds.push(r)
    print(r)
  }

  polling = false
  await poller
  child.kill('SIGTERM')
  await exited
  const file = writeResults(`soak-bursty${LABEL === '' ? '' : `-${LABEL}`}`, [], [], {
    rounds: ROUNDS, size: SIZE, expirySeconds: EXPIRY_S, intervalSeconds: INTERVAL_S, retention: RETENTION, tombstoneMax: TOMBSTONE_MAX, sweepInterval: SWEEP_INTERVAL, build: BUILD, node: NODE, samples: rounds,
  })
  process.stdout.write(`results: ${file}\n`)
  if (env.BENCH_SOAK_DIR === undefined) rmSync(base, { recursive: true, force: true })
}

/** One burst: SIZE blocks in batches of BATCH, IN_FLIGHT at a time; its wall time and failed batches. */
async function burst (url: string, auth: Record<string, string>): Promise<{ ms: number, failed: number }> {
  const started = performance.now()
  let next = 0
  let failed = 0
  const batches = Math.ceil(SIZE / BATCH)
  const worker = async (): Promise<void> => {
    while (next < batches) {
      next++
      const body = `[${Array.from({ length: BATCH }, () => `{"type":"access_rules","action":"block","ip":"${randomV4()}","expiration":${EXPIRY_S}}`).join(',')}]`
      for (let attempt = 0; ; attempt++) {
        const r = await fetch(`${url}/v1/signal`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body }).catch(() => null)
        await r?.arrayBuffer()
        if (r?.status === 200) break
        // A burst is what a pipeline sends whole: a refused batch (429 under load) is sent again.
        if (attempt >= 20) { failed++; break }
        await sleep(250)
      }
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  return { ms: performance.now() - started, failed }
}

await main()
