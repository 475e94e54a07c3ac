/**
 * Signal ingestion end to end: POST /v1/signal and /v2/signal with 1000-entry batches over HTTP
 * into the embedded store (LMDB flushed before every answer, one stream transaction per batch),
 * at concurrency 1, 4 and 16; entries/s accepted and applied (applied: until the consumer has
 * applied the last acknowledged record; the sustained rate is the slower of the two),
 * p50/p90/p99 batch latency, server CPU per entry, steal.
 *
 * Targets are random by default — distinct even IPv4 addresses scattered over 11.0.0.0/2, as a
 * detection pipeline reports scanners (post-batches.lua) — for every subject; `v1:4:seq` is the
 * same case with targets in sequence (each insert then lands beside the last). After every
 * measured run the bench checks that the store holds exactly one rule per acknowledged entry
 * (no two targets coalesce or collide) and reports any difference.
 *
 * The load comes from wrk (installed from Debian when missing), one thread, each connection
 * posting a fresh batch as soon as the last was answered (bench/ingest/post-batches.lua): a
 * client in C that leaves the machine's two cores to the server, where Node's fetch, generating
 * and posting the batches, took most of one (session 5: the same server showed a third more
 * entries/s under wrk). Every subject gets both cores and the same client.
 *
 * Anchors, raced in the same run: a bare uWS server that reads the body, JSON.parses it and
 * answers 200 — the HTTP floor, with no validation and no disk; and the durable floor
 * (ingest/serve-durable-floor.ts), which adds only what the spec's durability costs on uWS and
 * LMDB — the batch flushed to a stream before the 200, then applied to a keyed rules table with a
 * checkpoint, in the server's thread — and checks nothing. Then the CPU parts alone, to show
 * where the time goes: JSON.parse, Ajv validation, full normalization, the v1 raw-text split,
 * and the whole ingest pipeline with a stream that does not write.
 *
 * Target (issue 5): ≥ 100,000 entries/s with p99 ≤ 50 ms at concurrency 4 for v1 access rules.
 * Wall figures on a shared 2-core machine move with the load of other processes and with the
 * hypervisor, so each case also reports the server's own CPU time per batch (all its threads,
 * accepting and applying), the 1-minute load average, and the CPU steal during the measured runs
 * (/proc/stat; median of the rounds): this VM has shown 0 % in some minutes and over 80 % in
 * others, where every subject stalls for whole seconds.
 *
 * Environment: BENCH_INGEST_SECONDS (5 per run, after a 2 s warm-up), BENCH_INGEST_ROUNDS (3 runs
 * per case and subject, alternating; figures are medians), BENCH_INGEST_PROFILE=<dir>
 * (server --cpu-prof, every thread that exits cleanly; each measured run's span on the profiles'
 * clock, with the server's pid, is appended to <dir>/runs.jsonl), BENCH_INGEST_CASES=v1:4,v2:1
 * (only those cases; results then go to ingest-partial.json), BENCH_INGEST_CPU=0 (skip the
 * in-process CPU rows), BENCH_INGEST_SERVER_CORES=0|all (the servers' taskset; default all),
 * BENCH_INGEST_NODE_FLAGS (node flags for the threatfeed server), BENCH_INGEST_TARGETS=sequential
 * (every case with targets in sequence; a case named `v1:4:seq` does that for one case),
 * BENCH_INGEST_FLOOR=0 (no durable floor), BENCH_INGEST_HTTP_THREADS (the threatfeed server's
 * THREATFEED_HTTP_THREADS; default its own, the number of cores). Any other THREATFEED_ variable
 * reaches the server's config too (THREATFEED_BACKGROUND_NICE, …).
 *
 * The threatfeed server is started as `threatfeed serve` starts it (src/main.ts): front-end
 * threads take the connections and hand each signal to the main thread, the consumer applies on
 * its own thread, and with two or more front-end threads the background threads and the main
 * thread run at the background nice value — so the figures are those of the product as shipped.
 * Each case also reports the main thread's garbage collection per batch (count and pause time of
 * scavenges and of full collections).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { join } from 'node:path'
import { constants, PerformanceObserver } from 'node:perf_hooks'
import { createInterface } from 'node:readline'
import { benchServerEnv } from './lib/server-env.js'
import { baseNode, baseTree } from './lib/base.js'
import { cpuTicks, ensureCommand, hasCommand, median, repoDir, report, stealPercent, type Ratio, type Row } from './lib/report.js'
import type { StreamAppend } from '../src/store/types.js'

const SECONDS = Number(process.env.BENCH_INGEST_SECONDS ?? 5)
/** Rounds per case, subjects alternating within each; every figure is the median of the rounds. */
const ROUNDS = Number(process.env.BENCH_INGEST_ROUNDS ?? 3)
const WARMUP_SECONDS = 2
const WRK_SCRIPT = join(repoDir, 'bench', 'ingest', 'post-batches.lua')
const PROFILE = process.env.BENCH_INGEST_PROFILE ?? ''
const BATCH = 1000
/** `v1:4,v2:16,v1:4:seq` runs only those cases; the default is every api at c1, c4 and c16 with
 *  random targets, and v1 at c4 with sequential ones. */
