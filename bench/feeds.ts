/**
 * Serving feeds over HTTP: threatfeed (uWS, src/http/feed-routes.ts) raced against two anchors in
 * one run — a tuned nginx serving the same bytes as static files with the same extra headers
 * (feeds/nginx.conf.template: open_file_cache, tcp_nodelay; the practical ceiling) and a node:http
 * front end over the same snapshot with the same auth and ETag logic (what a Node user would
 * write). Every server runs pinned to core 0 and wrk to core 1; subjects alternate run by run.
 * A fourth server gives the floor of any uWS front end: bare uWS answering with the same 304 or
 * 200 bytes and no application code at all (feeds/serve-uws-floor.ts). `uWS floor / node:http`
 * and `uWS floor / nginx` are the best ratios any uWS application can reach on this machine. The
 * floor writes the cheapest way uWS allows (one writeStatus with the whole header block, no cork);
 * `uWS per call` is the same server writing the status and each header in its own call, inside
 * cork, as the floor did before (what that trick is worth to any uWS front end).
 * BENCH_FEEDS_OLD_TREE=<dir> adds `threatfeed (old)`: the serve-threatfeed.ts of another checkout
 * (with node_modules), e.g. `git worktree add /tmp/tf-old <commit> && ln -s "$PWD/node_modules"
 * /tmp/tf-old/`, raced in the same rounds over the same store; BENCH_BASE_TREE and BENCH_BASE_NODE
 * (lib/base.ts) name it and the Node that runs it.
 *
 * Every subject gets the same request bytes: the Bearer key (nginx and the floor ignore it) and,
 * for a 304, `Accept-Encoding: gzip` with the server's own ETag of the gzip representation — what
 * a fleet's poller sends.
 *
 * Cases (a 131,072-entry feed, built by the real FeedService from rules in an LMDB store):
 *   304 polls at 16 and 256 connections, and with a new connection per request;
 *   200 gzip and 200 identity at 16 and 256 connections;
 *   256 busy connections with 10,000 idle keep-alive ones next to them (threatfeed only);
 *   304 polls of the shards of 8 (`?shard=I&of=8`, issue 21) at 256 connections, each request
 *   the next shard with that shard's own gzip ETag, against the unsharded feed in the same
 *   rounds and the same rotating client (threatfeed only: shards are variants of the snapshot,
 *   answered the same way, so the two should agree within their spread);
 *   304 polls with consumer tracking on against the same build with it off (issue 20).
 *
 * Full-body cases are bound by loopback copies and by wrk itself, and nginx moves ±30 % with the
 * exact body size: ratios are taken per round (same conditions) and quoted as a median with its
 * spread. Each row also gives the server's CPU per request (user + system, from /proc): where
 * the server core is the bottleneck the throughput ratio converges to the inverse CPU ratio, and
 * on a loaded machine, where wrk often is the bottleneck, it is the steadier figure; it is also
 * given net of what each server burns with no requests (measured once, before the cases). Each
 * run also records the machine's CPU steal (a shared host takes cycles from both sides unevenly).
 *
 * Environment: BENCH_FEEDS_SECONDS (5), BENCH_FEEDS_RUNS (3), BENCH_FEEDS_IDLE (10000),
 * BENCH_FEEDS_ONLY (run only the cases whose name contains it; `idle` for the idle case),
 * BENCH_FEEDS_SUBJECTS (comma list: race only these, e.g. `threatfeed,nginx,uWS floor`),
 * BENCH_FEEDS_PROFILE=<dir> (threatfeed's and the floor's servers write a --cpu-prof profile there
 * on exit), BENCH_FEEDS_PERF=<dir> (`perf record -e cpu-clock -g` of every subject's first-round
 * run of each case, the node servers started with --perf-basic-prof so JS frames have names;
 * needs perf and root or perf_event_paranoid <= 1).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { chmodSync, mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { cpuTicks, ensureCommand, hasCommand, median, repoDir, report, stealPercent, type Ratio, type Row } from './lib/report.js'
import { cpuSeconds, freePort, processTree, spawnPinned, stopChildren, waitForLine } from './lib/processes.js'
import { seedFeedStore } from './lib/seed-feed.js'
import { baseNode, baseTree } from './lib/base.js'

const SECONDS = Number(process.env.BENCH_FEEDS_SECONDS ?? 5)
const RUNS = Number(process.env.BENCH_FEEDS_RUNS ?? 3)
const IDLE = Number(process.env.BENCH_FEEDS_IDLE ?? 10_000)
const ONLY = process.env.BENCH_FEEDS_ONLY ?? ''
const PROFILE = process.env.BENCH_FEEDS_PROFILE ?? ''
const PERF = process.env.BENCH_FEEDS_PERF ?? ''
const OLD_TREE = process.env.BENCH_FEEDS_OLD_TREE ?? baseTree
const IDLE_SECONDS = 5
const SUBJECTS = (process.env.BENCH_FEEDS_SUBJECTS ?? '').split(',').map((x) => x.trim()).filter((x) => x !== '')
const ENTRIES = 131_072
const SERVER_CORE = '0'
const CLIENT_CORE = '1'
const benchDir = join(repoDir, 'bench', 'feeds')

type Subject = 'threatfeed' | 'threatfeed (old)' | 'nginx' | 'node:http' | 'uWS floor' | 'uWS floor + feed reads' | 'uWS per call' | 'threatfeed, shards of 8'

/** One feed a rotating client polls: its path and the ETag it sends. */
interface Poll { readonly path: string, readonly etag: string }

