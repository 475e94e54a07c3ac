/**
 * bench/bigws: does a big workspace stall everyone? A workspace of BIGWS_RULES access rules
 * (default 2,000,000, loaded straight through the store API) under ingest of 1,000 changes a
 * second, while an open-loop client polls a *different*, small workspace's feed at a fixed
 * 2,000 polls/s. Latency is measured from each poll's scheduled send time, so queueing behind a
 * held thread is counted, not hidden; polls sent before the big feed's first build is served (it
 * loads at start-up) are reported apart from those across its ten rebuilds. A run lasts until the big feed was rebuilt ten times (its
 * ETag changed ten times) or BIGWS_MAX_S passed. Also reported: the server's peak RSS and the
 * time from spawn to the first answered poll.
 *
 * The big feed is a list selecting every rule with its entry cap raised above the workspace's
 * size (the workspace feed's default cap, 131,072, would answer 413 past it). Both feeds are
 * recorded as fetched in the fixture, so a start builds them before ready — the start-up of a
 * server whose users poll: the small feed must answer while the big one loads.
 *
 * With BIGWS_BASE=<dir of another checkout, its node_modules installed> the same run is made
 * against that build too, alternating (BIGWS_ROUNDS rounds each), on copies of one data directory.
 * The fixture is then written as format 5 (the change log of format 6 dropped; nothing else
 * differs for what the fixture holds), which a format-5 build reads and this build upgrades in
 * place at its start. Also reported: each signal POST's time to its answer (acknowledgement), and
 * how many were not 202 — the first write after a start builds the consumer's identity map.
 * BIGWS_CPU_PROF=<dir> writes each server's CPU profile there (node --cpu-prof). Beside the polls'
 * latency, the client's own lateness: how late it sent them (its timer, its GC, the cores). The
 * polls are sent by a process that does nothing else — bench/bigws/poller.c, built with `cc` when
 * the bench starts (BIGWS_CLIENT=node, or no compiler: the same client in Node, poller.ts) — at a
 * real-time priority when chrt allows (BIGWS_CLIENT_RT=0: not); the ingest and the watch of the
 * big feed (with If-None-Match, as a poller of it would) stay in this one.
 *
 *   npm run bench bigws
 *   BIGWS_RULES=500000 BIGWS_BASE=/tmp/tf-base npm run bench bigws
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { Pool } from 'undici'
import { hashApiKey } from '../src/store/api-key.js'
import { open } from 'lmdb'
import { openStore } from '../src/store/open.js'
import { ensureDefaultAsnDb } from '../src/geo/default-db.js'
import type { AccessRuleInput } from '../src/store/types.js'
import type { PollerResult } from './bigws/poller.js'
import { buildCPoller } from './lib/c-poller.js'
import { cpuTicks, median, percentile, repoDir, report, stealPercent, type Row } from './lib/report.js'

const RULES = Number(process.env.BIGWS_RULES ?? 2_000_000)
const POLLS_PER_S = 2000
const CHANGES_PER_S = 1000
const REBUILDS = 10
const MAX_S = Number(process.env.BIGWS_MAX_S ?? 300)
const ROUNDS = Number(process.env.BIGWS_ROUNDS ?? 1)
const REBUILD_MS = 3000
const BASE = process.env.BIGWS_BASE
const CPU_PROF = process.env.BIGWS_CPU_PROF
const CLIENT_RT = process.env.BIGWS_CLIENT_RT !== '0'
const CLIENT = process.env.BIGWS_CLIENT
/** A poll slower than the target p99.9, and how late the client must have sent it to share the blame, ms. */
const SLOW_MS = 5
const LATE_MS = 2

interface Fixture { dir: string, big: string, small: string, bigKey: string, smallKey: string, bigList: string }

function ipOf (n: number): string {
  return `${(n >>> 24) & 255}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`
}

