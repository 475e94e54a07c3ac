/**
 * The CrowdSec bouncer API (issue 31, docs/bouncers.md) against CrowdSec's own Local API, in one
 * run, on the same 131,072 decisions (hosts two apart from 10.0.0.0, so nothing coalesces and
 * both serve exactly that many):
 * - a startup pull, `GET /v1/decisions/stream?startup=true` with `X-Api-Key` and
 *   `Accept-Encoding: gzip` as the bouncers send it: bytes on the wire, wall time, server CPU;
 * - idle stream polls, `GET /v1/decisions/stream?` (nothing changed since the bouncer's last
 *   pull) at 64 connections: answers/s and server CPU per answer;
 * - threatfeed's feed 304 at 64 connections in the same rounds: the denominator of the idle
 *   poll's target (≤ 1.5× a 304's CPU); the startup pull's target is less CPU than LAPI's.
 *
 * LAPI is Debian's crowdsec 1.4.6 started offline by bouncers/crowdsec-lapi.sh (LAPI only, no
 * agent, no Central API, sqlite with WAL in a tmpfs directory), its decisions imported by
 * `cscli decisions import` with a 24h duration. threatfeed is `threatfeed serve` with one HTTP
 * thread on a store seeded with the same hosts. Both servers are pinned to core 0 and the
 * clients to core 1; subjects alternate run by run; CPU is user + system from /proc.
 *
 * Environment: BENCH_BOUNCERS_SECONDS (10: LAPI answers an idle poll of this store in tenths of
 * a second to seconds), BENCH_BOUNCERS_RUNS (3), BENCH_BOUNCERS_CONNS (64),
 * BENCH_BOUNCERS_LAPI_DIR (a tmpfs directory for LAPI's sqlite: /dev/shm when it exists).
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { gunzipSync } from 'node:zlib'
import { cpuSeconds, freePort, spawnPinned, stopChildren } from './lib/processes.js'
import { benchDir, cpuTicks, ensureCommand, median, repoDir, report, stealPercent, type Ratio, type Row } from './lib/report.js'
import { seedFeedStore } from './lib/seed-feed.js'
import { benchServerEnv } from './lib/server-env.js'

const SECONDS = Number(process.env.BENCH_BOUNCERS_SECONDS ?? 10)
const RUNS = Number(process.env.BENCH_BOUNCERS_RUNS ?? 3)
const CONNS = Number(process.env.BENCH_BOUNCERS_CONNS ?? 64)
const ENTRIES = 131_072
const SERVER_CORE = '0'
const CLIENT_CORE = '1'
const LAPI_SCRIPT = join(benchDir, 'bouncers', 'crowdsec-lapi.sh')
const STREAM = '/v1/decisions/stream'
/** What the Debian bouncers send besides their key (their User-Agent is `<name>/-`). */
const BOUNCER_HEADERS = { 'user-agent': 'crowdsec-firewall-bouncer/-', 'accept-encoding': 'gzip' }

if (!ensureCommand('wrk', 'wrk') || !ensureCommand('taskset', 'util-linux')) process.exit(1)
const haveLapi = existsSync('/usr/bin/crowdsec') && existsSync('/usr/bin/cscli')
if (!haveLapi) console.log('bench/bouncers: Debian\'s crowdsec package is not installed; LAPI\'s rows are skipped')
process.on('exit', stopChildren)

const dir = mkdtempSync(join(tmpdir(), 'tf-bench-bouncers-'))
const lapiDir = mkdtempSync(join(process.env.BENCH_BOUNCERS_LAPI_DIR ?? (existsSync('/dev/shm') ? '/dev/shm' : tmpdir()), 'tf-bench-lapi-'))
const hosts = Array.from({ length: ENTRIES }, (_, i) => { const a = 0x0a000000 + i * 2; return `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}` })

