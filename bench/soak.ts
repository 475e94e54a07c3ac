/**
 * Soak: the embedded store under a detection pipeline's load for long enough that the steady
 * state shows — does the data directory, the feed's rebuild and ingest latency stay flat once
 * lapsed rules are swept and the stream trimmed, or do they grow with the history of signals?
 *
 * Load: v1 batches of 1000 entries of random IPv4 (11.0.0.0–74.255.255.255) and IPv6
 * (2000::/3) targets, half each, blocked with expiries drawn uniformly from 60–600 s, a tenth of
 * the entries unblocks of targets blocked earlier, sent open loop at a fixed 3,000 entries/s
 * (latency counted from each batch's scheduled send time, so a stalled server is not hidden by a
 * client that waits). About a million rules are live at steady state. The workspace feed is
 * polled every sample, so the server rebuilds it as its rules change (at most every 30 s).
 *
 * The server (bench/soak/server.ts) is `threatfeed serve` in a child process with the
 * Housekeeper that main.ts starts, THREATFEED_STREAM_RETENTION short (3m) so that several
 * retention windows pass. The rules reach steady state the longest expiry plus one sweep
 * interval and grain after the start; the sweep and trim run all along until two retention
 * windows and BENCH_SOAK_PLATEAU_SECONDS (180) later, where the plateau is read, and are then
 * paused and resumed in alternating slices (2 min), so that ingest p99 with and without them is
 * compared within one run, minutes apart on the same VM. BENCH_SOAK_MODE=off runs the same load with neither ever running: the
 * slope they remove.
 *
 * Every 30 s it records the data directory's disk use (both LMDB environments), live rules (the
 * driver's model of what the server accepted: blocks not yet expired nor unblocked; a refused batch is taken back), stored rules, tombstones
 * and expiry-log entries (entry counts of the LMDB tables, read-only from this process), retained
 * stream records (store.stream.retained, as `stream status` shows), the mean wall time of the feed
 * rebuilds in the interval (the server's /metrics threatfeed_feed_build_duration_seconds: rule
 * reload to swapped snapshot; on the HTTP thread plus the pool), the server's CPU per second, and
 * ingest p50/p99 over the interval. Writes bench/results/soak[-off].json and .svg.
 *
 * Targets (issue 16): after the second retention window past steady state (until the slices),
 * data-directory size, rebuild time and the rule reload's CPU each within ±20 % of their level at
 * the end of the first (the median of the samples after the second against the median of the
 * first's last retention window: one sample is one interval's noise); stored rules ≤ 1.1×
 * live rules plus one sweep interval's lapses (checked at samples one sweep interval or more into
 * a slice with housekeeping on); ingest p99 with sweep and trim ≤ 1.2× without them.
 *
 * The admin journal's tables (issue 22) are in use: every answered batch writes a batch report,
 * the server samples feed sizes every 5 minutes, and the driver makes an admin change every
 * ADMIN_EVERY_S (an audit line each). The batch journal's cap is small (THREATFEED_BATCH_JOURNAL_MAX
 * = BENCH_SOAK_BATCH_JOURNAL_MAX, 1000: reached after about 6 minutes at 3 batches/s, where the
 * server's 10,000 would take 55) so that the run shows it reached and held. Targets: the batch
 * table, from the first sample at its cap on (reached by the end of the first window), stays
 * between the cap and the cap plus a tenth plus two seconds of batches (src/http/admin-journal.ts:
 * a tenth of the cap written starts a sweep; one flush, and the batches of the sweep's run); the
 * audit log holds exactly the admin changes made (±1 in flight); feed versions keep one point per
 * variant per hour, at the start of the hour.
 *
 * Environment: BENCH_SOAK_MINUTES (enough for three slice pairs, at least 20), BENCH_SOAK_MODE
 * (on|off), BENCH_SOAK_RETENTION (3m), BENCH_SOAK_SWEEP_INTERVAL (60s), BENCH_SOAK_RATE (3000
 * entries/s), BENCH_SOAK_EXPIRY (60-600, seconds), BENCH_SOAK_SAMPLE_SECONDS (30),
 * BENCH_SOAK_SLICE_SECONDS (120), BENCH_SOAK_STEADY_SECONDS (longest expiry + sweep interval +
 * 10), BENCH_SOAK_PLATEAU_SECONDS (180), BENCH_SOAK_BATCH_JOURNAL_MAX (1000),
 * BENCH_SOAK_BATCH_JOURNAL_RETENTION (7d), BENCH_SOAK_DIR (where the data directory goes; a temp
 * dir by default, removed at the end). BENCH_SOAK_PROFILE=bursty runs the bursty profile instead
 * (bench/soak/bursty.ts: its own environment).
 */