interface Server {
  readonly name: Subject
  readonly child: ChildProcess
  readonly port: number
  readonly path: string
  /** The Authorization header every request carries (nginx and the floor ignore it). */
  readonly auth: string
  etag: string
  gzipEtag: string
  /** CPU seconds per second the server uses with no requests (measured once, before the cases). */
  idleCpu: number
  /** What a rotating case polls (default: `path` with `gzipEtag`). */
  rotation?: readonly Poll[]
}

interface WrkResult {
  rps: number
  p50Ms: number
  p99Ms: number
  bytesPerRequest: number
  errors: number
  /** Peak resident memory of the server during the run, MB. */
  rssMb: number
  /** Server CPU (user + system) per request, µs, and its share of the one core it runs on. */
  cpuUsPerRequest: number
  cpuShare: number
  /**
   * The same net of what the server burns with no requests at all (timers, store polls, metrics
   * sampling; `idleCpu`): on a loaded machine, where a server gets a tenth of its core, that
   * fixed cost spread over few requests is a large share of the raw figure.
   */
  cpuUsPerRequestNet: number
  /** The machine's CPU steal during the run, percent (null where /proc/stat does not say). */
  steal: number | null
  /**
   * Times the kernel took the server's threads off the CPU for another task, per 1000 answers:
   * on a shared machine the round-to-round swing of the CPU per answer follows it (each switch
   * costs the switch and a cache refilled by someone else's work).
   */
  preemptedPerK: number
}

const tmp = mkdtempSync(join(tmpdir(), 'tf-bench-feeds-'))

function cleanup (): void {
  stopChildren()
  rmSync(tmp, { recursive: true, force: true })
}
process.on('exit', cleanup)
process.on('SIGINT', () => { process.exit(130) })

/** Involuntary context switches of every thread of a process tree (/proc/<pid>/task/<tid>/status). */
function preemptions (pid: number): number {
  let n = 0
  for (const p of processTree(pid)) {
    let tids: string[] = []
    try {
      tids = readdirSync(`/proc/${p}/task`)
    } catch {
      continue
    }
    for (const tid of tids) {
      try {
        const m = /nonvoluntary_ctxt_switches:\s+(\d+)/.exec(readFileSync(`/proc/${p}/task/${tid}/status`, 'utf8'))
        if (m !== null) n += Number(m[1])
      } catch {
        // The thread ended.
      }
    }
  }
  return n
}

function rssMb (pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m === null ? 0 : Number(m[1]) / 1024
  } catch {
    return 0
  }
}

