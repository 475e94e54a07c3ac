/**
 * HTTPS: threatfeed's own TLS listener (src/http/tls-listener.ts) raced against nginx (one
 * worker, shared session cache and tickets on) serving the same feed bytes with the same
 * certificate and key, for an ECDSA P-256 and an RSA-2048 certificate; then threatfeed with one
 * front-end thread against two. The subject is `threatfeed serve` (bin/threatfeed.js, the
 * installed command) on a store seeded with the 131,072-entry feed, consumer tracking off (as
 * nginx counts nothing either); subjects alternate run by run.
 *
 * Cases:
 *   304 polls on 16 keep-alive TLS connections (wrk);
 *   304 with a new TLS connection per request, full handshake and resumed (tls/handshake-client.ts);
 *   200 gzip on 16 keep-alive TLS connections (wrk).
 * Each row gives the server's CPU per request (user + system, /proc): for the handshake cases it
 * is the server's CPU per handshake; throughput is beside it. A server's idle CPU (measured for
 * 3 s after it starts) is taken off, as at a few dozen handshakes a second on a shared machine it
 * would otherwise count.
 *
 * Against nginx: threatfeed with THREATFEED_HTTP_THREADS=1, both servers pinned to core 0 and the
 * clients to core 1. Threads: threatfeed with 1 and with 2 front-end threads, servers and clients
 * on both cores (the client shares them: compare the CPU per answer; throughput is beside it).
 * Then session resumption: a session taken once and offered on 16 new connections (each thread
 * has its own ticket keys: with 2 threads about half resume), and before / across / after a
 * certificate rotation, on the two-thread server.
 *
 * With BENCH_BASE_TREE (lib/base.ts), the part `base` races this build against that one, both
 * with one front-end thread on core 0 (e.g. the last Node 20 build against this Node 24 one).
 *
 * Environment: BENCH_TLS_SECONDS (3), BENCH_TLS_RUNS (2), BENCH_TLS_ONLY (cases whose name
 * contains it), BENCH_TLS_KEYS (`ecdsa,rsa`), BENCH_TLS_PARTS (`nginx,threads`, plus `base` when
 * BENCH_BASE_TREE is set).
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { chmodSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:https'
import { connect } from 'node:tls'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { cpuTicks, ensureCommand, median, repoDir, report, stealPercent, type Ratio, type Row } from './lib/report.js'
import { cpuSeconds, freePort, spawnPinned, stopChildren } from './lib/processes.js'
import { seedFeedStore } from './lib/seed-feed.js'
import { TLS12_CIPHERS } from '../src/http/tls-listener.js'
import { baseNode, baseTree } from './lib/base.js'

const SECONDS = Number(process.env.BENCH_TLS_SECONDS ?? 3)
const RUNS = Number(process.env.BENCH_TLS_RUNS ?? 2)
const ONLY = process.env.BENCH_TLS_ONLY ?? ''
const KEYS = (process.env.BENCH_TLS_KEYS ?? 'ecdsa,rsa').split(',') as Array<'ecdsa' | 'rsa'>
const PARTS = (process.env.BENCH_TLS_PARTS ?? (baseTree === '' ? 'nginx,threads' : 'nginx,threads,base')).split(',')
const ENTRIES = 131_072
const SERVER_CORE = '0'
const CLIENT_CORE = '1'
const BOTH_CORES = '0,1'
const geoFixtures = join(repoDir, 'test', 'fixtures', 'geo', 'maxmind')
const feedsDir = join(repoDir, 'bench', 'feeds')
const tlsDir = join(repoDir, 'bench', 'tls')

interface Server {
  readonly name: string
  /** Where its clients run. */
  readonly clientCores: string
  readonly child: ChildProcess
  readonly port: number
  readonly path: string
  readonly auth: string
  etag: string
  /** CPU seconds per second the server spends with no request (threatfeed's timers and polls). */
  idleRate: number
}
/** `cpuUsPerRequest` less the idle rate over the run: at a few dozen handshakes a second idle work would otherwise count. */
interface Result { rps: number, errors: number, cpuUsPerRequest: number, rawCpuUsPerRequest: number, reusedShare: number }

const tmp = mkdtempSync(join(tmpdir(), 'tf-bench-tls-'))
process.on('exit', () => {
  stopChildren()
  rmSync(tmp, { recursive: true, force: true })
})
process.on('SIGINT', () => { process.exit(130) })

function fetchTls (port: number, path: string, headers: Record<string, string>): Promise<{ status: number, etag: string, body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers, agent: false, rejectUnauthorized: false, servername: 'localhost' }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, etag: String(res.headers.etag ?? ''), body: Buffer.concat(chunks) }) })
    })
    req.on('error', reject)
    req.end()
  })
}