import { fork, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { open as openLmdb, type Database, type RootDatabase } from 'lmdb'
import { parseDuration } from '../src/config.js'
import { cpuTicks, benchDir, median, percentile, repoDir, report, stealPercent, type Ratio, type Row } from './lib/report.js'
import { drawChart } from './soak/chart.js'
import { journalTargets, type FeedPoints } from './soak/journal-targets.js'
import type { FromServer, ServerSample, ToServer } from './soak/server.js'

const env = process.env
const MODE = env.BENCH_SOAK_MODE === 'off' ? 'off' : 'on'
const RETENTION = env.BENCH_SOAK_RETENTION ?? '3m'
const INTERVAL = env.BENCH_SOAK_SWEEP_INTERVAL ?? '60s'
const RATE = Number(env.BENCH_SOAK_RATE ?? 3000)
const [EXPIRY_MIN, EXPIRY_MAX] = (env.BENCH_SOAK_EXPIRY ?? '60-600').split('-').map(Number) as [number, number]
const SAMPLE_S = Number(env.BENCH_SOAK_SAMPLE_SECONDS ?? 30)
const BATCH_JOURNAL_MAX = Number(env.BENCH_SOAK_BATCH_JOURNAL_MAX ?? 1000)
const BATCH_JOURNAL_RETENTION = env.BENCH_SOAK_BATCH_JOURNAL_RETENTION ?? '7d'
const SLICE_S = Number(env.BENCH_SOAK_SLICE_SECONDS ?? 120)
const RETENTION_S = parseDuration(RETENTION)! / 1000
const INTERVAL_S = parseDuration(INTERVAL)! / 1000
/** The sweep takes what lapsed before the current 10-second grain (SWEEP_GRAIN_MS). */
const GRAIN_S = 10
const STEADY_S = Number(env.BENCH_SOAK_STEADY_SECONDS ?? EXPIRY_MAX + INTERVAL_S + GRAIN_S)
/**
 * The plateau is measured with the sweep and trim running all along, as a server runs: from
 * steady state through two retention windows and PLATEAU_S more. The on/off slices come after it
 * (a slice pair compares minutes; a plateau read across on and off slices would measure the
 * switching, not a slope).
 */
const PLATEAU_S = Number(env.BENCH_SOAK_PLATEAU_SECONDS ?? 180)
const SLICES_FROM_S = STEADY_S + 2 * RETENTION_S + PLATEAU_S
/** Long enough for three slice pairs after the plateau by default. */
const MINUTES = Number(env.BENCH_SOAK_MINUTES ?? Math.max(20, Math.ceil((SLICES_FROM_S + 6 * SLICE_S) / 60)))
const BATCH = 1000
const UNBLOCK_SHARE = 0.1
/** Unblocks pick among the targets of this many latest blocks. */
const RECENT = 300_000
/** Accepted batches a slice needs for its p99 to count in the on/off comparison. */
const MIN_SLICE_BATCHES = 20
/** Seconds between two admin changes (each one audit line). */
const ADMIN_EVERY_S = 15
/** The audit log's bound per workspace (src/http/admin-journal.ts journalBounds). */
const AUDIT_MAX = 100_000
const AUDIT_DAYS = 90

// ---------------------------------------------------------------- load

function randomV4 (): string {
  const n = (11 + Math.floor(Math.random() * 64)) * 2 ** 24 + Math.floor(Math.random() * 2 ** 24)
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`
}

function randomV6 (): string {
  const g = [0x2000 + Math.floor(Math.random() * 0x2000)]
  for (let i = 1; i < 8; i++) g.push(Math.floor(Math.random() * 0x10000))
  return g.map((x) => x.toString(16)).join(':')
}

/** What the driver sent and what of it is live: target → expiry (ms). */
class Model {
  readonly live = new Map<string, number>()
  readonly #recent: string[] = []
  #next = 0
  lapsed = 0

  /** The batch's body, and how to take it back from the model if the server refused it. */
  batch (now: number): { body: string, undo: () => void } {
    const parts: string[] = []
    const before: Array<[string, number | undefined]> = []
    for (let i = 0; i < BATCH; i++) {
      if (this.#recent.length > 0 && Math.random() < UNBLOCK_SHARE) {
        const ip = this.#recent[Math.floor(Math.random() * this.#recent.length)]!
        before.push([ip, this.live.get(ip)])
        this.live.delete(ip)
        parts.push(`{"type":"access_rules","action":"unblock","ip":"${ip}"}`)
        continue
      }
      const ip = Math.random() < 0.5 ? randomV4() : randomV6()
      const seconds = EXPIRY_MIN + Math.floor(Math.random() * (EXPIRY_MAX - EXPIRY_MIN + 1))
      before.push([ip, this.live.get(ip)])
      this.live.set(ip, now + seconds * 1000)
      if (this.#recent.length < RECENT) this.#recent.push(ip)
      else this.#recent[this.#next++ % RECENT] = ip
      parts.push(`{"type":"access_rules","action":"block","ip":"${ip}","expiration":${seconds},"description":"scanner seen by sensor 7"}`)
    }
    const undo = (): void => {
      for (let i = before.length - 1; i >= 0; i--) {
        const [ip, exp] = before[i]!
        if (exp === undefined) this.live.delete(ip)
        else this.live.set(ip, exp)
      }
    }
    return { body: `[${parts.join(',')}]`, undo }
  }

  /** Forgets what lapsed (counting it); returns how many are live. */
  settle (now: number): number {
    for (const [ip, exp] of this.live) {
      if (exp <= now) { this.live.delete(ip); this.lapsed++ }
    }
    return this.live.size
  }
}

interface Sent { at: number, ms: number, status: number, housekeeping: boolean }

// ---------------------------------------------------------------- measurements

/** Disk use (allocated blocks) of the files under `dir`, in bytes. */
function diskUse (dir: string): number {
  let sum = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) sum += diskUse(p)
    else sum += statSync(p).blocks * 512
  }
  return sum
}

/** The main environment's tables whose pages each sample records (names from src/store/embedded/lmdb-env.ts). */
const SIZED_TABLES = ['access-rules', 'access-changes', 'access-by-target', 'expiry-log', 'tombstone-log', 'tombstones-by-target', 'admin-journal'] as const

interface PageStat { treeBranchPageCount: number, treeLeafPageCount: number, overflowPages: number, entryCount: number }
const pagesOf = (s: PageStat): number => s.treeBranchPageCount + s.treeLeafPageCount + s.overflowPages

/** Entry counts and page use of the store's tables, read-only from this process. */
class Tables {
  readonly #root: RootDatabase
  readonly #dbs: Record<'rules' | 'tombstones' | 'expiryLog', { getStats (): { entryCount: number } }>
  readonly #sized: Array<{ name: string, db: { getStats (): PageStat } }>
  readonly #journal: Database
  readonly #all = new Map<string, { getStats (): PageStat }>()
  constructor (dataDir: string) {
    this.#root = openLmdb({ path: dataDir, readOnly: true, noSubdir: false, maxDbs: 64 })
    const binary = { encoding: 'binary' } as const
    this.#dbs = {
      rules: this.#root.openDB('access-rules', binary) as never,
      tombstones: this.#root.openDB('tombstone-log', binary) as never,
      expiryLog: this.#root.openDB('expiry-log', binary) as never,
    }
    this.#sized = SIZED_TABLES.map((name) => ({ name, db: this.#root.openDB(name, binary) as never }))
    // Keys [table, partition, at, id] (src/store/embedded/journal-store.ts); values left undecoded.
    this.#journal = this.#root.openDB('admin-journal', binary)
  }

  counts (): { rules: number, tombstones: number, expiryLog: number } {
    this.#root.resetReadTxn()
    return { rules: this.#dbs.rules.getStats().entryCount, tombstones: this.#dbs.tombstones.getStats().entryCount, expiryLog: this.#dbs.expiryLog.getStats().entryCount }
  }

  /**
   * Entries of each journal table (#22: signal batches, feed-version history, audit log), and of
   * the feed versions the distinct variants and hours and the points not at the start of an hour.
   */
  journal (): { counts: Record<string, number>, feed: FeedPoints } {
    const counts: Record<string, number> = { batch: 0, feed_size: 0, audit: 0 }
    const variants = new Set<string>()
    const hours = new Set<number>()
    let unaligned = 0
    for (const key of this.#journal.getKeys({})) {
      const [table, partition, at, id] = key as unknown as [string, string, number, string]
      counts[table] = (counts[table] ?? 0) + 1
      if (table !== 'feed_size') continue
      variants.add(`${partition} ${id}`)
      hours.add(at)
      if (at % 3_600_000 !== 0) unaligned++
    }
    return { counts, feed: { variants: variants.size, hours: hours.size, unaligned } }
  }

  /** Bytes of pages each table uses, and of the file's pages no table uses (LMDB's free list,
   *  reusable once no reader holds a snapshot from before they were freed). */
  pages (): { tables: Record<string, number>, freeBytes: number } {
    const all = this.#root.getStats() as PageStat & { lastPageNumber: number, pageSize: number, free: PageStat, root: PageStat }
    const tables: Record<string, number> = {}
    for (const { name, db } of this.#sized) tables[name] = pagesOf(db.getStats()) * all.pageSize
    // Every named table's pages, not just the sized ones, count as used.
    let used = pagesOf(all.root) + pagesOf(all.free) + 2
    for (const name of Array.from(this.#root.getKeys({}), String)) {
      let db = this.#all.get(name)
      if (db === undefined) this.#all.set(name, db = this.#root.openDB(name, { encoding: 'binary' }) as never)
      used += pagesOf(db.getStats())
    }
    return { tables, freeBytes: (all.lastPageNumber + 1 - used) * all.pageSize }
  }

  close (): Promise<void> { return this.#root.close() }
}

function metricValue (text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue
    const m = /^(\w+)(\{[^}]*\})?\s+(\S+)$/.exec(line)
    if (m === null || m[1] !== name) continue
    if (Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`))) sum += Number(m[3])
  }
  return sum
}