/** One GET through node:http (fetch would decode gzip and hide the bytes on the wire). */
function fetchRaw (server: Server, headers: Record<string, string>): Promise<{ status: number, etag: string, body: Buffer, rawHeaders: string[] }> {
  return new Promise((resolve, reject) => {
    const all = { ...headers, ...(server.auth === '' ? {} : { authorization: server.auth }) }
    const req = request({ host: '127.0.0.1', port: server.port, path: server.path, headers: all, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, etag: String(res.headers.etag ?? ''), body: Buffer.concat(chunks), rawHeaders: res.rawHeaders }) })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

// --- setup --------------------------------------------------------------------------------


/** --cpu-prof for threatfeed and the floor (BENCH_FEEDS_PROFILE), --perf-basic-prof for perf. */
function profileFlags (name: Subject): string[] {
  const flags = PROFILE !== '' && name !== 'nginx' && name !== 'node:http' ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE}`] : []
  if (PERF !== '') flags.push('--perf-basic-prof')
  return flags
}

async function startNodeServer (name: 'threatfeed' | 'threatfeed (old)' | 'node:http', script: string, dataDir: string, workspaceId: string, key: string): Promise<Server> {
  const port = await freePort()
  const dir = name === 'threatfeed (old)' ? join(OLD_TREE, 'bench', 'feeds') : benchDir
  const child = spawnPinned(SERVER_CORE, [name === 'threatfeed (old)' ? baseNode : process.execPath, ...profileFlags(name), '--import=tsx', join(dir, script), workspaceId], {
    ...process.env,
    THREATFEED_DATA_DIR: dataDir,
    // One front-end thread against nginx's one worker (issue 17); threads are bench/tls's case.
    THREATFEED_HTTP_THREADS: '1',
    PORT: String(port),
  })
  const ready = Number(await waitForLine(child, 'READY'))
  return { name, child, port: ready, path: '/v1/threat/feeds', auth: `Bearer ${key}`, etag: '', gzipEtag: '', idleCpu: 0 }
}

/**
 * The uWS floor (feeds/serve-uws-floor.ts): threatfeed's 304 and 200 answers (their headers as
 * threatfeed sent them, the bodies nginx serves) with no application code.
 */
async function startUwsFloor (name: 'uWS floor' | 'uWS floor + feed reads' | 'uWS per call', raw: Record<Kind, string[]>, bodies: string, tags: { identity: string, gzip: string }, auth: string, env: Record<string, string> = {}): Promise<Server> {
  // uWS writes Date, Content-Length and its own uWebSockets header itself.
  const own = new Set(['date', 'content-length', 'uwebsockets', 'connection'])
  const pairsOf = (rawHeaders: string[]): Array<[string, string]> => {
    const pairs: Array<[string, string]> = []
    for (let i = 0; i + 1 < rawHeaders.length; i += 2) if (!own.has(rawHeaders[i]!.toLowerCase())) pairs.push([rawHeaders[i]!, rawHeaders[i + 1]!])
    return pairs
  }
  const headers = { 304: pairsOf(raw['304']), identity: pairsOf(raw.identity), gzip: pairsOf(raw.gzip) }
  const child = spawnPinned(SERVER_CORE, [process.execPath, ...profileFlags(name), '--import=tsx', join(benchDir, 'serve-uws-floor.ts')], { ...process.env, FLOOR_HEADERS: JSON.stringify(headers), FLOOR_BODIES: bodies, FLOOR_CALLS: name === 'uWS per call' ? '1' : '0', FLOOR_READS: name === 'uWS floor + feed reads' ? '1' : '0', FLOOR_AUTH: auth, FLOOR_TAGS: JSON.stringify(tags), PORT: '0', ...env })
  const ready = Number(await waitForLine(child, 'READY'))
  // The ETags are threatfeed's (its headers are): a request with one is answered 304.
  return { name, child, port: ready, path: '/v1/threat/feeds', auth, etag: tags.identity, gzipEtag: tags.gzip, idleCpu: 0 }
}

/** nginx's extra headers: threatfeed's values for the same representation (a 200 it sent). */
function nginxHeaders (rawHeaders: string[]): Record<string, string> {
  const get = (name: string): string => {
    for (let i = 0; i + 1 < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === name) return rawHeaders[i + 1]!
    throw new Error(`threatfeed sent no ${name}`)
  }
  return { CACHE_CONTROL: get('cache-control'), ENTRY_COUNT: get('x-feed-entry-count'), ENTRY_LIMIT: get('x-feed-entry-limit') }
}

async function startNginx (identity: Buffer, gzip: Buffer, headers: Record<string, string>, auth: string): Promise<Server> {
  const prefix = join(tmp, 'nginx')
  // nginx's worker drops root for `nobody`: it must be able to read the files (mkdtemp is 0700).
  chmodSync(tmp, 0o755)
  for (const d of ['logs', 'html', 'tmp']) mkdirSync(join(prefix, d), { recursive: true })
  writeFileSync(join(prefix, 'html', 'feed.txt'), identity)
  writeFileSync(join(prefix, 'html', 'feed.txt.gz'), gzip)
  const port = await freePort()
  let conf = readFileSync(join(benchDir, 'nginx.conf.template'), 'utf8').replaceAll('{{PREFIX}}', prefix).replaceAll('{{PORT}}', String(port))
  for (const [k, v] of Object.entries(headers)) conf = conf.replaceAll(`{{${k}}}`, v.replaceAll('"', '\\"'))
  writeFileSync(join(prefix, 'nginx.conf'), conf)
  const child = spawnPinned(SERVER_CORE, ['nginx', '-p', prefix, '-c', join(prefix, 'nginx.conf')])
  const server: Server = { name: 'nginx', child, port, path: '/feed.txt', auth, etag: '', gzipEtag: '', idleCpu: 0 }
  for (let i = 0; ; i++) {
    try {
      await fetchRaw(server, {})
      return server
    } catch (e) {
      if (i > 100) throw e
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
}

// --- measuring ----------------------------------------------------------------------------

type Kind = '304' | 'gzip' | 'identity'

function headersFor (server: Server, kind: Kind): string {
  const lines: string[] = []
  lines.push(`Authorization: ${server.auth}`)
  if (kind === '304') lines.push(`If-None-Match: ${server.gzipEtag}`)
  if (kind !== 'identity') lines.push('Accept-Encoding: gzip')
  return lines.join('\n')
}

/**
 * `perf record` of the server's whole process tree for the run (nginx: its worker), into
 * BENCH_FEEDS_PERF/<case>-<subject>.data. Returns the recorder to wait for, or null.
 */
function startPerf (server: Server, label: string): ChildProcess | null {
  if (PERF === '') return null
  mkdirSync(PERF, { recursive: true })
  const file = join(PERF, `${label}-${server.name}.data`.replace(/[^\w.-]+/g, '_'))
  const pids = processTree(server.child.pid!).join(',')
  return spawn('perf', ['record', '-q', '-e', 'cpu-clock', '-g', '-p', pids, '-o', file, '--', 'sleep', String(SECONDS)], { stdio: 'ignore' })
}

/** WRK_ROTATE for a rotating 304 case (wrk-report.lua): the server's polls, one a line. */
function rotationOf (server: Server): string {
  return (server.rotation ?? [{ path: server.path, etag: server.gzipEtag }]).map((p) => `${p.path} ${p.etag}`).join('\n')
}

async function runWrk (server: Server, kind: Kind, connections: number, close = false, perfLabel = '', rotate = false): Promise<WrkResult> {
  const pid = server.child.pid!
  let peak = rssMb(pid)
  const sampler = setInterval(() => { peak = Math.max(peak, rssMb(pid)) }, 200)
  const perf = perfLabel === '' ? null : startPerf(server, perfLabel)
  const ticks = cpuTicks()
  const cpuBefore = cpuSeconds(pid)
  const preemptedBefore = preemptions(pid)
  const child = spawn('taskset', ['-c', CLIENT_CORE, 'wrk', '-t1', `-c${connections}`, `-d${SECONDS}s`, '--timeout', '10s', '-s', join(benchDir, 'wrk-report.lua'), `http://127.0.0.1:${server.port}${server.path}`], {
    env: { ...process.env, WRK_HEADERS: headersFor(server, kind), WRK_CLOSE: close ? '1' : '0', WRK_ROTATE: rotate ? rotationOf(server) : '' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const out: Buffer[] = []
  child.stdout.on('data', (c: Buffer) => out.push(c))
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  clearInterval(sampler)
  const cpu = cpuSeconds(pid) - cpuBefore
  const preempted = preemptions(pid) - preemptedBefore
  const steal = stealPercent(ticks, cpuTicks())
  if (perf !== null && perf.exitCode === null) await new Promise((resolve) => perf.once('exit', resolve))
  const text = Buffer.concat(out).toString()
  const line = text.split('\n').find((l) => l.startsWith('WRKJSON '))
  if (code !== 0 || line === undefined) throw new Error(`wrk failed (${code}): ${text}`)
  const j = JSON.parse(line.slice(8)) as Record<string, number>
  const requests = j.requests!
  return {
    rps: requests / (j.duration_us! / 1e6),
    p50Ms: j.p50_us! / 1000,
    p99Ms: j.p99_us! / 1000,
    bytesPerRequest: requests === 0 ? 0 : j.bytes! / requests,
    errors: j.connect! + j.read! + j.write! + j.status! + j.timeout!,
    rssMb: peak,
    cpuUsPerRequest: requests === 0 ? 0 : (cpu * 1e6) / requests,
    cpuUsPerRequestNet: requests === 0 ? 0 : ((cpu - server.idleCpu * j.duration_us! / 1e6) * 1e6) / requests,
    cpuShare: cpu / (j.duration_us! / 1e6),
    steal,
    preemptedPerK: requests === 0 ? 0 : (1000 * preempted) / requests,
  }
}

interface Case {
  readonly name: string
  readonly kind: Kind
  readonly connections: number
  readonly close: boolean
  readonly subjects: readonly Subject[]
  /** Each request takes the next of the subject's polls (Server.rotation). */
  readonly rotate?: boolean
}

const CASES: readonly Case[] = [
  { name: '304 poll, 16 conns', kind: '304', connections: 16, close: false, subjects: ['threatfeed', 'threatfeed (old)', 'nginx', 'node:http', 'uWS floor', 'uWS floor + feed reads', 'uWS per call'] },
  { name: '304 poll, 256 conns', kind: '304', connections: 256, close: false, subjects: ['threatfeed', 'threatfeed (old)', 'nginx', 'node:http', 'uWS floor', 'uWS floor + feed reads', 'uWS per call'] },
  { name: '304 poll, shard of 8, 256 conns', kind: '304', connections: 256, close: false, rotate: true, subjects: ['threatfeed, shards of 8', 'threatfeed'] },
  { name: '304 poll, new connection per request', kind: '304', connections: 16, close: true, subjects: ['threatfeed', 'threatfeed (old)', 'nginx', 'node:http', 'uWS floor', 'uWS floor + feed reads', 'uWS per call'] },
  { name: '200 gzip, 16 conns', kind: 'gzip', connections: 16, close: false, subjects: ['threatfeed', 'threatfeed (old)', 'nginx', 'uWS floor', 'uWS per call'] },
  { name: '200 gzip, 256 conns', kind: 'gzip', connections: 256, close: false, subjects: ['threatfeed', 'threatfeed (old)', 'nginx', 'uWS floor', 'uWS per call'] },
  { name: '200 identity, 16 conns', kind: 'identity', connections: 16, close: false, subjects: ['threatfeed', 'threatfeed (old)', 'nginx', 'uWS floor', 'uWS per call'] },
  { name: '200 identity, 256 conns', kind: 'identity', connections: 256, close: false, subjects: ['threatfeed', 'threatfeed (old)', 'nginx', 'uWS floor', 'uWS per call'] },
]

function spread (xs: number[]): string {
  return `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`
}

function rowOf (c: string, subject: string, results: WrkResult[]): Row {
  const rps = results.map((r) => r.rps)
  return {
    case: c,
    subject,
    value: median(rps),
    unit: 'req/s',
    runs: rps,
    extra: {
      p50_ms: median(results.map((r) => r.p50Ms)),
      p99_ms: median(results.map((r) => r.p99Ms)),
      bytes_per_req: Math.round(median(results.map((r) => r.bytesPerRequest))),
      errors: results.reduce((a, r) => a + r.errors, 0),
      rss_mb: Math.round(median(results.map((r) => r.rssMb))),
      cpu_us_per_req: median(results.map((r) => r.cpuUsPerRequest)),
      cpu_us_per_req_net: median(results.map((r) => r.cpuUsPerRequestNet)),
      cpu_share: median(results.map((r) => r.cpuShare)),
      steal_pct: median(results.map((r) => r.steal ?? NaN)),
      preempted_per_1000: median(results.map((r) => r.preemptedPerK)),
    },
  }
}

/**
 * The other side of a race: server CPU per request of one subject over another's, per round. When
 * the server core is the bottleneck the throughput ratio converges to its inverse; on a loaded
 * machine, where the client side (wrk) often is, it is the steadier of the two figures.
 */
function cpuRatioOf (c: string, label: string, a: WrkResult[], b: WrkResult[], max: number | null = null, net = false): Ratio {
  const of = (r: WrkResult): number => net ? r.cpuUsPerRequestNet : r.cpuUsPerRequest
  const per = a.map((r, i) => of(r) / of(b[i]!))
  const value = median(per)
  return {
    case: c,
    label: `server CPU per request${net ? ' net of idle' : ''}, ${label} (per round ${spread(per)})`,
    value,
    ...(max === null ? {} : { target: `<= ${max}`, pass: value <= max }),
  }
}

function ratioOf (c: string, label: string, a: WrkResult[], b: WrkResult[], min: number | null): Ratio {
  const per = a.map((r, i) => r.rps / b[i]!.rps)
  const value = median(per)
  return {
    case: c,
    label: `${label} (per round ${spread(per)})`,
    value,
    ...(min === null ? {} : { target: `>= ${min}`, pass: value >= min }),
  }
}

/**
 * threatfeed's process again as the subject polling the shards of N: each shard's gzip ETag, each
 * checked to be answered 304, and the shards checked to partition the feed's lines.
 */
async function shardPolls (server: Server, of: number, lines: number): Promise<Server> {
  const rotation: Poll[] = []
  let total = 0
  for (let i = 1; i <= of; i++) {
    const path = `${server.path}?shard=${i}&of=${of}`
    const probe = { ...server, path }
    const identity = await fetchRaw(probe, {})
    const gzip = await fetchRaw(probe, { 'accept-encoding': 'gzip' })
    if (identity.status !== 200 || gzip.status !== 200) throw new Error(`shard ${i}/${of} answered ${identity.status}/${gzip.status}`)
    total += identity.body.toString('latin1').split('\n').length - 1
    const nm = await fetchRaw(probe, { 'if-none-match': gzip.etag, 'accept-encoding': 'gzip' })
    if (nm.status !== 304) throw new Error(`shard ${i}/${of} answered ${nm.status} to its own ETag ${gzip.etag}`)
    rotation.push({ path, etag: gzip.etag })
  }
  if (total !== lines) throw new Error(`the shards of ${of} hold ${total} lines, the feed ${lines}`)
  return { ...server, name: 'threatfeed, shards of 8', path: rotation[0]!.path, etag: '', gzipEtag: rotation[0]!.etag, rotation }
}

// --- main ---------------------------------------------------------------------------------

for (const [cmd, pkg] of [['wrk', 'wrk'], ['nginx', 'nginx'], ['taskset', 'util-linux']] as const) {
  if (!ensureCommand(cmd, pkg)) throw new Error(`bench/feeds needs ${cmd}`)
}
if (!hasCommand('sh')) throw new Error('bench/feeds needs sh')

process.stderr.write(`bench/feeds: seeding ${ENTRIES} rules…\n`)
const dataDir = join(tmp, 'data')
const { workspaceId, key } = await seedFeedStore(dataDir, ENTRIES)
process.stderr.write('bench/feeds: starting threatfeed and node:http (each builds the feed)…\n')
const tf = await startNodeServer('threatfeed', 'serve-threatfeed.ts', dataDir, workspaceId, key)
const node = await startNodeServer('node:http', 'serve-node.ts', dataDir, workspaceId, key)
const old = OLD_TREE === '' ? null : await startNodeServer('threatfeed (old)', 'serve-threatfeed.ts', dataDir, workspaceId, key)

const identity = await fetchRaw(tf, {})
const gzipped = await fetchRaw(tf, { 'accept-encoding': 'gzip' })
if (identity.status !== 200 || gzipped.status !== 200) throw new Error(`threatfeed answered ${identity.status}/${gzipped.status}`)
const lines = identity.body.toString('latin1').split('\n').length - 1
if (lines !== ENTRIES) throw new Error(`the feed has ${lines} lines, expected ${ENTRIES}`)
const nginx = await startNginx(identity.body, gzipped.body, nginxHeaders(gzipped.rawHeaders), tf.auth)

for (const s of [tf, node, nginx, ...(old === null ? [] : [old])]) {
  const i = await fetchRaw(s, {})
  const g = await fetchRaw(s, { 'accept-encoding': 'gzip' })
  if (!i.body.equals(identity.body) || !g.body.equals(gzipped.body)) throw new Error(`${s.name} does not serve the same bytes (identity ${i.status} ${i.body.length} B, gzip ${g.status} ${g.body.length} B; expected ${identity.body.length} B and ${gzipped.body.length} B)`)
  s.etag = i.etag
  s.gzipEtag = g.etag
  for (const [tag, enc] of [[s.etag, ''], [s.gzipEtag, 'gzip']] as const) {
    const nm = await fetchRaw(s, { 'if-none-match': tag, ...(enc === '' ? {} : { 'accept-encoding': enc }) })
    if (nm.status !== 304) throw new Error(`${s.name} answered ${nm.status} to its own ETag ${tag}`)
  }
}
const notModified = await fetchRaw(tf, { 'if-none-match': tf.gzipEtag, 'accept-encoding': 'gzip' })
if (notModified.status !== 304) throw new Error(`threatfeed answered ${notModified.status} to its own gzip ETag`)
const floorRaw = { 304: notModified.rawHeaders, identity: identity.rawHeaders, gzip: gzipped.rawHeaders }
const floorTags = { identity: tf.etag, gzip: tf.gzipEtag }
const floor = await startUwsFloor('uWS floor', floorRaw, join(tmp, 'nginx', 'html'), floorTags, tf.auth)
const perCall = await startUwsFloor('uWS per call', floorRaw, join(tmp, 'nginx', 'html'), floorTags, tf.auth)
const floorReads = await startUwsFloor('uWS floor + feed reads', floorRaw, join(tmp, 'nginx', 'html'), floorTags, tf.auth)
{
  const stranger = await fetchRaw({ ...floorReads, auth: 'Bearer nobody' }, { 'if-none-match': floorReads.gzipEtag, 'accept-encoding': 'gzip' })
  const wrongTag = await fetchRaw(floorReads, { 'if-none-match': floorReads.etag, 'accept-encoding': 'gzip' })
  if (stranger.status !== 401 || wrongTag.status !== 200) throw new Error(`${floorReads.name} does not decide by the key and the encoding's ETag (${stranger.status}, ${wrongTag.status})`)
}
for (const f of [floor, perCall, floorReads]) {
  for (const [kind, body, raw] of [['identity', identity.body, identity.rawHeaders], ['gzip', gzipped.body, gzipped.rawHeaders]] as const) {
    const r = await fetchRaw(f, kind === 'gzip' ? { 'accept-encoding': 'gzip' } : {})
    if (r.status !== 200 || !r.body.equals(body)) throw new Error(`${f.name} does not serve the same ${kind} bytes (${r.status}, ${r.body.length} B)`)
    if (r.rawHeaders.length !== raw.length) throw new Error(`${f.name} does not send threatfeed's ${kind} headers: ${JSON.stringify(r.rawHeaders)}`)
  }
  const nm = await fetchRaw(f, { 'if-none-match': f.gzipEtag, 'accept-encoding': 'gzip' })
  if (nm.status !== 304 || nm.rawHeaders.length !== notModified.rawHeaders.length) throw new Error(`${f.name} does not answer threatfeed's 304 to an If-None-Match (${nm.status}, ${JSON.stringify(nm.rawHeaders)})`)
}
const shards = CASES.some((c) => c.rotate === true && c.name.includes(ONLY)) ? await shardPolls(tf, 8, lines) : null
const servers: Partial<Record<Subject, Server>> = { threatfeed: tf, nginx, 'node:http': node, 'uWS floor': floor, 'uWS floor + feed reads': floorReads, 'uWS per call': perCall, ...(old === null ? {} : { 'threatfeed (old)': old }), ...(shards === null ? {} : { 'threatfeed, shards of 8': shards }) }
process.stderr.write(`bench/feeds: identity ${identity.body.length} B, gzip ${gzipped.body.length} B; ${SECONDS} s per run, ${RUNS} rounds\n`)
// Each server's CPU with no requests, all measured in the same seconds (after their builds).
{
  const all = Object.values(servers)
  const before = all.map((s) => cpuSeconds(s.child.pid!))
  const started = performance.now()
  await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000))
  const elapsed = (performance.now() - started) / 1000
  all.forEach((s, i) => { s.idleCpu = (cpuSeconds(s.child.pid!) - before[i]!) / elapsed })
  process.stderr.write(`bench/feeds: idle CPU ${all.map((s) => `${s.name} ${(100 * s.idleCpu).toFixed(2)} %`).join(', ')}\n`)
}