const CASES = (process.env.BENCH_INGEST_CASES ?? '').split(',').filter((c) => c !== '')
const CPU_ROWS = process.env.BENCH_INGEST_CPU !== '0'
const SERVER_CORES = process.env.BENCH_INGEST_SERVER_CORES ?? 'all'
/** `0`: leave the durable floor out (it doubles the time of a run). */
const FLOOR = process.env.BENCH_INGEST_FLOOR !== '0'
/** `sequential`: every case's targets in sequence rather than random (see wrk). */
const ALL_SEQUENTIAL = process.env.BENCH_INGEST_TARGETS === 'sequential'
/** Another checkout of threatfeed (its path) raced as a fourth subject: the build before a change. */
const BASE = process.env.BENCH_INGEST_BASE ?? baseTree
/** Node flags of every server subject, space-separated: by default those `npm start` and the image
 *  run the server with (the young generation the README's "Node flags" gives it). */
const NODE_FLAGS = (process.env.BENCH_INGEST_NODE_FLAGS ?? '--max-semi-space-size=64').split(' ').filter((f) => f !== '')

// ---------------------------------------------------------------- server child (`--serve`)

async function serve (dataDir: string, anchor: boolean): Promise<void> {
  if (anchor) {
    const { default: uWS } = await import('uWebSockets.js')
    const app = uWS.App()
    const { readBody } = await import('./ingest/read-body.js')
    app.post('/*', (res) => {
      readBody(res, (body) => {
        const n = (JSON.parse(body.toString()) as unknown[]).length
        res.cork(() => res.writeHeader('Content-Type', 'application/json').end(`{"success":true,"message":"Processed ${n} entries, 0 failed"}`))
      })
    })
    app.listen('127.0.0.1', 0, (s) => { process.stdout.write(JSON.stringify({ port: uWS.us_socket_local_port(s as never), key: '' }) + '\n') })
    return
  }
  // The server as `threatfeed serve` starts it (src/main.ts runServer): every component, the
  // front-end threads (THREATFEED_HTTP_THREADS, default the number of cores) handing each signal
  // to the main thread, the consumer thread and the pool's workers at the background nice value,
  // and with front-end threads every other thread (the main thread, the runtime's own) niced too. Only the geo databases are
  // the test fixtures (the default ASN database is built on first start; v1 and v2 targets here
  // are addresses, which never consult it).
  const [{ loadConfig }, { createLogger }, { openStore }, { startServer }, { niceAllThreadsBut }, api, { DEFAULT_CONSUMER }, http] = await Promise.all([
    import('../src/config.js'), import('../src/log.js'), import('../src/store/open.js'), import('../src/main.js'), import('../src/pool/thread-priority.js'),
    import('../src/store/api-key.js'), import('../src/stream/consumer.js'), import('node:http'),
  ])
  const config = loadConfig({
    ...process.env,
    ...benchServerEnv(dataDir),
    ...(process.env.BENCH_INGEST_HTTP_THREADS === undefined ? {} : { THREATFEED_HTTP_THREADS: process.env.BENCH_INGEST_HTTP_THREADS }),
  })
  // The workspace and its key exist before the start, as in a deployment: a key created after it
  // is met by the reload of an unknown key, which is rate limited (the warm-up then gets 401s).
  const setup = await openStore({ kind: 'embedded', dataDir })
  const ws = await setup.workspaces.create({ name: 'bench', subscription: 'active' })
  const key = api.generateApiKey()
  await setup.keys.create({ workspaceId: ws.id, hash: api.hashApiKey(key), scopes: ['signals:write'] })
  await setup.close()
  const server = await startServer(config, createLogger(config.logLevel, process.stderr))
  // As `serve` does (src/main.ts): with front-end threads every other thread goes behind them.
  if (server.frontThreadIds.length > 0) niceAllThreadsBut(server.backgroundNice, new Set(server.frontThreadIds))
  const { store } = server
  const gc = watchGc()
  // The bench's own probes, on a port of their own (the server's routes are the product's):
  // /bench/lag, how far the consumer is behind the stream head (its checkpoint commits with the rules
  // it applied), with the server's own CPU time (every thread: a figure the other processes on
  // the machine cannot inflate, unlike wall time under a load average of 10) and its main
  // thread's GC; /bench/stored, the rules stored (every one is live: they expire in an hour).
  const probes = http.createServer((req, res) => {
    const answer = async (): Promise<unknown> => {
      if (req.url === '/bench/stored') return { stored: (await store.rules.accessRulesChangedSince(ws.id, Number.MAX_SAFE_INTEGER, Date.now(), () => {})).live }
      const head = await store.stream.head()
      const applied = await store.stream.getCheckpoint(DEFAULT_CONSUMER)
      const cpu = process.cpuUsage()
      return { head, applied, cpuMicros: cpu.user + cpu.system, gc }
    }
    void answer().then((body) => { res.setHeader('Content-Type', 'application/json').end(JSON.stringify(body)) }, (e: unknown) => { res.statusCode = 500; res.end(String(e)) })
  })
  await new Promise<void>((resolve) => { probes.listen(0, '127.0.0.1', resolve) })
  process.stdout.write(JSON.stringify({ port: server.port, probePort: (probes.address() as { port: number }).port, key }) + '\n')
  process.on('SIGTERM', () => { probes.close(); void server.stop().then(() => process.exit(0)) })
}