/** The data directory every run copies: the big workspace, the small one, a key each. */
async function makeFixture (): Promise<Fixture> {
  const dir = mkdtempSync(join(tmpdir(), 'bigws-'))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const big = (await store.workspaces.create({ name: 'big', subscription: 'active' })).id
  const small = (await store.workspaces.create({ name: 'small', subscription: 'active' })).id
  const bigKey = `tf_${randomBytes(16).toString('hex')}`
  const smallKey = `tf_${randomBytes(16).toString('hex')}`
  await store.keys.create({ workspaceId: big, hash: hashApiKey(bigKey), scopes: ['signals:write', 'feeds:read'] })
  await store.keys.create({ workspaceId: small, hash: hashApiKey(smallKey), scopes: ['feeds:read'] })
  // Seq 0: below every stream position, as if written before the stream began. Rules with seqs
  // above the stream's head would hide the signals ingested later from the rule cache's
  // catch-up (it reads rules with a seq above the last it saw), making every rebuild a reload.
  const input = (ws: string, n: number): AccessRuleInput => ({
    workspaceId: ws, kind: 'access_rule', ruleRef: null, target: { type: 'ip', value: `${ipOf(n)}/32` }, action: 'block',
    name: null, confidence: null, severity: null, labels: {}, reason: null, expiresAt: null, seq: 0,
  })
  const started = performance.now()
  const BATCH = 10_000
  // 10.0.0.0 upwards, every other address: no two coalesce, so the feed has RULES networks.
  for (let i = 0; i < RULES; i += BATCH) {
    const ops = []
    for (let k = i; k < Math.min(RULES, i + BATCH); k++) ops.push({ op: 'upsertAccessRule' as const, input: input(big, 0x0a000000 + 2 * k) })
    await store.applyRuleBatch({ ops })
  }
  for (let k = 0; k < 100; k++) await store.rules.upsertAccessRule(input(small, 0xc0000200 + 2 * k))
  const bigList = (await store.lists.create({ workspaceId: big, name: 'everything', description: '', selector: {}, defaults: { maxEntries: 4 * RULES + 1_000_000 } })).id
  await store.feedVersions.recordFetches([{ workspaceId: big, listId: bigList, at: Date.now() }, { workspaceId: small, listId: '*', at: Date.now() }])
  await store.close()
  if (BASE !== undefined) {
    const raw = open({ path: dir, noSubdir: false, maxDbs: 24, overlappingSync: false })
    await raw.openDB('access-changes', { encoding: 'binary' }).drop()
    await raw.openDB('meta', { encoding: 'json' }).put('format', 5)
    await raw.close()
  }
  // A restart finds the default ASN database built by the first start; the runs measure a restart.
  await ensureDefaultAsnDb(dir)
  console.log(`fixture: ${RULES} rules loaded in ${((performance.now() - started) / 1000).toFixed(1)} s`)
  return { dir, big, small, bigKey, smallKey, bigList }
}

function rssMiB (pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m === null ? 0 : Number(m[1]) / 1024
}