function makeCert (name: string, type: 'ecdsa' | 'rsa', keyFile?: string): { cert: string, key: string } {
  const cert = join(tmp, `${name}.crt`)
  const key = keyFile ?? join(tmp, `${name}.key`)
  const newKey = keyFile !== undefined ? ['-key', keyFile] : ['-newkey', type === 'ecdsa' ? 'ec' : 'rsa:2048', ...(type === 'ecdsa' ? ['-pkeyopt', 'ec_paramgen_curve:P-256'] : []), '-keyout', key]
  execFileSync('openssl', ['req', '-x509', ...newKey, '-nodes', '-subj', '/CN=localhost', '-days', '30', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-out', cert], { stdio: 'ignore' })
  return { cert, key }
}

/** `threatfeed serve`, HTTPS only, `threads` front-end threads, on `cores`; ready once the feed is built. */
async function startThreatfeed (name: string, threads: number, cores: string, dataDir: string, key: string, cert: { cert: string, key: string }, build = { tree: repoDir, node: process.execPath }): Promise<Server> {
  const port = await freePort()
  const child = spawnPinned(cores, [build.node, join(build.tree, 'bin', 'threatfeed.js'), 'serve'], {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: 'off',
    THREATFEED_DATA_DIR: dataDir,
    THREATFEED_TLS_PORT: String(port),
    THREATFEED_TLS_CERT: cert.cert,
    THREATFEED_TLS_KEY: cert.key,
    THREATFEED_HTTP_THREADS: String(threads),
    THREATFEED_CONSUMER_TRACKING: 'off',
    THREATFEED_LOG_LEVEL: 'warn',
    THREATFEED_GEO_COUNTRY_DB: join(geoFixtures, 'GeoLite2-Country-Test.mmdb'),
    THREATFEED_GEO_ASN_DB: join(geoFixtures, 'GeoLite2-ASN-Test.mmdb'),
  })
  child.stdout!.resume()
  const s: Server = { name, clientCores: cores === SERVER_CORE ? CLIENT_CORE : BOTH_CORES, child, port, path: '/v1/threat/feeds', auth: `Bearer ${key}`, etag: '', idleRate: 0 }
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`threatfeed serve exited with ${child.exitCode}`)
    const r = await fetchTls(port, s.path, { authorization: s.auth }).catch(() => null)
    if (r?.status === 200) return s
    // The first start may build dist/ (bin/threatfeed.js) and every start builds the feed.
    if (i > 1200) throw new Error('threatfeed serve did not answer within 10 minutes')
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
}

async function startNginx (name: string, identity: Buffer, gzip: Buffer, cert: { cert: string, key: string }): Promise<Server> {
  const prefix = join(tmp, name)
  chmodSync(tmp, 0o755)
  for (const d of ['logs', 'html', 'tmp']) mkdirSync(join(prefix, d), { recursive: true })
  writeFileSync(join(prefix, 'html', 'feed.txt'), identity)
  writeFileSync(join(prefix, 'html', 'feed.txt.gz'), gzip)
  const port = await freePort()
  const conf = readFileSync(join(tlsDir, 'nginx-tls.conf.template'), 'utf8').replaceAll('{{PREFIX}}', prefix).replaceAll('{{PORT}}', String(port))
    .replaceAll('{{CERT}}', cert.cert).replaceAll('{{KEY}}', cert.key).replaceAll('{{CIPHERS}}', TLS12_CIPHERS)
  writeFileSync(join(prefix, 'nginx.conf'), conf)
  const child = spawnPinned(SERVER_CORE, ['nginx', '-p', prefix, '-c', join(prefix, 'nginx.conf')])
  for (let i = 0; ; i++) {
    try {
      await fetchTls(port, '/feed.txt', {})
      return { name: 'nginx', clientCores: CLIENT_CORE, child, port, path: '/feed.txt', auth: '', etag: '', idleRate: 0 }
    } catch (e) {
      if (i > 100) throw e
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
}

type Kind = '304 keep-alive' | '304 full handshake' | '304 resumed' | '200 gzip'

function headersOf (s: Server, kind: Kind): Record<string, string> {
  return { ...(s.auth === '' ? {} : { Authorization: s.auth }), ...(kind === '200 gzip' ? { 'Accept-Encoding': 'gzip' } : { 'If-None-Match': s.etag }) }
}

async function measure (s: Server, kind: Kind): Promise<Result> {
  const pid = s.child.pid!
  const before = cpuSeconds(pid)
  const headers = headersOf(s, kind)
  let argv: string[]
  let env: NodeJS.ProcessEnv = process.env
  if (kind === '304 keep-alive' || kind === '200 gzip') {
    argv = ['taskset', '-c', s.clientCores, 'wrk', '-t1', '-c16', `-d${SECONDS}s`, '--timeout', '10s', '-s', join(feedsDir, 'wrk-report.lua'), `https://127.0.0.1:${s.port}${s.path}`]
    env = { ...process.env, WRK_HEADERS: Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\n'), WRK_CLOSE: '0' }
  } else {
    argv = ['taskset', '-c', s.clientCores, process.execPath, '--import=tsx', join(tlsDir, 'handshake-client.ts'), String(s.port), kind === '304 resumed' ? 'resumed' : 'full', String(SECONDS), '8', s.path, JSON.stringify(headers)]
  }
  const started = performance.now()
  const child = spawn(argv[0]!, argv.slice(1), { cwd: repoDir, env, stdio: ['ignore', 'pipe', 'inherit'] })
  const out: Buffer[] = []
  child.stdout.on('data', (c: Buffer) => out.push(c))
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  const raw = cpuSeconds(pid) - before
  const cpu = Math.max(0, raw - s.idleRate * (performance.now() - started) / 1000)
  const text = Buffer.concat(out).toString()
  const wrk = text.split('\n').find((l) => l.startsWith('WRKJSON '))
  const hs = text.split('\n').find((l) => l.startsWith('HSJSON '))
  if (code !== 0 || (wrk ?? hs) === undefined) throw new Error(`${kind} client failed (${code}): ${text}`)
  if (wrk !== undefined) {
    const j = JSON.parse(wrk.slice(8)) as Record<string, number>
    return { rps: j.requests! / (j.duration_us! / 1e6), errors: j.connect! + j.read! + j.write! + j.status! + j.timeout!, cpuUsPerRequest: cpu * 1e6 / j.requests!, rawCpuUsPerRequest: raw * 1e6 / j.requests!, reusedShare: 0 }
  }
  const j = JSON.parse(hs!.slice(7)) as { requests: number, reused: number, errors: number, seconds: number, statuses: Record<string, number> }
  const bad = Object.entries(j.statuses).filter(([k]) => k !== '304').reduce((a, [, n]) => a + n, 0)
  return { rps: j.requests / j.seconds, errors: j.errors + bad, cpuUsPerRequest: cpu * 1e6 / j.requests, rawCpuUsPerRequest: raw * 1e6 / j.requests, reusedShare: j.reused / Math.max(1, j.requests) }
}

/** One new connection offering `session`: whether the server resumed it, and the session it gave. */
function hello (s: Server, session?: Buffer): Promise<{ reused: boolean, session: Buffer | undefined }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: s.port, servername: 'localhost', rejectUnauthorized: false, session })
    let got: Buffer | undefined
    let reused = false
    socket.on('session', (x: Buffer) => { got = x })
    socket.on('secureConnect', () => {
      reused = socket.isSessionReused()
      socket.write(`GET ${s.path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${s.auth}\r\nIf-None-Match: ${s.etag}\r\nConnection: close\r\n\r\n`)
    })
    socket.on('data', () => {})
    socket.on('close', () => { resolve({ reused, session: got }) })
    socket.on('error', reject)
  })
}