interface Sample {
  t: number
  housekeeping: boolean
  dataDirBytes: number
  mainEnvBytes: number
  streamEnvBytes: number
  liveRules: number
  storedRules: number
  tombstones: number
  expiryLog: number
  /** Entries of the admin journal's tables (batch, feed_size, audit). */
  journal: Record<string, number>
  /** The feed versions' distinct variants and hours, and points not at the start of an hour. */
  feedPoints: FeedPoints
  /** Admin changes made so far, less those that failed: what the audit log should hold. */
  adminOkTotal: number
  /** Bytes of pages of the main tables (SIZED_TABLES), and of the free pages in its file. */
  tableBytes: Record<string, number>
  freeBytes: number
  /** Admin changes the driver made in the interval (each writes an audit line), and how many failed. */
  adminChanges: number
  adminFailed: number
  streamRecords: number
  streamBytes: number
  /** Lapses per second in the interval (the driver's model). */
  lapsesPerSecond: number
  rebuilds: number
  /** Mean wall time of the feed rebuilds in the interval, ms (null: none). */
  rebuildMs: number | null
  /** The feed's rule reloads in the interval, and their mean HTTP-thread CPU and wall time, ms. */
  reloads: number
  reloadCpuMs: number | null
  reloadWallMs: number | null
  /**
   * The HTTP thread's CPU spent reloading rules per second of the interval, ms/s: what the reloads
   * cost at this ingest rate whatever their cadence (a reload takes the changes since the one
   * before, so fewer, later reloads each cost more).
   */
  reloadCpuMsPerS: number
  /** HTTP (main) thread CPU in the interval, % of one core. */
  mainThreadCpuPct: number
  /** CPU in the interval of each other server thread with any, % of one core (tid → %): the consumer thread and the pool's workers. */
  otherThreadsCpuPct: Record<string, number>
  feedNetworks: number
  serverCpuPct: number
  rssMiB: number
  requests: number
  failed: number
  /** Failed batches by HTTP status (0: no answer). */
  failedByStatus: Record<string, number>
  /** The machine's 1-minute load average at the sample (the cores are shared). */
  loadAvg1: number
  p50: number | null
  p99: number | null
  sweepRunsMs: number[]
  trimRunsMs: number[]
  /** The store's housekeeping counters so far (rules swept, records trimmed, passes...). */
  storeCounters: Record<string, number>
  stealPct: number | null
}