const rows: Row[] = []
const ratios: Ratio[] = []
const byCase = new Map<string, Map<Subject, WrkResult[]>>()

const selected = CASES.filter((c) => c.name.includes(ONLY))
for (const c of selected) {
  const subjects = c.subjects.filter((s) => servers[s] !== undefined && (SUBJECTS.length === 0 || SUBJECTS.includes(s)))
  const results = new Map<Subject, WrkResult[]>(subjects.map((s) => [s, []]))
  for (let round = 0; round < RUNS; round++) {
    // Rotate the order each round so drift in the machine's state hits every subject alike.
    const order = subjects.map((_, i) => subjects[(i + round) % subjects.length]!)
    for (const s of order) {
      const r = await runWrk(servers[s]!, c.kind, c.connections, c.close, round === 0 ? c.name : '', c.rotate === true)
      results.get(s)!.push(r)
      process.stderr.write(`  ${c.name} ${s}: ${r.rps.toFixed(0)} req/s, p99 ${r.p99Ms.toFixed(2)} ms, ${r.cpuUsPerRequest.toFixed(2)} µs CPU/req (net of idle ${r.cpuUsPerRequestNet.toFixed(2)}; ${(100 * r.cpuShare).toFixed(0)} % of a core), steal ${r.steal === null ? '?' : r.steal.toFixed(1)} %, preempted ${r.preemptedPerK.toFixed(2)}/1000, load ${loadavg()[0]!.toFixed(1)}${r.errors > 0 ? `, ${r.errors} errors` : ''}\n`)
    }
  }
  byCase.set(c.name, results)
  for (const s of subjects) rows.push(rowOf(c.name, s, results.get(s)!))
}