/** The share of `tries` new connections, each offering the same session, that the server resumed. */
async function resumedShare (s: Server, session: Buffer | undefined, tries = 16): Promise<number> {
  let reused = 0
  for (let i = 0; i < tries; i++) if ((await hello(s, session)).reused) reused++
  return reused / tries
}

/**
 * Sessions resumed before, across and after a certificate rotation (the same files serve every
 * subject; threatfeed reloads them within its 1 s poll): the share of 16 connections resumed.
 */
async function resumptionAcrossRotation (servers: Server[], certFile: string, keyFile: string, type: 'ecdsa' | 'rsa'): Promise<Record<string, { before: number, across: number, after: number }>> {
  const firsts = await Promise.all(servers.map((s) => hello(s)))
  const before = await Promise.all(servers.map((s, i) => resumedShare(s, firsts[i]!.session)))
  const next = makeCert(`rotated-${type}`, type, keyFile)
  writeFileSync(certFile, readFileSync(next.cert))
  await new Promise((resolve) => setTimeout(resolve, 2500))
  const out: Record<string, { before: number, across: number, after: number }> = {}
  for (const [i, s] of servers.entries()) {
    const across = await resumedShare(s, firsts[i]!.session)
    const after = await resumedShare(s, (await hello(s)).session)
    out[s.name] = { before: before[i]!, across, after }
  }
  return out
}