function startServer (root: string, dataDir: string, port: number): ChildProcess {
  const prof = CPU_PROF === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`]
  return spawn(process.execPath, [...prof, '--import=tsx', join(root, 'src/cli/run.ts'), 'serve'], {
    cwd: root,
    env: { ...process.env, HOST: '127.0.0.1', PORT: String(port), THREATFEED_DATA_DIR: dataDir, THREATFEED_LOG_LEVEL: 'warn', THREATFEED_FEED_REBUILD_MS: String(REBUILD_MS), THREATFEED_RATE_LIMIT_RPS: '1000000', THREATFEED_RATE_LIMIT_BURST: '1000000' },
    stdio: ['ignore', 'inherit', 'inherit'],
  })
}

/** The open-loop poller a run uses: BIGWS_CLIENT=c (the default when `cc` builds it) or node. */
interface Poller {
  /** Resolves once its connections are open and warm; the measured part begins. */
  readonly ready: Promise<void>
  stop (): Promise<PollerResult>
}

/** bench/bigws/poller.c built once per bench run (null: no C compiler, or BIGWS_CLIENT=node). */
const cPoller: string | null = (() => {
  if (CLIENT === 'node') return null
  const bin = buildCPoller()
  if (bin !== null) return bin
  if (CLIENT === 'c') throw new Error('BIGWS_CLIENT=c: bench/bigws/poller.c did not build')
  console.log('bigws: no C compiler; polling with the Node client (bench/bigws/poller.ts)')
  return null
})()

/**
 * The open-loop poller (bench/bigws/poller.c, or poller.ts), at a real-time priority when chrt
 * may give it one (BIGWS_CLIENT_RT=0: at the bench's own): woken on time while the server keeps
 * both cores busy, so that a late poll is the server's. It uses a few per cent of a core.
 */
function startPoller (port: number, key: string): Poller {
  const rt = CLIENT_RT && spawnSync('chrt', ['-f', '1', 'true']).status === 0
  const withRt = (argv: string[]): [string, string[]] => rt ? ['chrt', ['-f', '1', ...argv]] : [argv[0]!, argv.slice(1)]
  const failed = (child: ChildProcess, when: string): Promise<never> => new Promise((_resolve, reject) => {
    child.once('exit', (code) => { reject(new Error(`poller exited with ${code} ${when}`)) })
  })
  if (cPoller !== null) {
    const outFile = join(dirname(cPoller), `polls-${port}.bin`)
    const [cmd, argv] = withRt([cPoller, String(port), key, String(POLLS_PER_S), outFile])
    const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'inherit'] })
    const lines = createInterface({ input: child.stdout! })
    const line = (want: string): Promise<void> => new Promise((resolve) => { lines.on('line', (l) => { if (l === want) resolve() }) })
    const ready = Promise.race([line('ready'), failed(child, 'before it was ready')])
    const done = line('done')
    return {
      ready,
      stop: async () => {
        child.kill('SIGUSR1')
        await Promise.race([done, failed(child, 'before its results')])
        const bytes = readFileSync(outFile)
        rmSync(outFile)
        const n = Number(bytes.readBigUInt64LE(0))
        const errors = Number(bytes.readBigInt64LE(8))
        const triples = new Float64Array(bytes.buffer.slice(bytes.byteOffset + 16, bytes.byteOffset + 16 + n * 24))
        const [scheduledAt, latencyMs, sendLagMs] = [0, 1, 2].map((k) => Float64Array.from({ length: n }, (_, i) => triples[3 * i + k]!))
        return { scheduledAt: scheduledAt!, latencyMs: latencyMs!, sendLagMs: sendLagMs!, errors }
      },
    }
  }
  const [cmd, argv] = withRt([process.execPath, '--import=tsx', join(repoDir, 'bench/bigws/poller.ts'), String(port), key, String(POLLS_PER_S)])
  const child = spawn(cmd, argv, { cwd: repoDir, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' })
  const message = <T>(): Promise<T> => new Promise((resolve) => { child.once('message', (m) => { resolve(m as T) }) })
  const ready = Promise.race([message<unknown>().then(() => {}), failed(child, 'before it was ready')])
  return {
    ready,
    stop: async () => {
      const result = message<PollerResult>()
      child.send('stop')
      return await Promise.race([result, failed(child, 'before its results')])
    },
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => { setTimeout(resolve, ms) })

interface RunResult {
  p50: number
  p99: number
  p999: number
  max: number
  polls: number
  errors: number
  rebuilds: number
  startupMs: number
  /** Spawn to the big feed's first 200. */
  bigReadyMs: number
  /** Polls sent while the big feed loaded (its first build, at start-up): p99.9 and max, ms. */
  loadingP999: number
  loadingMax: number
  loadingPolls: number
  peakRssMiB: number
  seconds: number
  /** Server CPU (user + system) per answered poll of the measured part, µs: includes ingest and rebuilds. */
  cpuPerPollUs: number
  /** CPU of the server's main thread (the one answering polls) per big-feed rebuild, ms: polls and ingest included, the same in every build. */
  mainCpuPerRebuildMs: number
  /** Machine CPU steal during the measured part, %. */
  steal: number | null
  /** The worst quarter-seconds: [seconds since spawn at the scheduled send, worst latency ms]. */
  worst: Array<[number, number]>
  /**
   * The client's own share of the tail: how late it sent polls (its timer or GC held it) —
   * p99.9 of send time minus scheduled time, ms — and of the polls over SLOW_MS, how many it
   * sent more than LATE_MS late (a slow poll the server could not have caused alone).
   */
  sendLagP999: number
  /**
   * p99.9 of each poll's latency less its send lag: from the client's send call to the answer
   * (undici's queue and the client's reading of the answer still in it). For reference only: the
   * target counts from the scheduled time.
   */
  fromSendP999: number
  slowPolls: number
  slowSentLate: number
  /** Signal POSTs: time to their answer, p99 and max, ms, and how many were not answered 200 (SPEC: a batch whose entries all succeeded is 200). */
  ackP99: number
  ackMax: number
  ackFailed: number
}

/** utime + stime of a process, or of its main thread, ms (from /proc; clock ticks of 10 ms). */
function cpuMs (pid: number, mainThread = false): number {
  const fields = readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10
}

async function run (name: string, root: string, fx: Fixture, port: number): Promise<RunResult> {
  const dataDir = mkdtempSync(join(tmpdir(), `bigws-${name}-`))
  cpSync(fx.dir, dataDir, { recursive: true })
  const spawned = performance.now()
  const server = startServer(root, dataDir, port)
  let peakRss = 0
  const rssTimer = setInterval(() => { try { peakRss = Math.max(peakRss, rssMiB(server.pid!)) } catch { /* exited */ } }, 200)
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 32, pipelining: 1, keepAliveTimeout: 60_000 })
  const small = { path: '/v1/threat/feeds', method: 'GET' as const, headers: { authorization: `Bearer ${fx.smallKey}` } }
  const big = { path: `/v1/threat/feeds/${fx.bigList}`, method: 'GET' as const, headers: { authorization: `Bearer ${fx.bigKey}` } }
  try {
    // Start-up: spawn to the first 200 of the small feed.
    let startupMs = NaN
    for (;;) {
      try {
        const r = await pool.request(small)
        await r.body.dump()
        if (r.statusCode === 200) { startupMs = performance.now() - spawned; break }
      } catch { /* not listening yet */ }
      if (performance.now() - spawned > 600_000) throw new Error(`${name}: no answer in 10 minutes`)
      await sleep(20)
    }
    // The big feed is wanted (built, then rebuilt as its rules change). Its first 200 sets the
    // ETag; each later new ETag is one rebuild. Polls of the small feed run all along.
    let bigEtag: string | null = null
    let bigReadyMs = NaN
    let rebuilds = 0
    let watching = false
    const watchBig = async (): Promise<void> => {
      if (watching) return
      watching = true
      try {
        // As a poller of the big feed would: its body only when it changed.
        const headers = bigEtag === null ? big.headers : { ...big.headers, 'if-none-match': bigEtag }
        const r = await pool.request({ ...big, headers, headersTimeout: 600_000, bodyTimeout: 600_000 })
        await r.body.dump()
        const etag = String(r.headers.etag ?? '')
        if (r.statusCode !== 200) return
        if (bigEtag === null) bigReadyMs = performance.now() - spawned
        else if (etag !== bigEtag) rebuilds++
        bigEtag = etag
      } catch { /* the next watch asks again */ } finally {
        watching = false
      }
    }
    void watchBig()
    // Ingest: 100 changes every 100 ms into the big workspace.
    let n = 0
    const acks: number[] = []
    let ackFailed = 0
    const ingest = setInterval(() => {
      const entries = []
      for (let k = 0; k < CHANGES_PER_S / 10; k++) entries.push({ type: 'access_rules', action: 'block', ip: ipOf(0x64400000 + 2 * (n++)) })
      const sentAt = performance.now()
      pool.request({ path: '/v1/signal', method: 'POST', headers: { authorization: `Bearer ${fx.bigKey}`, 'content-type': 'application/json' }, body: JSON.stringify(entries) })
        .then(async (r) => {
          await r.body.dump()
          acks.push(performance.now() - sentAt)
          if (r.statusCode !== 200) ackFailed++
        }, () => { ackFailed++ })
    }, 100)
    const bigTimer = setInterval(() => { void watchBig() }, 500)
    // Open loop in a process of its own (bench/bigws/poller.c or .ts): poll i is due at t0 + i /
    // POLLS_PER_S, whatever the answers before it did. Polls sent before the big feed's first 200
    // (it loads at start-up) are reported apart: the targets are across its ten rebuilds.
    const poller = startPoller(port, fx.smallKey)
    await poller.ready
    const cpu0 = cpuMs(server.pid!)
    const main0 = cpuMs(server.pid!, true)
    const ticks0 = cpuTicks()
    const t0 = performance.now()
    while (rebuilds < REBUILDS && performance.now() - t0 <= MAX_S * 1000) await sleep(50)
    const polled = await poller.stop()
    const latencies: number[] = []
    const loading: number[] = []
    const sendLags: number[] = []
    const fromSend: number[] = []
    let slowPolls = 0
    let slowSentLate = 0
    /** Worst latency per quarter-second of scheduled send time, since spawn. */
    const quarters = new Map<number, number>()
    const spawnedAt = performance.timeOrigin + spawned
    for (let i = 0; i < polled.latencyMs.length; i++) {
      const ms = polled.latencyMs[i]!
      const lag = polled.sendLagMs[i]!
      const sinceSpawn = polled.scheduledAt[i]! - spawnedAt
      if (Number.isNaN(bigReadyMs) || sinceSpawn < bigReadyMs) loading.push(ms)
      else {
        latencies.push(ms)
        sendLags.push(lag)
        fromSend.push(ms - lag)
        if (ms > SLOW_MS) {
          slowPolls++
          if (lag > LATE_MS) slowSentLate++
        }
      }
      const q = Math.floor(sinceSpawn / 250)
      if (ms > (quarters.get(q) ?? 0)) quarters.set(q, ms)
    }
    const errors = polled.errors
    clearInterval(ingest)
    clearInterval(bigTimer)
    const seconds = (performance.now() - t0) / 1000
    const cpuPerPollUs = (cpuMs(server.pid!) - cpu0) * 1000 / Math.max(1, latencies.length)
    const mainCpuPerRebuildMs = (cpuMs(server.pid!, true) - main0) / Math.max(1, rebuilds)
    const steal = stealPercent(ticks0, cpuTicks())
    latencies.sort((a, b) => a - b)
    loading.sort((a, b) => a - b)
    const worst = [...quarters].sort((a, b) => b[1] - a[1]).slice(0, 8).map(([q, ms]): [number, number] => [q / 4, Math.round(ms)])
    acks.sort((a, b) => a - b)
    sendLags.sort((a, b) => a - b)
    fromSend.sort((a, b) => a - b)
    return {
      p50: median(latencies), p99: percentile(latencies, 99), p999: percentile(latencies, 99.9), max: latencies[latencies.length - 1] ?? NaN, polls: latencies.length, errors, rebuilds, startupMs, bigReadyMs, loadingP999: percentile(loading, 99.9), loadingMax: loading[loading.length - 1] ?? NaN, loadingPolls: loading.length, peakRssMiB: peakRss, seconds, cpuPerPollUs, mainCpuPerRebuildMs, steal, worst,
      sendLagP999: percentile(sendLags, 99.9), fromSendP999: percentile(fromSend, 99.9), slowPolls, slowSentLate,
      ackP99: percentile(acks, 99), ackMax: acks[acks.length - 1] ?? NaN, ackFailed,
    }
  } finally {
    clearInterval(rssTimer)
    await pool.close().catch(() => {})
    server.kill('SIGTERM')
    await new Promise((resolve) => { server.once('exit', resolve); setTimeout(resolve, 10_000) })
    rmSync(dataDir, { recursive: true, force: true })
  }
}

if (CPU_PROF !== undefined) mkdirSync(CPU_PROF, { recursive: true })
const fx = await makeFixture()
const subjects: Array<{ name: string, root: string }> = [{ name: 'this build', root: repoDir }]
if (BASE !== undefined) subjects.unshift({ name: 'before', root: BASE })
const results = new Map<string, RunResult[]>(subjects.map((s) => [s.name, []]))
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of subjects) {
      const r = await run(s.name, s.root, fx, 18_000 + Math.floor(Math.random() * 2000))
      console.log(`${s.name}: ${JSON.stringify(r)}`)
      results.get(s.name)!.push(r)
    }
  }
} finally {
  rmSync(fx.dir, { recursive: true, force: true })
}
const rows: Row[] = []
for (const [subject, rs] of results) {
  const worst = (f: (r: RunResult) => number): number => Math.max(...rs.map(f))
  const c = `${RULES} rules, ${CHANGES_PER_S} changes/s; small feed at ${POLLS_PER_S} polls/s`
  rows.push({ case: c, subject: `${subject}: poll p99.9`, value: worst((r) => r.p999), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: poll max`, value: worst((r) => r.max), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: poll p50`, value: median(rs.map((r) => r.p50)), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: start-up to first poll`, value: median(rs.map((r) => r.startupMs)), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: start-up to the big feed's first 200`, value: median(rs.map((r) => r.bigReadyMs)), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: poll p99.9 while the big feed loads`, value: worst((r) => r.loadingP999), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: poll max while the big feed loads`, value: worst((r) => r.loadingMax), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: server CPU per poll (with ingest and rebuilds)`, value: median(rs.map((r) => r.cpuPerPollUs)), unit: 'µs' })
  rows.push({ case: c, subject: `${subject}: peak RSS`, value: worst((r) => r.peakRssMiB), unit: 'MiB' })
  rows.push({ case: c, subject: `${subject}: main-thread CPU per big rebuild (with polls and ingest)`, value: median(rs.map((r) => r.mainCpuPerRebuildMs)), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: CPU steal`, value: median(rs.map((r) => r.steal ?? NaN)), unit: '%' })
  rows.push({ case: c, subject: `${subject}: big-feed rebuilds seen`, value: Math.min(...rs.map((r) => r.rebuilds)), unit: '' })
  rows.push({ case: c, subject: `${subject}: client send lag p99.9 (its own share of the tail)`, value: worst((r) => r.sendLagP999), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: poll p99.9 from the client's send call (latency less its send lag; for reference)`, value: worst((r) => r.fromSendP999), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: polls over ${SLOW_MS} ms the client sent over ${LATE_MS} ms late`, value: median(rs.map((r) => 100 * r.slowSentLate / Math.max(1, r.slowPolls))), unit: '%' })
  rows.push({ case: c, subject: `${subject}: signal acknowledgement p99`, value: worst((r) => r.ackP99), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: signal acknowledgement max`, value: worst((r) => r.ackMax), unit: 'ms' })
  rows.push({ case: c, subject: `${subject}: signal batches not acknowledged (not 200)`, value: worst((r) => r.ackFailed), unit: '' })
}
report('bigws', 'A big workspace under ingest vs. polls of a small one (open loop)', rows, [], { rules: RULES, pollsPerSecond: POLLS_PER_S, changesPerSecond: CHANGES_PER_S, rebuildMs: REBUILD_MS, rounds: ROUNDS, client: cPoller === null ? 'node' : 'c', runs: Object.fromEntries(results) })