const get = (c: string, s: Subject): WrkResult[] => byCase.get(c)?.get(s) ?? []
const ran = (c: string): boolean => byCase.has(c)
/** A ratio of two subjects that both ran in case `c`. */
const both = (c: string, a: Subject, b: Subject): boolean => get(c, a).length > 0 && get(c, b).length > 0
function race (c: string, a: Subject, b: Subject, min: number | null, cpuMax: number | null = null): void {
  if (!both(c, a, b)) return
  ratios.push(ratioOf(c, `${a} / ${b}`, get(c, a), get(c, b), min))
  ratios.push(cpuRatioOf(c, `${a} / ${b}`, get(c, a), get(c, b), cpuMax))
  ratios.push(cpuRatioOf(c, `${a} / ${b}`, get(c, a), get(c, b), null, true))
}
// Issue 17's bar, at 256 connections: ≥ 0.95× nginx's throughput for ≤ 1.10× its CPU per 304,
// and threatfeed's own work within 10 % of the floor's CPU.
for (const c of ['304 poll, 16 conns', '304 poll, 256 conns'].filter(ran)) {
  const at256 = c.includes('256')
  race(c, 'threatfeed', 'nginx', at256 ? 0.95 : 0.85, at256 ? 1.10 : null)
  race(c, 'threatfeed', 'node:http', 2.5)
  // What any uWS front end could reach at best, and how much of it threatfeed keeps.
  race(c, 'uWS floor', 'nginx', null)
  race(c, 'uWS floor', 'node:http', null)
  race(c, 'threatfeed', 'uWS floor', null, at256 ? 1.10 : null)
  // The same floor making the reads every feed poll must make (the key, the query, the encoding,
  // the ETag): what is left is threatfeed's own work.
  race(c, 'threatfeed', 'uWS floor + feed reads', null, at256 ? 1.10 : null)
  race(c, 'uWS floor + feed reads', 'uWS floor', null)
  race(c, 'threatfeed', 'threatfeed (old)', null)
  race(c, 'uWS floor', 'uWS per call', null)
}
for (const c of ['304 poll, new connection per request'].filter(ran)) {
  race(c, 'threatfeed', 'nginx', 1.0)
  race(c, 'threatfeed', 'node:http', null)
  race(c, 'uWS floor', 'nginx', null)
}
for (const c of ['200 gzip, 16 conns', '200 gzip, 256 conns', '200 identity, 16 conns', '200 identity, 256 conns'].filter(ran)) {
  race(c, 'threatfeed', 'nginx', c.includes('gzip') ? 0.85 : null)
  race(c, 'uWS floor', 'nginx', null)
  race(c, 'threatfeed', 'uWS floor', null)
  race(c, 'threatfeed', 'threatfeed (old)', null)
  race(c, 'uWS floor', 'uWS per call', null)
}
// Issue 21: a shard is answered as any other variant — its 304 costs what the feed's does.
race('304 poll, shard of 8, 256 conns', 'threatfeed, shards of 8', 'threatfeed', null)
if (get('304 poll, 256 conns', 'threatfeed').length > 0) {
  const p99 = median(get('304 poll, 256 conns', 'threatfeed').map((r) => r.p99Ms))
  ratios.push({ case: '304 poll, 256 conns', label: 'threatfeed p99 latency, ms', value: p99, target: '<= 3', pass: p99 <= 3 })
}