/** Checks a server answers the feed's bytes and a 304, takes its ETag and its idle CPU. */
async function prepare (s: Server, gzipped: Buffer): Promise<void> {
  const auth: Record<string, string> = s.auth === '' ? {} : { authorization: s.auth }
  const g = await fetchTls(s.port, s.path, { ...auth, 'accept-encoding': 'gzip' })
  if (!g.body.equals(gzipped)) throw new Error(`${s.name} does not serve the same gzip bytes`)
  s.etag = (await fetchTls(s.port, s.path, auth)).etag
  if ((await fetchTls(s.port, s.path, { ...auth, 'if-none-match': s.etag })).status !== 304) throw new Error(`${s.name}: no 304 on its own ETag`)
  const c0 = cpuSeconds(s.child.pid!)
  await new Promise((resolve) => setTimeout(resolve, 3000))
  s.idleRate = (cpuSeconds(s.child.pid!) - c0) / 3
  process.stderr.write(`  ${s.name} idle: ${(s.idleRate * 1000).toFixed(1)} ms CPU per second\n`)
}

/** Every case, subjects alternating; rows, and `b / a` ratios (with the issue's targets when `targets`). */
async function raceCases (label: string, a: Server, b: Server, targets: boolean): Promise<Map<Kind, Record<string, Result[]>>> {
  const all = new Map<Kind, Record<string, Result[]>>()
  for (const kind of CASES) {
    const res: Record<string, Result[]> = { [a.name]: [], [b.name]: [] }
    for (let round = 0; round < RUNS; round++) {
      for (const s of round % 2 === 0 ? [b, a] : [a, b]) {
        const r = await measure(s, kind)
        res[s.name]!.push(r)
        process.stderr.write(`  ${label} ${kind} ${s.name}: ${r.rps.toFixed(0)} req/s, ${r.cpuUsPerRequest.toFixed(1)} µs CPU/req, errors ${r.errors}${kind === '304 resumed' ? `, resumed ${(100 * r.reusedShare).toFixed(0)} %` : ''}\n`)
      }
    }
    all.set(kind, res)
    const name = `${label}: ${kind}`
    for (const subject of [b.name, a.name]) {
      const rs = res[subject]!
      rows.push({ case: name, subject, value: median(rs.map((r) => r.rps)), unit: 'req/s', runs: rs.map((r) => r.rps), extra: { cpu_us_per_req: median(rs.map((r) => r.cpuUsPerRequest)), cpu_us_per_req_with_idle: median(rs.map((r) => r.rawCpuUsPerRequest)), errors: rs.reduce((n, r) => n + r.errors, 0), ...(kind === '304 resumed' ? { resumed_share: median(rs.map((r) => r.reusedShare)) } : {}) } })
    }
    const cpu = median(res[b.name]!.map((r, i) => r.cpuUsPerRequest / res[a.name]![i]!.cpuUsPerRequest))
    const rps = median(res[b.name]!.map((r, i) => r.rps / res[a.name]![i]!.rps))
    const handshake = kind === '304 full handshake' || kind === '304 resumed'
    const per = handshake ? 'handshake' : 'request'
    if (targets && kind === '304 keep-alive') ratios.push({ case: name, label: `throughput, ${b.name} / ${a.name}`, value: rps, target: '>= 0.9', pass: rps >= 0.9 })
    else ratios.push({ case: name, label: `throughput, ${b.name} / ${a.name}`, value: rps })
    if (targets && handshake) ratios.push({ case: name, label: `server CPU per ${per}, ${b.name} / ${a.name}`, value: cpu, target: '<= 1.1', pass: cpu <= 1.1 })
    else ratios.push({ case: name, label: `server CPU per ${per}, ${b.name} / ${a.name}`, value: cpu })
  }
  return all
}

for (const [cmd, pkg] of [['wrk', 'wrk'], ['nginx', 'nginx'], ['taskset', 'util-linux'], ['openssl', 'openssl']] as const) {
  if (!ensureCommand(cmd, pkg)) throw new Error(`bench/tls needs ${cmd}`)
}
process.stderr.write(`bench/tls: seeding ${ENTRIES} rules…\n`)
const dataDir = join(tmp, 'data')
const { key } = await seedFeedStore(dataDir, ENTRIES)
const rows: Row[] = []
const ratios: Ratio[] = []
const resumption: Record<string, unknown> = {}
const steal0 = cpuTicks()
const CASES: Kind[] = (['304 keep-alive', '304 full handshake', '304 resumed', '200 gzip'] as const).filter((k) => k.includes(ONLY))