function lapi (...args: string[]): string {
  const r = spawnSync(LAPI_SCRIPT, args, { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`crowdsec-lapi.sh ${args[0]!}: ${r.stderr}`)
  return r.stdout.trim()
}
process.on('exit', () => { if (haveLapi) spawnSync(LAPI_SCRIPT, ['stop', lapiDir]); rmSync(lapiDir, { recursive: true, force: true }); rmSync(dir, { recursive: true, force: true }) })

interface Subject { readonly name: string, readonly port: number, readonly pid: number, readonly headers: Record<string, string> }
const subjects: Subject[] = []

if (haveLapi) {
  const port = await freePort()
  const pid = Number(lapi('start', lapiDir, String(port)))
  // Every thread of the Go runtime on the server core, as the node server is.
  spawnSync('taskset', ['-a', '-p', '-c', SERVER_CORE, String(pid)], { stdio: 'ignore' })
  const file = join(dir, 'hosts.txt')
  writeFileSync(file, hosts.join('\n') + '\n')
  const t0 = Date.now()
  lapi('import', lapiDir, file, '24h')
  console.log(`bench/bouncers: LAPI (pid ${pid}) holds ${ENTRIES} decisions, imported in ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  subjects.push({ name: 'CrowdSec LAPI 1.4.6', port, pid, headers: { 'x-api-key': lapi('bouncer', lapiDir, 'bench') } })
}

console.log(`bench/bouncers: seeding threatfeed with ${ENTRIES} rules…`)
const { key } = await seedFeedStore(join(dir, 'data'), ENTRIES)
const server = spawnPinned(SERVER_CORE, [process.execPath, '--import=tsx', join(repoDir, 'src', 'cli', 'run.ts'), 'serve'], {
  ...process.env,
  ...benchServerEnv(join(dir, 'data')),
  THREATFEED_LOG_LEVEL: 'info',
  THREATFEED_HTTP_THREADS: '1',
})
const port = await new Promise<number>((resolve, reject) => {
  const timer = setTimeout(() => { reject(new Error('no "listening" line within 180 s')) }, 180_000)
  createInterface({ input: server.stdout! }).on('line', (line) => {
    try {
      const rec = JSON.parse(line) as { msg?: string, port?: number }
      if (rec.msg === 'listening' && typeof rec.port === 'number') { clearTimeout(timer); resolve(rec.port) }
    } catch {
      // Not a log line.
    }
  })
})
const threatfeed: Subject = { name: 'threatfeed', port, pid: server.pid!, headers: { 'x-api-key': key } }
subjects.push(threatfeed)

interface Answer { status: number, headers: Record<string, string | string[] | undefined>, body: Buffer, ms: number }
function get (s: Subject, path: string, headers: Record<string, string>): Promise<Answer> {
  const t0 = process.hrtime.bigint()
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: s.port, path, headers: { ...s.headers, ...headers }, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), ms: Number(process.hrtime.bigint() - t0) / 1e6 }) })
    })
    req.on('error', reject)
    req.end()
  })
}
const decoded = (a: Answer): string => (a.headers['content-encoding'] === 'gzip' ? gunzipSync(a.body) : a.body).toString()
const feedPath = '/v1/threat/feeds'
const feedAuth = { authorization: `Bearer ${key}` }

// threatfeed's first build of the feed, out of the way; its gzip ETag for the 304s.
let etag = ''
for (let i = 0; i < 900 && etag === ''; i++) {
  const r = await get(threatfeed, feedPath, { ...feedAuth, 'accept-encoding': 'gzip' })
  if (r.status === 200) etag = String(r.headers.etag)
  else await new Promise((resolve) => setTimeout(resolve, 200))
}
if (etag === '') throw new Error('threatfeed did not serve its feed within 3 minutes')

/** A startup pull: bytes on the wire, wall ms, server CPU s; checks it holds every decision. */
async function startup (s: Subject): Promise<{ bytes: number, ms: number, cpu: number, gzip: boolean }> {
  const before = cpuSeconds(s.pid)
  const r = await get(s, `${STREAM}?startup=true`, BOUNCER_HEADERS)
  // Go's and Node's CPU counters settle a tick after the last write.
  await new Promise((resolve) => setTimeout(resolve, 50))
  const cpu = cpuSeconds(s.pid) - before
  if (r.status !== 200) throw new Error(`${s.name}: startup pull answered ${r.status}: ${r.body.toString().slice(0, 200)}`)
  const body = JSON.parse(decoded(r)) as { new: Array<{ value: string }> | null }
  if (body.new?.length !== ENTRIES) throw new Error(`${s.name}: startup pull held ${body.new?.length ?? 0} decisions, not ${ENTRIES}`)
  return { bytes: r.body.length, ms: r.ms, cpu, gzip: r.headers['content-encoding'] === 'gzip' }
}

interface Load { rps: number, cpuUs: number, steal: number | null }
async function wrk (s: Subject, path: string, headers: Record<string, string>): Promise<Load> {
  const ticks = cpuTicks()
  const before = cpuSeconds(s.pid)
  const lines = Object.entries({ ...s.headers, ...headers }).map(([k, v]) => `${k}: ${v}`).join('\n')
  const child = spawn('taskset', ['-c', CLIENT_CORE, 'wrk', '-t1', `-c${CONNS}`, `-d${SECONDS}s`, '--timeout', '30s', '-s', join(benchDir, 'feeds', 'wrk-report.lua'), `http://127.0.0.1:${s.port}${path}`], {
    env: { ...process.env, WRK_HEADERS: lines, WRK_CLOSE: '0', WRK_ROTATE: '' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let text = ''
  child.stdout.on('data', (c: Buffer) => { text += c.toString() })
  await new Promise((resolve) => child.on('close', resolve))
  const cpu = cpuSeconds(s.pid) - before
  const line = text.split('\n').find((l) => l.startsWith('WRKJSON '))
  if (line === undefined) throw new Error(`wrk: ${text}`)
  const j = JSON.parse(line.slice(8)) as Record<string, number>
  const errors = j.connect! + j.read! + j.write! + j.status! + j.timeout!
  if (errors > 0) throw new Error(`${s.name} ${path}: ${errors} errors (${line})`)
  return { rps: j.requests! / (j.duration_us! / 1e6), cpuUs: cpu * 1e6 / j.requests!, steal: stealPercent(ticks, cpuTicks()) }
}

const pulls = new Map<string, Array<{ bytes: number, ms: number, cpu: number, gzip: boolean }>>(subjects.map((s) => [s.name, []]))
const idle = new Map<string, Load[]>(subjects.map((s) => [s.name, []]))
const feed304: Load[] = []
for (let run = 0; run < RUNS; run++) {
  const order = run % 2 === 0 ? subjects : [...subjects].reverse()
  for (const s of order) {
    const p = await startup(s)
    pulls.get(s.name)!.push(p)
    console.log(`  ${s.name}: startup pull ${p.bytes} B${p.gzip ? ' gzip' : ''}, ${p.ms.toFixed(0)} ms, ${p.cpu.toFixed(2)} s CPU`)
    // The pull above made the bouncer current: every poll now answers nothing new.
    const empty = JSON.parse(decoded(await get(s, `${STREAM}?`, BOUNCER_HEADERS))) as { new: unknown[] | null, deleted: unknown[] | null }
    if ((empty.new?.length ?? 0) + (empty.deleted?.length ?? 0) !== 0) throw new Error(`${s.name}: an idle poll answered ${JSON.stringify(empty).slice(0, 200)}`)
    const l = await wrk(s, `${STREAM}?`, BOUNCER_HEADERS)
    idle.get(s.name)!.push(l)
    console.log(`  ${s.name}: idle stream poll, ${CONNS} conns: ${l.rps.toFixed(0)} answers/s, ${l.cpuUs.toFixed(1)} µs CPU/answer, steal ${l.steal?.toFixed(1) ?? '?'} %, load ${loadavg()[0]!.toFixed(1)}`)
    if (s === threatfeed) {
      const f = await wrk(s, feedPath, { ...feedAuth, 'accept-encoding': 'gzip', 'if-none-match': etag })
      feed304.push(f)
      console.log(`  threatfeed: feed 304, ${CONNS} conns: ${f.rps.toFixed(0)} answers/s, ${f.cpuUs.toFixed(1)} µs CPU/answer, steal ${f.steal?.toFixed(1) ?? '?'} %`)
    }
  }
}
server.kill('SIGTERM')

const rows: Row[] = []
for (const s of subjects) {
  const p = pulls.get(s.name)!
  rows.push({ case: `startup pull, ${ENTRIES} decisions`, subject: s.name, value: median(p.map((x) => x.cpu)), unit: 's CPU', runs: p.map((x) => x.cpu), extra: { bytes: median(p.map((x) => x.bytes)), gzip: p[0]!.gzip ? 'yes' : 'no', wall_ms: median(p.map((x) => x.ms)) } })
}
for (const s of subjects) {
  const l = idle.get(s.name)!
  rows.push({ case: `idle stream poll, ${CONNS} conns`, subject: s.name, value: median(l.map((x) => x.rps)), unit: 'answers/s', runs: l.map((x) => x.rps), extra: { cpu_us_per_answer: median(l.map((x) => x.cpuUs)), steal_pct: median(l.map((x) => x.steal ?? NaN)) } })
}
rows.push({ case: `feed 304, ${CONNS} conns`, subject: 'threatfeed', value: median(feed304.map((x) => x.rps)), unit: 'answers/s', runs: feed304.map((x) => x.rps), extra: { cpu_us_per_answer: median(feed304.map((x) => x.cpuUs)), steal_pct: median(feed304.map((x) => x.steal ?? NaN)) } })

const tfIdle = median(idle.get('threatfeed')!.map((x) => x.cpuUs))
const tf304 = median(feed304.map((x) => x.cpuUs))
const perRound = idle.get('threatfeed')!.map((x, i) => x.cpuUs / feed304[i]!.cpuUs)
const ratios: Ratio[] = [
  { case: 'cpu', label: `idle stream poll / feed 304, server CPU per answer (per round ${Math.min(...perRound).toFixed(2)}–${Math.max(...perRound).toFixed(2)})`, value: tfIdle / tf304, target: '<= 1.5', pass: tfIdle / tf304 <= 1.5 },
]
if (haveLapi) {
  const lapiName = subjects[0]!.name
  const tfPull = median(pulls.get('threatfeed')!.map((x) => x.cpu))
  const lapiPull = median(pulls.get(lapiName)!.map((x) => x.cpu))
  ratios.push(
    { case: 'cpu', label: 'startup pull, threatfeed / LAPI server CPU', value: tfPull / lapiPull, target: '< 1', pass: tfPull < lapiPull },
    { case: 'bytes', label: 'startup pull, threatfeed / LAPI bytes on the wire', value: median(pulls.get('threatfeed')!.map((x) => x.bytes)) / median(pulls.get(lapiName)!.map((x) => x.bytes)) },
    { case: 'cpu', label: 'idle stream poll, LAPI / threatfeed server CPU per answer', value: median(idle.get(lapiName)!.map((x) => x.cpuUs)) / tfIdle },
  )
}
report('bouncers', 'CrowdSec bouncer API: startup pull and idle stream polls against CrowdSec LAPI, the feed 304 as denominator', rows, ratios, {
  entries: ENTRIES, connections: CONNS, seconds: SECONDS, runs: RUNS, lapi: haveLapi ? 'crowdsec 1.4.6 (Debian), LAPI only, sqlite WAL on tmpfs' : 'absent', load: loadavg()[0],
})