/** Garbage collections of the server's main thread so far, by kind: count and pause time (ms). */
interface GcTotals { scavenges: number, scavengeMs: number, fullGcs: number, fullGcMs: number }

/** GcTotals kept up to date from the main thread's 'gc' performance entries (as --trace-gc counts them). */
function watchGc (): GcTotals {
  const totals: GcTotals = { scavenges: 0, scavengeMs: 0, fullGcs: 0, fullGcMs: 0 }
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      // NODE_PERFORMANCE_GC_MINOR (1) is a scavenge; major, incremental and weak-callback passes are the old generation's.
      if ((e as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) {
        totals.scavenges++
        totals.scavengeMs += e.duration
      } else {
        totals.fullGcs++
        totals.fullGcMs += e.duration
      }
    }
  }).observe({ entryTypes: ['gc'] })
  return totals
}

// ---------------------------------------------------------------- driver

interface Server {
  readonly child: ChildProcess
  readonly port: number
  readonly key: string
  /** Where /bench/lag and /bench/stored are answered: a port of their own, or `port` (the floor, a base build). */
  readonly probePort: number
  /** Started with --cpu-prof (BENCH_INGEST_PROFILE). */
  readonly profiled: boolean
  /** Serial number of the next fresh target this server is sent (see post-batches.lua). */
  nextSerial: number
  /** Entries this server has acknowledged (200s × batch size), warm-ups included. */
  acknowledged: number
  /** Entries of the requests that may have been in flight when wrk stopped, since the last check. */
  inFlight: number
}

type Subject = 'threatfeed' | 'anchor' | 'durable floor'