// --- idle connections ----------------------------------------------------------------------

if ((ONLY === '' || ONLY === 'idle') && (SUBJECTS.length === 0 || SUBJECTS.includes('threatfeed'))) {
  process.stderr.write(`bench/feeds: ${IDLE} idle keep-alive connections beside 256 busy ones…\n`)
  const busy: WrkResult[] = []
  const withIdle: WrkResult[] = []
  const stillOpen: number[] = []
  for (let round = 0; round < RUNS; round++) {
    busy.push(await runWrk(tf, '304', 256))
    const idle = spawnPinned(CLIENT_CORE, [process.execPath, '--import=tsx', join(benchDir, 'idle-connections.ts'), String(tf.port), String(IDLE), tf.auth, tf.etag])
    const opened = Number(await waitForLine(idle, 'READY'))
    if (opened < IDLE) throw new Error(`only ${opened} of ${IDLE} idle connections opened`)
    // uWS closes HTTP connections idle for 10 s; the run starts at once and lasts SECONDS.
    const r = await runWrk(tf, '304', 256)
    idle.stdin!.write('count\n')
    stillOpen.push(Number(await waitForLine(idle, 'OPEN')))
    idle.stdin!.end('quit\n')
    await new Promise((resolve) => idle.once('exit', resolve))
    withIdle.push(r)
    process.stderr.write(`  busy only ${busy.at(-1)!.rps.toFixed(0)} req/s (${busy.at(-1)!.rssMb.toFixed(0)} MB); with idle ${r.rps.toFixed(0)} req/s (${r.rssMb.toFixed(0)} MB), ${stillOpen.at(-1)} still open\n`)
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
  const idleCase = `304 poll, 256 busy + ${IDLE} idle conns`
  rows.push(rowOf('304 poll, 256 busy conns (idle baseline)', 'threatfeed', busy))
  rows.push({ ...rowOf(idleCase, 'threatfeed', withIdle), extra: { ...rowOf(idleCase, 'threatfeed', withIdle).extra, idle_still_open: Math.min(...stillOpen) } })
  ratios.push(ratioOf(idleCase, 'with idle / busy only', withIdle, busy, 0.95))
  {
    const extra = median(withIdle.map((r) => r.rssMb)) - median(busy.map((r) => r.rssMb))
    ratios.push({ case: idleCase, label: 'extra RSS with the idle connections, MB', value: extra, target: '<= 100', pass: extra <= 100 })
  }
}

// --- consumer tracking (issue 20) ------------------------------------------------------------

const CONSUMER_CASE = '304 polls with consumer tracking'

/**
 * The same build with feed consumer tracking on and off (bench/feeds/serve-consumers.ts, one
 * server each, on the server core), raced on 304 polls in at least five alternating rounds: the
 * target is server CPU per 304 with tracking at most 1.03× without. Each round's CPU is the
 * server's own (/proc), so the other subjects idling beside it and the machine's load cancel out
 * of the per-round ratio as far as they can. The uWS floor with and without reading the peer's
 * address (FLOOR_ADDRESS) runs in the same rounds: uWebSockets.js 20.51 answers getRemoteAddress
 * with a getpeername system call per request, so that ratio is the least tracking can cost on it.
 * BENCH_FEEDS_CONSUMER_CONNS sets the connections (16).
 */
async function consumerTrackingCase (): Promise<void> {
  const rounds = Math.max(5, RUNS)
  const connections = Number(process.env.BENCH_FEEDS_CONSUMER_CONNS ?? 16)
  const start = async (tracking: 'on' | 'off'): Promise<Server> => {
    const port = await freePort()
    const child = spawnPinned(SERVER_CORE, [process.execPath, ...profileFlags('threatfeed'), '--import=tsx', join(benchDir, 'serve-consumers.ts'), workspaceId], {
      ...process.env,
      THREATFEED_DATA_DIR: dataDir,
      THREATFEED_CONSUMER_TRACKING: tracking,
      THREATFEED_HTTP_THREADS: '1',
      PORT: String(port),
    })
    const ready = Number(await waitForLine(child, 'READY'))
    const server: Server = { name: 'threatfeed', child, port: ready, path: '/v1/threat/feeds', auth: `Bearer ${key}`, etag: '', gzipEtag: '', idleCpu: 0 }
    server.etag = (await fetchRaw(server, {})).etag
    server.gzipEtag = (await fetchRaw(server, { 'accept-encoding': 'gzip' })).etag
    if ((await fetchRaw(server, { 'if-none-match': server.gzipEtag, 'accept-encoding': 'gzip' })).status !== 304) throw new Error(`tracking ${tracking}: no 304 to its own ETag`)
    return server
  }
  const subjects = {
    'tracking on': await start('on'),
    'tracking off': await start('off'),
    'uWS floor': await startUwsFloor('uWS floor', floorRaw, join(tmp, 'nginx', 'html'), floorTags, tf.auth),
    'uWS floor + address': await startUwsFloor('uWS floor', floorRaw, join(tmp, 'nginx', 'html'), floorTags, tf.auth, { FLOOR_ADDRESS: '1' }),
    // The anchor in the same rounds: what tracking costs against issue 17's 304 line.
    nginx,
  }
  type Which = keyof typeof subjects
  const names = Object.keys(subjects) as Which[]
  const results = Object.fromEntries(names.map((n) => [n, [] as WrkResult[]])) as Record<Which, WrkResult[]>
  for (let round = 0; round < rounds; round++) {
    // Rotate the order each round so drift in the machine's state hits every subject alike.
    for (const which of names.map((_, i) => names[(i + round) % names.length]!)) {
      const r = await runWrk(subjects[which], '304', connections, false, round === 0 ? `${CONSUMER_CASE} ${which}` : '')
      results[which].push(r)
      process.stderr.write(`  ${CONSUMER_CASE} ${which}: ${r.rps.toFixed(0)} req/s, ${r.cpuUsPerRequest.toFixed(2)} µs CPU/req, steal ${r.steal === null ? '?' : r.steal.toFixed(1)} %, preempted ${r.preemptedPerK.toFixed(2)}/1000, load ${loadavg()[0]!.toFixed(1)}${r.errors > 0 ? `, ${r.errors} errors` : ''}\n`)
    }
  }
  for (const n of names) rows.push(rowOf(`${CONSUMER_CASE}, ${connections} conns`, n.startsWith('tracking') ? `threatfeed, ${n}` : n, results[n]))
  const pair = (a: Which, b: Which, target: number | null): void => {
    const per = results[a].map((r, i) => r.cpuUsPerRequest / results[b][i]!.cpuUsPerRequest)
    const value = median(per)
    ratios.push({ case: CONSUMER_CASE, label: `server CPU per 304, ${a} / ${b} (per round ${spread(per)})`, value, ...(target === null ? {} : { target: `<= ${target}`, pass: value <= target }) })
    const diff = median(results[a].map((r, i) => r.cpuUsPerRequest - results[b][i]!.cpuUsPerRequest))
    ratios.push({ case: CONSUMER_CASE, label: `server CPU per 304, ${a} − ${b}, µs (median of per-round differences)`, value: diff })
  }
  pair('tracking on', 'tracking off', 1.03)
  pair('uWS floor + address', 'uWS floor', null)
  pair('tracking off', 'nginx', 1.1)
  pair('tracking on', 'nginx', null)
  pair('uWS floor + address', 'nginx', null)
  pair('tracking off', 'uWS floor', 1.1)
  pair('tracking on', 'uWS floor + address', 1.1)
  for (const [n, s] of Object.entries(subjects)) if (n !== 'nginx') s.child.kill('SIGTERM')
}

if (ONLY === '' || CONSUMER_CASE.includes(ONLY)) await consumerTrackingCase()

report('feeds', 'Serving feeds over HTTP: threatfeed (uWS) vs nginx static files vs node:http', rows, ratios, {
  entries: ENTRIES,
  identityBytes: identity.body.length,
  gzipBytes: gzipped.body.length,
  seconds: SECONDS,
  runs: RUNS,
  idle: IDLE,
  pinning: `servers on core ${SERVER_CORE}, wrk on core ${CLIENT_CORE}`,
})
for (const s of Object.values(servers)) s.child.kill('SIGTERM')