// ---------------------------------------------------------------- run

async function main (): Promise<void> {
  const base = env.BENCH_SOAK_DIR ?? mkdtempSync(join(tmpdir(), 'tf-bench-soak-'))
  const dataDir = join(base, 'data')
  rmSync(dataDir, { recursive: true, force: true })
  mkdirSync(dataDir, { recursive: true })
  const child: ChildProcess = fork(join(repoDir, 'bench', 'soak', 'server.ts'), [dataDir, RETENTION, INTERVAL, MODE, String(BATCH_JOURNAL_MAX), BATCH_JOURNAL_RETENTION], { execArgv: ['--import=tsx'], cwd: repoDir, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const waiters = new Map<number, (s: ServerSample) => void>()
  const ready = new Promise<Extract<FromServer, { cmd: 'ready' }>>((resolve, reject) => {
    child.once('exit', (code) => { reject(new Error(`bench/soak: the server exited with ${code}`)) })
    child.on('message', (m: FromServer) => {
      if (m.cmd === 'ready') resolve(m)
      else waiters.get(m.id)?.(m.sample)
    })
  })
  const srv = await ready
  const tell = (m: ToServer): void => { child.send(m) }
  let sampleId = 0
  const askSample = (): Promise<ServerSample> => new Promise((resolve) => { const id = ++sampleId; waiters.set(id, resolve); tell({ cmd: 'sample', id }) })
  const url = `http://127.0.0.1:${srv.port}`
  const auth = { authorization: `Bearer ${srv.key}` }
  const tables = new Tables(dataDir)
  const adminAuth = { authorization: `Bearer ${srv.adminKey}`, 'content-type': 'application/json' }

  // A few admin changes a minute through the API, so that the audit log grows as in use: a list
  // made once, then its description changed every ADMIN_EVERY_S.
  const admin = { changes: 0, failed: 0 }
  const adminCall = async (method: string, path: string, body: object): Promise<Record<string, unknown> | null> => {
    admin.changes++
    const r = await fetch(`${url}${path}`, { method, headers: adminAuth, body: JSON.stringify(body) }).catch(() => null)
    const json = r === null ? null : await r.json().catch(() => null) as Record<string, unknown> | null
    if (r === null || r.status >= 300) { admin.failed++; return null }
    return json
  }
  const list = await adminCall('POST', '/v1/admin/lists', { name: 'soak-edge', description: 'soak 0' })
  if (list === null) throw new Error('bench/soak: the admin API refused to create the list')
  let adminStop = false
  const adminLoop = (async () => {
    for (let n = 1; !adminStop; n++) {
      await sleep(ADMIN_EVERY_S * 1000)
      if (!adminStop) await adminCall('PATCH', `/v1/admin/lists/${String(list.id)}`, { description: `soak ${n}` })
    }
  })()

  const model = new Model()
  const sent: Sent[] = []
  const periodMs = (BATCH / RATE) * 1000
  const t0 = performance.now()
  const wallStart = Date.now()
  const endMs = MINUTES * 60_000
  let housekeeping = MODE === 'on'
  const offBands: Array<[number, number]> = []
  let inflight = 0

  process.stderr.write(`bench/soak: mode ${MODE}, ${RATE} entries/s for ${MINUTES} min, retention ${RETENTION}, sweep every ${INTERVAL}, expiries ${EXPIRY_MIN}–${EXPIRY_MAX} s, batch journal cap ${BATCH_JOURNAL_MAX} and ${BATCH_JOURNAL_RETENTION}; steady state from ${STEADY_S} s, slices of ${SLICE_S} s from ${SLICES_FROM_S} s; data in ${dataDir}\n`)

  // Open loop: batch k is due at t0 + k·period, sent then whatever the previous ones are doing.
  const load = (async () => {
    for (let k = 0; ; k++) {
      const due = k * periodMs
      if (due >= endMs) break
      const wait = t0 + due - performance.now()
      if (wait > 0) await sleep(wait)
      const { body, undo } = model.batch(wallStart + due)
      const hk = housekeeping
      inflight++
      void fetch(`${url}/v1/signal`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body })
        .then(async (r) => { await r.arrayBuffer(); return r.status }, () => 0)
        .then((status) => {
          // A refused batch (429, 500, no answer) left nothing: the model forgets it too.
          if (status !== 200) undo()
          sent.push({ at: due / 1000, ms: performance.now() - t0 - due, status, housekeeping: hk })
          inflight--
        })
    }
  })()

  const samples: Sample[] = []
  let prev = { adminChanges: 0, adminFailed: 0, builds: 0, buildSum: 0, cpu: 0, mainCpuMs: 0, threads: {} as Record<string, number>, t: 0, lapsed: 0, sent: 0, ticks: cpuTicks() }
  const pollFeed = async (): Promise<void> => {
    const r = await fetch(`${url}/v1/threat/feeds?format=plain`, { headers: { ...auth, 'accept-encoding': 'gzip' } }).catch(() => null)
    await r?.arrayBuffer()
  }
  await sleep(2000)
  await pollFeed()
  // Slices: on/off alternate from steady state, off first. A loop of its own: a sample that takes
  // longer than the sample interval (a starved server) must not hold a switch back.
  let slicing = true
  const slices = (async () => {
    while (slicing) {
      const t = (performance.now() - t0) / 1000
      const want = MODE === 'on' && (t < SLICES_FROM_S || Math.floor((t - SLICES_FROM_S) / SLICE_S) % 2 === 1)
      if (want !== housekeeping) {
        housekeeping = want
        tell({ cmd: 'housekeeping', on: want })
        if (!want) offBands.push([t, t])
        else offBands[offBands.length - 1]![1] = t
        process.stderr.write(`bench/soak: ${t.toFixed(0)} s: sweep and trim ${want ? 'resumed' : 'paused'}\n`)
      }
      await sleep(250)
    }
  })()
  for (let next = SAMPLE_S; next * 1000 <= endMs; next += SAMPLE_S) {
    const wait = t0 + next * 1000 - performance.now()
    if (wait > 0) await sleep(wait)
    const t = (performance.now() - t0) / 1000
    await pollFeed()
    const [s, metrics] = await Promise.all([askSample(), fetch(`${url}/metrics`).then((r) => r.text())])
    const live = model.settle(Date.now())
    const counts = tables.counts()
    const { counts: journal, feed: feedPoints } = tables.journal()
    const pages = tables.pages()
    const builds = metricValue(metrics, 'threatfeed_feed_build_duration_seconds_count', { outcome: 'built' })
    const buildSum = metricValue(metrics, 'threatfeed_feed_build_duration_seconds_sum', { outcome: 'built' })
    const window = sent.slice(prev.sent)
    const ok = window.filter((x) => x.status === 200).map((x) => x.ms)
    const ticks = cpuTicks()
    const dt = t - prev.t
    const otherThreadsCpuPct: Record<string, number> = {}
    for (const [tid, ms] of Object.entries(s.threadsCpuMs)) {
      const d = ms - (prev.threads[tid] ?? 0)
      if (tid !== String(srv.pid) && d > 0) otherThreadsCpuPct[tid] = Math.round(100 * d / 1000 / dt)
    }
    const mean = (xs: number[]): number | null => xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length
    const sample: Sample = {
      t,
      housekeeping: s.housekeepingOn,
      dataDirBytes: diskUse(dataDir),
      mainEnvBytes: diskUse(dataDir) - diskUse(join(dataDir, 'stream')),
      streamEnvBytes: diskUse(join(dataDir, 'stream')),
      liveRules: live,
      storedRules: counts.rules,
      tombstones: counts.tombstones,
      expiryLog: counts.expiryLog,
      journal,
      feedPoints,
      adminOkTotal: admin.changes - admin.failed,
      tableBytes: pages.tables,
      freeBytes: pages.freeBytes,
      adminChanges: admin.changes - prev.adminChanges,
      adminFailed: admin.failed - prev.adminFailed,
      streamRecords: s.retained.records,
      streamBytes: s.retained.bytes,
      lapsesPerSecond: (model.lapsed - prev.lapsed) / (t - prev.t),
      rebuilds: builds - prev.builds,
      rebuildMs: builds > prev.builds ? 1000 * (buildSum - prev.buildSum) / (builds - prev.builds) : null,
      reloads: s.reloads.length,
      reloadCpuMs: mean(s.reloads.map((r) => r.cpuMs)),
      reloadWallMs: mean(s.reloads.map((r) => r.wallMs)),
      reloadCpuMsPerS: s.reloads.reduce((a, r) => a + r.cpuMs, 0) / dt,
      mainThreadCpuPct: 100 * (s.mainThreadCpuMs - prev.mainCpuMs) / 1000 / dt,
      otherThreadsCpuPct,
      feedNetworks: metricValue(metrics, 'threatfeed_feed_entries', { action: 'block' }),
      serverCpuPct: 100 * (s.cpuMicros - prev.cpu) / 1e6 / (t - prev.t),
      rssMiB: s.rssBytes / 2 ** 20,
      requests: window.length,
      failed: window.length - ok.length,
      failedByStatus: window.filter((x) => x.status !== 200).reduce<Record<string, number>>((m, x) => { m[x.status] = (m[x.status] ?? 0) + 1; return m }, {}),
      loadAvg1: loadavg()[0]!,
      p50: ok.length > 0 ? percentile(ok, 50) : null,
      p99: ok.length > 0 ? percentile(ok, 99) : null,
      sweepRunsMs: s.sweepRunsMs,
      trimRunsMs: s.trimRunsMs,
      storeCounters: s.housekeeping,
      stealPct: stealPercent(prev.ticks, ticks),
    }
    samples.push(sample)
    prev = { adminChanges: admin.changes, adminFailed: admin.failed, builds, buildSum, cpu: s.cpuMicros, mainCpuMs: s.mainThreadCpuMs, threads: s.threadsCpuMs, t, lapsed: model.lapsed, sent: sent.length, ticks }
    const mib = (b: number): string => (b / 2 ** 20).toFixed(1)
    process.stderr.write(`bench/soak: ${(t / 60).toFixed(1)} min  hk ${sample.housekeeping ? 'on ' : 'off'}  dir ${mib(sample.dataDirBytes)} MiB (main ${mib(sample.mainEnvBytes)}, stream ${mib(sample.streamEnvBytes)})  live ${live}  stored ${counts.rules}  tomb ${counts.tombstones}  free ${mib(pages.freeBytes)} MiB  journal ${JSON.stringify(journal)} (${mib(pages.tables['admin-journal'] ?? 0)} MiB)  stream ${s.retained.records}  rebuild ${sample.rebuildMs?.toFixed(0) ?? '-'} ms  reload cpu ${sample.reloadCpuMs?.toFixed(0) ?? '-'} ms ×${sample.reloads}  p50 ${sample.p50?.toFixed(1) ?? '-'} p99 ${sample.p99?.toFixed(1) ?? '-'} ms  failed ${sample.failed} ${JSON.stringify(sample.failedByStatus)}  load ${sample.loadAvg1.toFixed(1)}  swept ${s.housekeeping.rulesSwept ?? '?'}  trimmed ${s.housekeeping.streamRecordsTrimmed ?? '?'}  cpu ${sample.serverCpuPct.toFixed(0)} %  steal ${sample.stealPct?.toFixed(0) ?? '?'} %\n`)
  }
  await load
  adminStop = true
  await adminLoop
  slicing = false
  await slices
  // A slice still paused at the end closes with the run.
  if (!housekeeping && offBands.length > 0) offBands[offBands.length - 1]![1] = (performance.now() - t0) / 1000
  for (const deadline = Date.now() + 30_000; inflight > 0 && Date.now() < deadline;) await sleep(50)
  await tables.close()
  tell({ cmd: 'stop' })
  await new Promise((resolve) => child.once('exit', resolve))
  if (env.BENCH_SOAK_DIR === undefined) rmSync(base, { recursive: true, force: true })
  finish(samples, sent, offBands)
}

// ---------------------------------------------------------------- targets, results, chart

function finish (samples: Sample[], sent: Sent[], offBands: Array<[number, number]>): void {
  const name = MODE === 'on' ? 'soak' : 'soak-off'
  const ratios: Ratio[] = []
  const w1 = STEADY_S + RETENTION_S
  const w2 = STEADY_S + 2 * RETENTION_S
  const after = samples.filter((s) => s.t >= w2 && s.t < SLICES_FROM_S)
  // The level at the end of the first window: the median of the samples of its last retention
  // window; after the second, the median of the samples until the slices. A sample is one 30 s
  // interval's mean, and an interval's rebuilds vary with how many changes each one took (the
  // ingest is random) and what else had the cores: a slope moves the median, one sample does not.
  const before = samples.filter((s) => s.t > w1 - RETENTION_S && s.t <= w1)
  const plateau = (label: string, pick: (s: Sample) => number | null, scored = true): void => {
    const rs = before.map(pick).filter((v): v is number => v !== null)
    const xs = after.map(pick).filter((v): v is number => v !== null)
    if (rs.length === 0 || xs.length === 0) {
      ratios.push({ case: 'plateau', label: `${label}: not measured (no sample in the last ${RETENTION_S} s of the first retention window past steady state, to ${(w1 / 60).toFixed(1)} min, or between the second, at ${(w2 / 60).toFixed(1)} min, and the slices, at ${(SLICES_FROM_S / 60).toFixed(1)} min)`, value: NaN, target: '0.8–1.2', pass: scored ? false : undefined })
      return
    }
    const r = median(rs)
    const level = median(xs) / r
    ratios.push({ case: 'plateau', label: `${label}: median of ${xs.length} samples ${(w2 / 60).toFixed(1)}–${(SLICES_FROM_S / 60).toFixed(1)} min ÷ median of ${rs.length} samples ${((w1 - RETENTION_S) / 60).toFixed(1)}–${(w1 / 60).toFixed(1)} min`, value: level, target: '0.8–1.2', pass: scored ? Math.abs(level - 1) <= 0.2 : undefined })
    const worst = xs.reduce((a, b) => Math.abs(b / r - 1) > Math.abs(a / r - 1) ? b : a)
    ratios.push({ case: 'plateau (one sample)', label: `${label}: the furthest of those ${xs.length} samples ÷ the same median (for reference: one interval's noise)`, value: worst / r, target: '0.8–1.2', pass: undefined })
  }
  plateau('data directory size', (s) => s.dataDirBytes)
  plateau('feed rebuild time', (s) => s.rebuildMs)
  plateau('feed rule reload CPU per second (HTTP thread)', (s) => s.reloadCpuMsPerS)
  plateau('feed rule reload CPU per reload (HTTP thread; for reference, it varies with the reloads\' cadence)', (s) => s.reloadCpuMs, false)

  // Stored rules, where the sweep has been running for at least one interval (and grain).
  // An off band ends when the sweep resumed (to within the driver's 1 s tick).
  const resumedAt = (t: number): number => Math.max(0, ...offBands.filter(([, b]) => b <= t).map(([, b]) => b))
  const checked = samples.filter((s) => MODE === 'on' && s.housekeeping && s.t - resumedAt(s.t) >= INTERVAL_S + GRAIN_S && s.t >= EXPIRY_MIN)
  if (checked.length === 0) {
    ratios.push({ case: 'stored rules', label: 'stored ÷ (1.1 × live + one interval of lapses): not measured (no sample with the sweep on long enough)', value: NaN, target: '≤ 1', pass: false })
  } else {
    const worst = checked.map((s) => ({ s, r: s.storedRules / (1.1 * s.liveRules + s.lapsesPerSecond * INTERVAL_S) })).reduce((a, b) => b.r > a.r ? b : a)
    ratios.push({ case: 'stored rules', label: `stored ÷ (1.1 × live + ${INTERVAL_S} s of lapses), worst of ${checked.length} samples (at ${(worst.s.t / 60).toFixed(1)} min: ${worst.s.storedRules} stored, ${worst.s.liveRules} live, ${worst.s.lapsesPerSecond.toFixed(0)} lapses/s)`, value: worst.r, target: '≤ 1', pass: worst.r <= 1 })
  }

  const steady = sent.filter((x) => x.at >= SLICES_FROM_S && x.status === 200)
  const on = steady.filter((x) => x.housekeeping).map((x) => x.ms)
  const off = steady.filter((x) => !x.housekeeping).map((x) => x.ms)
  const rows: Row[] = []
  if (MODE === 'on' && on.length > 0 && off.length > 0) {
    const pOn = percentile(on, 99)
    const pOff = percentile(off, 99)
    rows.push({ case: 'ingest at steady state, slices with sweep and trim', subject: 'threatfeed', value: pOn, unit: 'ms p99', extra: { p50ms: percentile(on, 50), batches: on.length } })
    rows.push({ case: 'ingest at steady state, slices without', subject: 'threatfeed', value: pOff, unit: 'ms p99', extra: { p50ms: percentile(off, 50), batches: off.length } })
    // The target: per pair of adjacent slices (off, then the on slice after it), p99 on ÷ p99 off;
    // the median of the pairs, so that the VM's drift between minutes cancels.
    const pairs = offBands.filter(([a]) => a >= SLICES_FROM_S - 1).map(([a, b]) => {
      const offMs = steady.filter((x) => !x.housekeeping && x.at >= a && x.at < b).map((x) => x.ms)
      const onMs = steady.filter((x) => x.housekeeping && x.at >= b && x.at < b + SLICE_S).map((x) => x.ms)
      return { from: a, offP99: offMs.length > 0 ? percentile(offMs, 99) : NaN, onP99: onMs.length > 0 ? percentile(onMs, 99) : NaN, off: offMs.length, on: onMs.length }
    }).filter((p) => p.off >= MIN_SLICE_BATCHES && p.on >= MIN_SLICE_BATCHES)
    for (const p of pairs) rows.push({ case: `slice pair from ${(p.from / 60).toFixed(1)} min: off, then on`, subject: 'threatfeed', value: p.onP99 / p.offP99, unit: 'p99 on ÷ off', extra: { offP99ms: p.offP99, onP99ms: p.onP99, offBatches: p.off, onBatches: p.on } })
    if (pairs.length > 0) {
      const m = median(pairs.map((p) => p.onP99 / p.offP99))
      ratios.push({ case: 'ingest p99', label: `with sweep and trim ÷ without, median of ${pairs.length} adjacent ${SLICE_S} s slice pairs`, value: m, target: '≤ 1.2', pass: m <= 1.2 })
    } else {
      ratios.push({ case: 'ingest p99', label: 'with ÷ without: not measured (no whole slice pair at steady state)', value: NaN, target: '≤ 1.2', pass: false })
    }
    ratios.push({ case: 'ingest p99 (pooled)', label: `all on slices ÷ all off slices at steady state (for reference)`, value: pOn / pOff, target: '≤ 1.2', pass: undefined })
  } else if (MODE === 'on') {
    ratios.push({ case: 'ingest p99', label: 'with ÷ without: not measured (no slices at steady state)', value: NaN, target: '≤ 1.2', pass: false })
  }
  const all = sent.filter((x) => x.status === 200).map((x) => x.ms)
  const last = samples[samples.length - 1]
  rows.push({ case: 'whole run', subject: 'threatfeed', value: all.length === 0 ? NaN : percentile(all, 99), unit: 'ms p99', extra: { p50ms: all.length === 0 ? NaN : percentile(all, 50), batches: sent.length, failed: sent.length - all.length, finalDirMiB: (last?.dataDirBytes ?? 0) / 2 ** 20, finalStoredRules: last?.storedRules ?? 0, finalLiveRules: last?.liveRules ?? 0 } })
  if (MODE === 'off') {
    for (const r of ratios) { r.pass = undefined; r.label = `(sweep and trim off, for comparison) ${r.label}` }
  }
  // The journal is swept by the server itself, whatever the mode.
  ratios.push(...journalTargets(samples, { batchCap: BATCH_JOURNAL_MAX, batchesPerSecond: RATE / BATCH, windows: [w1, w2], adminEveryS: ADMIN_EVERY_S, auditMax: AUDIT_MAX, auditDays: AUDIT_DAYS }))

  const reproduce = [
    `BENCH_SOAK_MINUTES=${MINUTES} BENCH_SOAK_RETENTION=${RETENTION} BENCH_SOAK_SWEEP_INTERVAL=${INTERVAL} BENCH_SOAK_RATE=${RATE} BENCH_SOAK_EXPIRY=${EXPIRY_MIN}-${EXPIRY_MAX} BENCH_SOAK_SLICE_SECONDS=${SLICE_S} BENCH_SOAK_PLATEAU_SECONDS=${PLATEAU_S} BENCH_SOAK_BATCH_JOURNAL_MAX=${BATCH_JOURNAL_MAX} BENCH_SOAK_BATCH_JOURNAL_RETENTION=${BATCH_JOURNAL_RETENTION} BENCH_SOAK_MODE=on npm run bench soak`,
    `BENCH_SOAK_MINUTES=${MINUTES} BENCH_SOAK_RETENTION=${RETENTION} BENCH_SOAK_SWEEP_INTERVAL=${INTERVAL} BENCH_SOAK_RATE=${RATE} BENCH_SOAK_EXPIRY=${EXPIRY_MIN}-${EXPIRY_MAX} BENCH_SOAK_SLICE_SECONDS=${SLICE_S} BENCH_SOAK_PLATEAU_SECONDS=${PLATEAU_S} BENCH_SOAK_BATCH_JOURNAL_MAX=${BATCH_JOURNAL_MAX} BENCH_SOAK_BATCH_JOURNAL_RETENTION=${BATCH_JOURNAL_RETENTION} BENCH_SOAK_MODE=off npm run bench soak`,
  ]
  report(name, `Soak: ${RATE} entries/s for ${MINUTES} min, sweep and trim ${MODE}`, rows, ratios, {
    mode: MODE, minutes: MINUTES, retention: RETENTION, sweepInterval: INTERVAL, batchJournalMax: BATCH_JOURNAL_MAX, batchJournalRetention: BATCH_JOURNAL_RETENTION, rate: RATE, expirySeconds: [EXPIRY_MIN, EXPIRY_MAX], sampleSeconds: SAMPLE_S, sliceSeconds: SLICE_S, steadyStateSeconds: STEADY_S, slicesFromSeconds: SLICES_FROM_S,
    retentionWindowsEndSeconds: [w1, w2], offBands, reproduce, samples,
  })
  const svg = drawChart({
    title: `threatfeed soak: ${RATE} entries/s, expiries ${EXPIRY_MIN}–${EXPIRY_MAX} s, retention ${RETENTION}, sweep and trim ${MODE === 'on' ? `every ${INTERVAL}` : 'off'}`,
    xs: samples.map((s) => s.t),
    offBands,
    markers: [{ at: STEADY_S, label: 'steady' }, { at: w1, label: 'window 1' }, { at: w2, label: 'window 2' }, { at: SLICES_FROM_S, label: 'slices' }].filter((m) => m.at <= MINUTES * 60),
    panels: [
      { title: 'Data directory', unit: 'MiB on disk', series: [
        { label: 'total', color: '#000', values: samples.map((s) => s.dataDirBytes / 2 ** 20) },
        { label: 'rules env', color: '#1f77b4', values: samples.map((s) => s.mainEnvBytes / 2 ** 20) },
        { label: 'stream env', color: '#ff7f0e', values: samples.map((s) => s.streamEnvBytes / 2 ** 20) },
        { label: 'rules', color: '#2ca02c', values: samples.map((s) => ((s.tableBytes['access-rules'] ?? 0) + (s.tableBytes['access-by-target'] ?? 0)) / 2 ** 20) },
        { label: 'tombstones', color: '#9467bd', values: samples.map((s) => ((s.tableBytes['tombstone-log'] ?? 0) + (s.tableBytes['tombstones-by-target'] ?? 0)) / 2 ** 20) },
        { label: 'change log', color: '#8c564b', values: samples.map((s) => (s.tableBytes['access-changes'] ?? 0) / 2 ** 20) },
        { label: 'free pages', color: '#7f7f7f', values: samples.map((s) => s.freeBytes / 2 ** 20) },
      ] },
      { title: 'Admin journal (#22)', unit: 'entries', series: [
        { label: 'signal batches', color: '#1f77b4', values: samples.map((s) => s.journal.batch ?? 0) },
        { label: 'feed versions', color: '#ff7f0e', values: samples.map((s) => s.journal.feed_size ?? 0) },
        { label: 'audit lines', color: '#2ca02c', values: samples.map((s) => s.journal.audit ?? 0) },
        { label: `batch cap (${BATCH_JOURNAL_MAX})`, color: '#bbb', values: samples.map(() => BATCH_JOURNAL_MAX) },
      ] },
      { title: 'Rules and records', unit: 'count', series: [
        { label: 'stored rules', color: '#d62728', values: samples.map((s) => s.storedRules) },
        { label: 'live rules', color: '#2ca02c', values: samples.map((s) => s.liveRules) },
        { label: 'tombstones', color: '#9467bd', values: samples.map((s) => s.tombstones) },
        { label: 'stream records', color: '#ff7f0e', values: samples.map((s) => s.streamRecords) },
      ] },
      { title: 'Feed rebuild (rule reload to snapshot, /metrics)', unit: 'ms, mean per interval', series: [
        { label: 'rebuild', color: '#8c564b', values: samples.map((s) => s.rebuildMs) },
      ] },
      { title: 'Feed rule reload (HTTP thread CPU, mean per reload)', unit: 'ms', series: [
        { label: 'reload CPU', color: '#8c564b', values: samples.map((s) => s.reloadCpuMs) },
        { label: 'reload wall', color: '#bcbd22', values: samples.map((s) => s.reloadWallMs) },
      ] },
      { title: 'Feed rule reloads (HTTP thread CPU per second)', unit: 'ms/s', series: [
        { label: 'reload CPU', color: '#8c564b', values: samples.map((s) => s.reloadCpuMsPerS) },
      ] },
      { title: 'Ingest latency (1000-entry batch, from its scheduled send)', unit: 'ms per 30 s', series: [
        { label: 'p99', color: '#d62728', values: samples.map((s) => s.p99) },
        { label: 'p50', color: '#1f77b4', values: samples.map((s) => s.p50) },
      ] },
      { title: 'Server CPU', unit: '% of one core', series: [
        { label: 'all threads', color: '#555', values: samples.map((s) => s.serverCpuPct) },
        { label: 'HTTP thread', color: '#1f77b4', values: samples.map((s) => s.mainThreadCpuPct) },
      ] },
    ],
  })
  const svgFile = join(benchDir, 'results', `${name}.svg`)
  writeFileSync(svgFile, svg)
  process.stdout.write(`chart: ${svgFile}\nreproduce (on, then off for comparison):\n  ${reproduce.join('\n  ')}\n`)
}

// BENCH_SOAK_PROFILE=bursty: bursts instead of a steady rate (bench/soak/bursty.ts).
if (env.BENCH_SOAK_PROFILE === 'bursty') await import('./soak/bursty.js')
else await main()