for (const type of KEYS) {
  const cert = makeCert(`server-${type}`, type)
  const label = type === 'ecdsa' ? 'ECDSA P-256' : 'RSA-2048'
  // Servers of a part are stopped before the next starts, so that none idles beside a race.
  if (PARTS.includes('nginx')) {
    process.stderr.write(`bench/tls: ${type}: threatfeed (1 thread, core ${SERVER_CORE}) against nginx (1 worker, core ${SERVER_CORE})…\n`)
    const tf = await startThreatfeed('threatfeed', 1, SERVER_CORE, dataDir, key, cert)
    const identity = await fetchTls(tf.port, tf.path, { authorization: tf.auth })
    const gzipped = await fetchTls(tf.port, tf.path, { authorization: tf.auth, 'accept-encoding': 'gzip' })
    if (identity.status !== 200 || gzipped.status !== 200) throw new Error(`threatfeed answered ${identity.status}/${gzipped.status}`)
    const nginx = await startNginx(`nginx-${type}`, identity.body, gzipped.body, cert)
    for (const s of [tf, nginx]) await prepare(s, gzipped.body)
    await raceCases(label, nginx, tf, true)
    await stopServers([tf, nginx])
  }
  if (PARTS.includes('base') && baseTree !== '') {
    process.stderr.write(`bench/tls: ${type}: threatfeed against the base build (${baseTree}, ${baseNode}), 1 thread each, core ${SERVER_CORE}…\n`)
    const tf = await startThreatfeed('threatfeed', 1, SERVER_CORE, dataDir, key, cert)
    const base = await startThreatfeed('threatfeed (base)', 1, SERVER_CORE, dataDir, key, cert, { tree: baseTree, node: baseNode })
    const gzipped = await fetchTls(tf.port, tf.path, { authorization: tf.auth, 'accept-encoding': 'gzip' })
    for (const s of [tf, base]) await prepare(s, gzipped.body)
    await raceCases(`${label}, base`, base, tf, false)
    await stopServers([tf, base])
  }
  if (PARTS.includes('threads')) {
    process.stderr.write(`bench/tls: ${type}: threatfeed with 1 and with 2 front-end threads (cores ${BOTH_CORES}, clients too)…\n`)
    const one = await startThreatfeed('threatfeed 1 thread', 1, BOTH_CORES, dataDir, key, cert)
    const two = await startThreatfeed('threatfeed 2 threads', 2, BOTH_CORES, dataDir, key, cert)
    const gzipped = await fetchTls(one.port, one.path, { authorization: one.auth, 'accept-encoding': 'gzip' })
    for (const s of [one, two]) await prepare(s, gzipped.body)
    const res = await raceCases(`${label}, threads`, one, two, false)
    const full = res.get('304 full handshake')
    const resumed = res.get('304 resumed')
    const acrossThreads = await resumedShare(two, (await hello(two)).session, 32)
    const oneThread = await resumedShare(one, (await hello(one)).session, 32)
    resumption[label] = {
      offered_on_new_connections: { [one.name]: oneThread, [two.name]: acrossThreads },
      // A resumption that fails is a full handshake: what it costs over a resumed one, per handshake.
      failed_resumption_extra_cpu_us: full !== undefined && resumed !== undefined ? median(full[one.name]!.map((r) => r.cpuUsPerRequest)) - median(resumed[one.name]!.map((r) => r.cpuUsPerRequest)) : null,
      rotation: await resumptionAcrossRotation([one, two], cert.cert, cert.key, type),
    }
    process.stderr.write(`  ${label}: resumption: ${JSON.stringify(resumption[label])}\n`)
    await stopServers([one, two])
  }
}

async function stopServers (servers: Server[]): Promise<void> {
  await Promise.all(servers.map(async (s) => {
    if (s.child.exitCode !== null) return
    const exited = new Promise((resolve) => s.child.once('exit', resolve))
    s.child.kill('SIGTERM')
    await exited
  }))
}

report('tls', 'HTTPS: threatfeed (uWS SSLApp) vs nginx (1 worker), same certificate and bytes; threatfeed with 1 and 2 front-end threads', rows, ratios, {
  entries: ENTRIES,
  seconds: SECONDS,
  runs: RUNS,
  pinning: `against nginx: servers on core ${SERVER_CORE}, clients on core ${CLIENT_CORE}; threads: servers and clients on cores ${BOTH_CORES}`,
  stealPercent: stealPercent(steal0, cpuTicks()),
  resumption,
})