function startServer (dataDir: string, subject: Subject, checkout = repoDir): Promise<Server> {
  const script = subject === 'durable floor' ? [join(repoDir, 'bench', 'ingest', 'serve-durable-floor.ts'), dataDir] : [join(checkout, 'bench', 'ingest.ts'), '--serve', dataDir, subject]
  const args = [...NODE_FLAGS, '--import=tsx', ...(PROFILE !== '' && subject === 'threatfeed' ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE}`] : []), ...script]
  const node = checkout === repoDir ? process.execPath : baseNode
  const argv = hasCommand('taskset') && SERVER_CORES !== 'all' ? ['taskset', '-c', SERVER_CORES, node, ...args] : [node, ...args]
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'], cwd: checkout })
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)))
    createInterface({ input: child.stdout! }).once('line', (line) => resolve({ child, profiled: PROFILE !== '' && subject === 'threatfeed', nextSerial: 0, acknowledged: 0, inFlight: 0, ...probeOf(JSON.parse(line) as { port: number, probePort?: number, key: string }) }))
  })
}

/** A server's first line: its port, its key, and the probes' port when they have one of their own. */
function probeOf (line: { port: number, probePort?: number, key: string }): { port: number, probePort: number, key: string } {
  return { port: line.port, probePort: line.probePort ?? line.port, key: line.key }
}

/** What post-batches.lua prints at the end of a wrk run. */
interface WrkResult {
  requests: number
  durationMicros: number
  errors: { connect: number, read: number, write: number, timeout: number }
  statuses: Record<string, number>
  p50Micros: number
  p90Micros: number
  p99Micros: number
  maxMicros: number
}

/**
 * One wrk run against `srv`: `concurrency` connections (one wrk thread) posting fresh batches
 * for `seconds`. Targets are never sent twice to a server (serials run on from its last run), so
 * every batch adds rules and the store grows as in production. Random targets (the default):
 * every insert dirties a B-tree page of its own; in sequence they land beside each other.
 */
async function wrk (srv: Server, api: 'v1' | 'v2', concurrency: number, seconds: number, random: boolean): Promise<WrkResult> {
  const env = {
    ...process.env,
    BENCH_WRK_API: api,
    BENCH_WRK_BATCH: String(BATCH),
    BENCH_WRK_START: String(srv.nextSerial),
    BENCH_WRK_RANDOM: random ? '1' : '0',
    BENCH_WRK_HEADERS: `Authorization: Bearer ${srv.key}\nContent-Type: application/json`,
  }
  const args = ['-t1', `-c${concurrency}`, `-d${seconds}s`, '--timeout', '10s', '-s', WRK_SCRIPT, `http://127.0.0.1:${srv.port}/`]
  const child = spawn('wrk', args, { env, stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => { out += d })
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  const line = out.split('\n').find((l) => l.startsWith('BENCHJSON '))
  if (code !== 0 || line === undefined) throw new Error(`wrk exited with ${code}: ${out.slice(0, 500)}`)
  const result = JSON.parse(line.slice('BENCHJSON '.length)) as WrkResult
  // Every request sent took a batch of serials, answered or not (one per connection may still
  // have been on its way when wrk stopped).
  srv.nextSerial += (result.requests + concurrency) * BATCH
  srv.acknowledged += (result.statuses['200'] ?? 0) * BATCH
  srv.inFlight += concurrency * BATCH
  return result
}

interface CaseResult {
  eps: number
  p50: number
  p90: number
  p99: number
  appliedEps: number | null
  /** Answers other than 200 (429 after the admission wait, 5xx), and socket errors or timeouts. */
  refused: number
  errors: number
  cpuMicrosPerBatch: number | null
  /** The main thread's garbage collection per batch: scavenges, their pause (ms), full collections and theirs. */
  gcPerBatch: GcTotals | null
  /** What share of the machine's CPU time the hypervisor took during the measured run (%). */
  steal: number | null
  /**
   * Rules stored less entries accepted (the stream head), after the run: 0 as it must be (null:
   * not checked). Accepted, not acknowledged: the batches in flight when wrk stops are made
   * durable and stored but their answers are not counted; storedRules checks that the difference
   * is no more than those.
   */
  storedLessAccepted: number | null
}

/**
 * A case: a warm-up run, then — from a consumer that has caught up — a measured run. Entries/s
 * counts what the server accepted (its stream head moved by that much; for the bare anchor, its
 * 200s); the applied rate runs until the consumer has applied all of it (the sustained rate is
 * the slower of the two).
 */
async function runCase (srv: Server, api: 'v1' | 'v2', concurrency: number, random: boolean): Promise<CaseResult> {
  await wrk(srv, api, concurrency, WARMUP_SECONDS, random)
  const before = await waitApplied(srv)
  const start = performance.now()
  const ticks = cpuTicks()
  const profiled = process.hrtime.bigint()
  const w = await wrk(srv, api, concurrency, SECONDS, random)
  const steal = stealPercent(ticks, cpuTicks())
  if (PROFILE !== '' && srv.profiled) {
    // The measured run's span on the monotonic clock the profiles' timestamps use (µs), so a
    // profile can be read for this run alone, without the start and the other cases.
    appendFileSync(join(PROFILE, 'runs.jsonl'), JSON.stringify({ case: `${api} c${concurrency}${random ? '' : ' seq'}`, pid: srv.child.pid, fromMicros: Number(profiled / 1000n), toMicros: Number(process.hrtime.bigint() / 1000n) }) + '\n')
  }
  const ended = await lag(srv)
  const after = await waitApplied(srv)
  const stored = await storedRules(srv, after?.head ?? 0)
  const seconds = w.durationMicros / 1e6
  const ok = w.statuses['200'] ?? 0
  const accepted = before === null || ended === null ? ok * BATCH : ended.head - before.head
  const errors = w.errors.connect + w.errors.read + w.errors.write + w.errors.timeout
  return {
    eps: accepted / seconds,
    p50: w.p50Micros / 1000,
    p90: w.p90Micros / 1000,
    p99: w.p99Micros / 1000,
    appliedEps: after === null ? null : accepted / ((after.at - start) / 1000),
    refused: w.requests - ok,
    errors,
    // Accepting and applying every batch, all threads of the server, lag polls included.
    cpuMicrosPerBatch: before === null || after === null || accepted === 0 ? null : (after.cpuMicros - before.cpuMicros) / (accepted / BATCH),
    gcPerBatch: before?.gc === undefined || after?.gc === undefined || accepted === 0 ? null : gcDelta(before.gc, after.gc, accepted / BATCH),
    steal,
    storedLessAccepted: stored === null || after === null ? null : stored - after.head,
  }
}

/** Rules the server has stored (after waitApplied: everything accepted); null for the anchor. */
async function storedRules (srv: Server, accepted: number): Promise<number | null> {
  if (srv.key === '') return null
  const res = await fetch(`http://127.0.0.1:${srv.probePort}/bench/stored`)
  if (!res.ok) return null // a base build from before the probe
  const { stored } = await res.json() as { stored: number }
  // At most the batches of the two runs' last requests (warm-up and measured) went unanswered.
  const unanswered = stored - srv.acknowledged
  if (stored !== accepted || unanswered < 0 || unanswered > srv.inFlight) {
    process.stderr.write(`bench/ingest: ${stored} rules stored for ${accepted} entries accepted, ${srv.acknowledged} acknowledged\n`)
  }
  srv.acknowledged = stored
  srv.inFlight = 0
  return stored
}

/** A steal share as reported: whole percent, '?' where the machine does not say. */
function pct (steal: number | null): string {
  return steal === null ? '?' : steal.toFixed(0)
}

/** Each figure's median over the rounds of a case. */
function medianCase (rounds: CaseResult[]): CaseResult & { runs: number[] } {
  const of = (pick: (c: CaseResult) => number | null): number | null => {
    const xs = rounds.map(pick).filter((x): x is number => x !== null)
    return xs.length === 0 ? null : median(xs)
  }
  return {
    eps: of((c) => c.eps)!,
    p50: of((c) => c.p50)!,
    p90: of((c) => c.p90)!,
    p99: of((c) => c.p99)!,
    appliedEps: of((c) => c.appliedEps),
    refused: of((c) => c.refused)!,
    errors: of((c) => c.errors)!,
    cpuMicrosPerBatch: of((c) => c.cpuMicrosPerBatch),
    gcPerBatch: rounds.every((c) => c.gcPerBatch !== null) ? { scavenges: of((c) => c.gcPerBatch!.scavenges)!, scavengeMs: of((c) => c.gcPerBatch!.scavengeMs)!, fullGcs: of((c) => c.gcPerBatch!.fullGcs)!, fullGcMs: of((c) => c.gcPerBatch!.fullGcMs)! } : null,
    steal: of((c) => c.steal),
    // The worst round, not the median: any difference is a fault.
    storedLessAccepted: rounds.some((c) => c.storedLessAccepted !== null) ? Math.max(...rounds.map((c) => Math.abs(c.storedLessAccepted ?? 0))) : null,
    runs: rounds.map((c) => c.eps),
  }
}

/** `gc` is absent from a base build's probe before it was added. */
interface Lag { head: number, applied: number, cpuMicros: number, gc?: GcTotals, at: number }

/** GC between two probes, per batch. */
function gcDelta (a: GcTotals, b: GcTotals, batches: number): GcTotals {
  return { scavenges: (b.scavenges - a.scavenges) / batches, scavengeMs: (b.scavengeMs - a.scavengeMs) / batches, fullGcs: (b.fullGcs - a.fullGcs) / batches, fullGcMs: (b.fullGcMs - a.fullGcMs) / batches }
}

/** The server's stream head, applied position and CPU time; null for the anchor, which has none. */
async function lag (srv: Server): Promise<Lag | null> {
  if (srv.key === '') return null
  const l = await (await fetch(`http://127.0.0.1:${srv.probePort}/bench/lag`)).json() as Omit<Lag, 'at'>
  return { ...l, at: performance.now() }
}

/** Waits until the consumer has applied the whole stream; null for the anchor. */
async function waitApplied (srv: Server): Promise<Lag | null> {
  for (;;) {
    const l = await lag(srv)
    if (l === null || l.applied >= l.head) return l
    await sleep(2)
  }
}

/** A 1000-entry batch of sequential targets, as post-batches.lua sends them. */
function makeBody (api: 'v1' | 'v2'): string {
  const entries: string[] = []
  for (let n = 0; n < BATCH; n++) {
    const ip = `11.0.${n >>> 8}.${n & 255}`
    entries.push(api === 'v1'
      ? `{"type":"access_rules","action":"block","ip":"${ip}","expiration":3600,"description":"scanner seen by sensor 7"}`
      : `{"kind":"access_rule","op":"upsert","expires_in":3600,"reason":"scanner seen by sensor 7","labels":{"source":"ids","confidence":"high"},"rule":{"target":{"ip":"${ip}"},"action":"block"}}`)
  }
  return `[${entries.join(',')}]`
}

/** The CPU parts of one batch, in process: µs per 1000-entry batch, median of 50 rounds. */
async function cpuRows (): Promise<Row[]> {
  const { normalizeV1 } = await import('../src/ingest/normalize-v1.js')
  const { normalizeV2 } = await import('../src/ingest/normalize-v2.js')
  const { checkSchema } = await import('../src/ingest/validators.js')
  const { splitJsonArray } = await import('../src/json/array-splitter.js')
  const { SignalIngester } = await import('../src/ingest/batch.js')
  const { appendCount } = await import('../src/store/whole-v1-batch.js')
  const checks = { asnExists: () => true, checkExpressions: true }
  const noStream = { append: async (input: StreamAppend) => Array.from({ length: appendCount(input) }, (_, i) => i + 1), read: async () => [], head: async () => 0, getCheckpoint: async () => 0, setCheckpoint: async () => {} }
  const ingester = new SignalIngester({ stream: noStream, checks })
  const rows: Row[] = []
  for (const api of ['v1', 'v2'] as const) {
    const body = makeBody(api)
    const entries = JSON.parse(body) as unknown[]
    const schema = api === 'v1' ? 'SignalEventV1' : 'SignalEnvelopeV2'
    const normalize = api === 'v1' ? normalizeV1 : normalizeV2
    const parts: Array<[string, () => unknown]> = [
      ['JSON.parse', () => JSON.parse(body)],
      ['Ajv validation alone', () => { for (const e of entries) checkSchema(schema, e, '') }],
      ['normalize (Ajv + targets + keys)', () => { for (const e of entries) normalize(e, checks) }],
      ...(api === 'v1' ? [['raw-text split (v1 stream records; off the request path unless an entry fails)', () => splitJsonArray(body)] as [string, () => unknown]] : []),
      ['whole pipeline, no disk', () => ingester.ingest(api, 'w', Buffer.from(body))],
    ]
    for (const [name, fn] of parts) {
      const runs: number[] = []
      for (let i = 0; i < 60; i++) {
        const t0 = performance.now()
        await fn()
        if (i >= 10) runs.push((performance.now() - t0) * 1000)
      }
      const us = median(runs)
      rows.push({ case: `cpu ${api}: ${name}`, subject: 'threatfeed', value: us, unit: 'µs/batch', runs, extra: { entriesPerSecond: Math.round(BATCH / (us / 1e6)) } })
    }
  }
  return rows
}

/** Cold start of the validators: standalone module vs. Ajv compiling the schemas at start. */
function startupRows (): Row[] {
  const script = (code: string): number => {
    const r = spawnSync(process.execPath, ['--import=tsx', '--input-type=module', '-e', code], { cwd: repoDir, encoding: 'utf8' })
    return Number(r.stdout.trim())
  }
  const standalone = `const t=performance.now(); await import('./src/ingest/generated/validators.ts'); console.log(performance.now()-t)`
  const compile = `const t=performance.now(); const {Ajv}=await import('ajv'); const {schemas}=await import('./src/ingest/schemas.ts'); const a=new Ajv({allowUnionTypes:true,messages:false}); for (const s of Object.values(schemas)) a.compile(s); console.log(performance.now()-t)`
  const runs = { standalone: [] as number[], compile: [] as number[] }
  for (let i = 0; i < 3; i++) { runs.standalone.push(script(standalone)); runs.compile.push(script(compile)) }
  return [
    { case: 'validators at start', subject: 'standalone (generated)', value: median(runs.standalone), unit: 'ms', runs: runs.standalone },
    { case: 'validators at start', subject: 'Ajv import + compile', value: median(runs.compile), unit: 'ms', runs: runs.compile },
  ]
}

/** Accepted and applied: the slower of the two. */
function sustained (c: CaseResult): number {
  return Math.min(c.eps, c.appliedEps ?? c.eps)
}

/** A server subject's figures as the table shows them. */
function serverExtra (c: CaseResult): Record<string, string | number> {
  const cpu = c.cpuMicrosPerBatch
  return {
    p50ms: c.p50,
    p90ms: c.p90,
    p99ms: c.p99,
    appliedPerSecond: Math.round(c.appliedEps ?? 0),
    serverCpuMicrosPerEntry: cpu === null ? '?' : Number((cpu / BATCH).toFixed(2)),
    ...(c.gcPerBatch === null ? {} : { gcPerBatch: `${c.gcPerBatch.scavenges.toFixed(2)} scavenges ${c.gcPerBatch.scavengeMs.toFixed(2)} ms, ${c.gcPerBatch.fullGcs.toFixed(3)} full ${c.gcPerBatch.fullGcMs.toFixed(2)} ms` }),
    stealPct: pct(c.steal),
  }
}

interface BenchCase { api: 'v1' | 'v2', concurrency: number, random: boolean }

/** BENCH_INGEST_CASES (`v1:4`, `v1:4:seq`) or the default: every api at 1, 4 and 16 in flight with
 *  random targets, then v1 at 4 in sequence. */
function benchCases (): BenchCase[] {
  const names = CASES.length > 0 ? CASES : ['v1:1', 'v1:4', 'v1:16', 'v2:1', 'v2:4', 'v2:16', 'v1:4:seq']
  return names.map((n) => {
    const [api, c, order] = n.split(':')
    if ((api !== 'v1' && api !== 'v2') || !/^[0-9]+$/.test(c ?? '') || (order !== undefined && order !== 'seq')) throw new Error(`BENCH_INGEST_CASES: ${n} is not api:concurrency[:seq]`)
    return { api, concurrency: Number(c), random: order === undefined && !ALL_SEQUENTIAL }
  })
}

async function main (): Promise<void> {
  if (!ensureCommand('wrk', 'wrk')) {
    process.stderr.write('bench/ingest: the HTTP cases need wrk (apt-get install wrk); only the in-process rows are measured\n')
  }
  const http = hasCommand('wrk')
  const dir = mkdtempSync(join(tmpdir(), 'tf-bench-ingest-'))
  const rows: Row[] = []
  const ratios: Ratio[] = []
  const tf = http ? await startServer(join(dir, 'data'), 'threatfeed') : null
  const base = http && BASE !== '' ? await startServer(join(dir, 'base'), 'threatfeed', BASE) : null
  const anchor = http ? await startServer(join(dir, 'anchor'), 'anchor') : null
  const floor = http && FLOOR ? await startServer(join(dir, 'floor'), 'durable floor') : null
  try {
    for (const { api, concurrency, random } of benchCases()) {
      if (tf === null || anchor === null) break
      // Subjects alternate within each round so that machine drift hits them alike; a round the
      // hypervisor stole from moves the median of three less than it moves one run.
      const name = `HTTP ${api} c${concurrency}${random ? '' : ' sequential'}`
      const rounds: Array<{ a: CaseResult, f: CaseResult | null, b: CaseResult | null, r: CaseResult }> = []
      for (let round = 0; round < ROUNDS; round++) {
        process.stderr.write(`bench/ingest: ${name}, round ${round + 1} of ${ROUNDS}\n`)
        // The order rotates round by round, so a drift of the machine does not always hit one subject.
        const subjects = [anchor, floor, base, tf].filter((s) => s !== null)
        const got = new Map<Server, CaseResult>()
        for (let i = 0; i < subjects.length; i++) {
          const s = subjects[(i + round) % subjects.length]!
          got.set(s, await runCase(s, api, concurrency, random))
        }
        rounds.push({ a: got.get(anchor)!, f: floor === null ? null : got.get(floor)!, b: base === null ? null : got.get(base)!, r: got.get(tf)! })
      }
      const a = medianCase(rounds.map((x) => x.a))
      const f = floor === null ? null : medianCase(rounds.map((x) => x.f!))
      const b = base === null ? null : medianCase(rounds.map((x) => x.b!))
      const r = medianCase(rounds.map((x) => x.r))
      rows.push({ case: name, subject: 'threatfeed', value: r.eps, unit: 'entries/s', runs: r.runs, extra: { ...serverExtra(r), refused: r.refused, socketErrors: r.errors, load1: loadavg()[0]!.toFixed(1) } })
      if (b !== null) rows.push({ case: name, subject: `threatfeed at ${BASE}`, value: b.eps, unit: 'entries/s', runs: b.runs, extra: { ...serverExtra(b), refused: b.refused, socketErrors: b.errors } })
      rows.push({ case: name, subject: 'bare uWS + JSON.parse', value: a.eps, unit: 'entries/s', runs: a.runs, extra: { p50ms: a.p50, p90ms: a.p90, p99ms: a.p99, stealPct: pct(a.steal) } })
      if (f !== null) rows.push({ case: name, subject: 'durable floor (uWS + LMDB)', value: f.eps, unit: 'entries/s', runs: f.runs, extra: serverExtra(f) })
      ratios.push({ case: name, label: 'threatfeed / bare uWS entries/s', value: r.eps / a.eps })
      if (f !== null) ratios.push({ case: name, label: 'threatfeed / durable floor entries/s', value: r.eps / f.eps })
      if (b !== null) ratios.push({ case: name, label: 'threatfeed / base build, sustained entries/s', value: sustained(r) / sustained(b) })
      if (r.storedLessAccepted !== null) ratios.push({ case: name, label: 'rules stored − entries accepted (worst round)', value: r.storedLessAccepted, target: '= 0', pass: r.storedLessAccepted === 0 })
      if (concurrency === 4) {
        // Issue 17: random v1 ≥ 100k/s with p99 ≤ 80 ms, v2 ≥ 60k/s; issue 5: sequential v1 p99 ≤ 50 ms.
        const goal = api === 'v1' ? 100_000 : 60_000
        const p99 = random ? 80 : 50
        ratios.push({ case: name, label: `sustained entries/s ÷ ${goal.toLocaleString('en')} (accepted and applied)`, value: sustained(r) / goal, target: '≥ 1', pass: sustained(r) >= goal })
        if (api === 'v1') ratios.push({ case: name, label: `p99 batch latency ÷ ${p99} ms`, value: r.p99 / p99, target: '≤ 1', pass: r.p99 <= p99 })
        if (f !== null) {
          // The same two figures for the floor, which applies in its server's thread.
          ratios.push({ case: name, label: `durable floor: sustained entries/s ÷ ${goal.toLocaleString('en')}`, value: sustained(f) / goal })
          ratios.push({ case: name, label: `durable floor: p99 batch latency ÷ ${p99} ms`, value: f.p99 / p99 })
        }
      }
    }
  } finally {
    // Stopped, not killed: a server started with --cpu-prof writes its profiles as it exits.
    tf?.child.kill('SIGTERM')
    base?.child.kill('SIGTERM')
    anchor?.child.kill('SIGKILL')
    floor?.child.kill('SIGKILL')
    // One that already exited (its 'exit' came before this line) is not waited for: waiting
    // would leave nothing for the event loop to do, and Node ends the bench with code 13.
    for (const s of [tf, base]) {
      if (s === null) continue
      if (s.child.exitCode === null && s.child.signalCode === null) await new Promise((resolve) => s.child.once('exit', resolve))
      if (s.child.exitCode !== null && s.child.exitCode !== 0) process.stderr.write(`bench/ingest: a server exited with ${s.child.exitCode}\n`)
    }
    rmSync(dir, { recursive: true, force: true })
  }
  if (CPU_ROWS) rows.push(...await cpuRows(), ...startupRows())
  report(CASES.length > 0 || !CPU_ROWS || ALL_SEQUENTIAL || BASE !== '' || !http ? 'ingest-partial' : 'ingest', 'Signal ingestion: HTTP end to end into LMDB (durable), 1000-entry batches', rows, ratios, { secondsPerRun: SECONDS, roundsPerCase: ROUNDS, client: http ? 'wrk, 1 thread' : null, serverCores: SERVER_CORES, batchSize: BATCH, targets: ALL_SEQUENTIAL ? 'sequential' : 'random (cases marked sequential: in sequence)', loadAverage: loadavg().map((l) => Number(l.toFixed(2))) })
}

if (process.argv[2] === '--serve') await serve(process.argv[3]!, process.argv[4] === 'anchor')
else await main()
