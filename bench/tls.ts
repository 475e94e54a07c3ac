/**
 * HTTPS: threatfeed's own TLS listener (src/http/tls-listener.ts, one front-end thread) raced
 * against nginx (one worker, shared session cache and tickets on) serving the same feed bytes
 * with the same certificate and key, for an ECDSA P-256 and an RSA-2048 certificate. Servers run
 * pinned to core 0, clients to core 1; subjects alternate run by run.
 *
 * Cases (the 131,072-entry feed built by the real FeedService, as bench/feeds.ts builds it):
 *   304 polls on 16 keep-alive TLS connections (wrk);
 *   304 with a new TLS connection per request, full handshake and resumed (tls/handshake-client.ts);
 *   200 gzip on 16 keep-alive TLS connections (wrk).
 * Each row gives the server's CPU per request (user + system, /proc): for the handshake cases it
 * is the server's CPU per handshake, the target; throughput is beside it. A server's idle CPU
 * (measured for 3 s after it starts) is taken off, as at a few dozen handshakes a second on a
 * shared machine it would otherwise count. Then a check of session resumption across a
 * certificate rotation. threatfeed is started with THREATFEED_HTTP_THREADS=1, the comparison the
 * issue asks for once the front end has threads; until then it has one.
 *
 * Environment: BENCH_TLS_SECONDS (3), BENCH_TLS_RUNS (2), BENCH_TLS_ONLY (cases whose name
 * contains it), BENCH_TLS_KEYS (`ecdsa,rsa`).
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { chmodSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:https'
import { connect } from 'node:tls'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { cpuTicks, ensureCommand, median, repoDir, report, stealPercent, type Ratio, type Row } from './lib/report.js'
import { cpuSeconds, freePort, spawnPinned, stopChildren, waitForLine } from './lib/processes.js'
import { seedFeedStore } from './lib/seed-feed.js'
import { TLS12_CIPHERS } from '../src/http/tls-listener.js'

const SECONDS = Number(process.env.BENCH_TLS_SECONDS ?? 3)
const RUNS = Number(process.env.BENCH_TLS_RUNS ?? 2)
const ONLY = process.env.BENCH_TLS_ONLY ?? ''
const KEYS = (process.env.BENCH_TLS_KEYS ?? 'ecdsa,rsa').split(',') as Array<'ecdsa' | 'rsa'>
const ENTRIES = 131_072
const SERVER_CORE = '0'
const CLIENT_CORE = '1'
const feedsDir = join(repoDir, 'bench', 'feeds')
const tlsDir = join(repoDir, 'bench', 'tls')

type Subject = 'threatfeed' | 'nginx'
interface Server {
  readonly name: Subject
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

async function startThreatfeed (dataDir: string, workspaceId: string, key: string, cert: { cert: string, key: string }): Promise<Server> {
  const port = await freePort()
  const child = spawnPinned(SERVER_CORE, [process.execPath, '--import=tsx', join(feedsDir, 'serve-threatfeed.ts'), workspaceId], {
    ...process.env, THREATFEED_DATA_DIR: dataDir, PORT: 'off', THREATFEED_TLS_PORT: String(port), THREATFEED_TLS_CERT: cert.cert, THREATFEED_TLS_KEY: cert.key, THREATFEED_HTTP_THREADS: '1',
  })
  await waitForLine(child, 'READY')
  return { name: 'threatfeed', child, port, path: '/v1/threat/feeds', auth: `Bearer ${key}`, etag: '', idleRate: 0 }
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
      return { name: 'nginx', child, port, path: '/feed.txt', auth: '', etag: '', idleRate: 0 }
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
    argv = ['taskset', '-c', CLIENT_CORE, 'wrk', '-t1', '-c16', `-d${SECONDS}s`, '--timeout', '10s', '-s', join(feedsDir, 'wrk-report.lua'), `https://127.0.0.1:${s.port}${s.path}`]
    env = { ...process.env, WRK_HEADERS: Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\n'), WRK_CLOSE: '0' }
  } else {
    argv = ['taskset', '-c', CLIENT_CORE, process.execPath, '--import=tsx', join(tlsDir, 'handshake-client.ts'), String(s.port), kind === '304 resumed' ? 'resumed' : 'full', String(SECONDS), '8', s.path, JSON.stringify(headers)]
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

/** Is a session from before a rotation resumed after it? Uses threatfeed's reload on file change. */
async function resumptionAcrossRotation (s: Server, certFile: string, keyFile: string, type: 'ecdsa' | 'rsa'): Promise<{ before: boolean, after: boolean, afterThat: boolean }> {
  const hello = (session?: Buffer): Promise<{ reused: boolean, session: Buffer | undefined }> => new Promise((resolve, reject) => {
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
  const first = await hello()
  const before = (await hello(first.session)).reused
  const next = makeCert(`rotated-${type}`, type, keyFile)
  writeFileSync(certFile, readFileSync(next.cert))
  await new Promise((resolve) => setTimeout(resolve, 2500))
  const after = await hello(first.session)
  const afterThat = (await hello(after.session)).reused
  return { before, after: after.reused, afterThat }
}

for (const [cmd, pkg] of [['wrk', 'wrk'], ['nginx', 'nginx'], ['taskset', 'util-linux'], ['openssl', 'openssl']] as const) {
  if (!ensureCommand(cmd, pkg)) throw new Error(`bench/tls needs ${cmd}`)
}
process.stderr.write(`bench/tls: seeding ${ENTRIES} rules…\n`)
const dataDir = join(tmp, 'data')
const { workspaceId, key } = await seedFeedStore(dataDir, ENTRIES)
const rows: Row[] = []
const ratios: Ratio[] = []
const rotation: Record<string, unknown> = {}
const steal0 = cpuTicks()
const CASES: Kind[] = (['304 keep-alive', '304 full handshake', '304 resumed', '200 gzip'] as const).filter((k) => k.includes(ONLY))

for (const type of KEYS) {
  const cert = makeCert(`server-${type}`, type)
  process.stderr.write(`bench/tls: ${type}: starting threatfeed (builds the feed) and nginx…\n`)
  const tf = await startThreatfeed(dataDir, workspaceId, key, cert)
  const identity = await fetchTls(tf.port, tf.path, { authorization: tf.auth })
  const gzipped = await fetchTls(tf.port, tf.path, { authorization: tf.auth, 'accept-encoding': 'gzip' })
  if (identity.status !== 200 || gzipped.status !== 200) throw new Error(`threatfeed answered ${identity.status}/${gzipped.status}`)
  const nginx = await startNginx(`nginx-${type}`, identity.body, gzipped.body, cert)
  for (const s of [tf, nginx]) {
    const auth: Record<string, string> = s.auth === '' ? {} : { authorization: s.auth }
    const g = await fetchTls(s.port, s.path, { ...auth, 'accept-encoding': 'gzip' })
    if (!g.body.equals(gzipped.body)) throw new Error(`${s.name} does not serve the same gzip bytes`)
    s.etag = (await fetchTls(s.port, s.path, auth)).etag
    if ((await fetchTls(s.port, s.path, { ...auth, 'if-none-match': s.etag })).status !== 304) throw new Error(`${s.name}: no 304 on its own ETag`)
    const c0 = cpuSeconds(s.child.pid!)
    await new Promise((resolve) => setTimeout(resolve, 3000))
    s.idleRate = (cpuSeconds(s.child.pid!) - c0) / 3
    process.stderr.write(`  ${s.name} idle: ${(s.idleRate * 1000).toFixed(1)} ms CPU per second\n`)
  }
  const label = type === 'ecdsa' ? 'ECDSA P-256' : 'RSA-2048'
  for (const kind of CASES) {
    const res: Record<Subject, Result[]> = { threatfeed: [], nginx: [] }
    for (let round = 0; round < RUNS; round++) {
      for (const s of round % 2 === 0 ? [tf, nginx] : [nginx, tf]) {
        const r = await measure(s, kind)
        res[s.name].push(r)
        process.stderr.write(`  ${label} ${kind} ${s.name}: ${r.rps.toFixed(0)} req/s, ${r.cpuUsPerRequest.toFixed(1)} µs CPU/req, errors ${r.errors}${kind === '304 resumed' ? `, resumed ${(100 * r.reusedShare).toFixed(0)} %` : ''}\n`)
      }
    }
    const name = `${label}: ${kind}`
    for (const subject of ['threatfeed', 'nginx'] as const) {
      const rs = res[subject]
      rows.push({ case: name, subject, value: median(rs.map((r) => r.rps)), unit: 'req/s', runs: rs.map((r) => r.rps), extra: { cpu_us_per_req: median(rs.map((r) => r.cpuUsPerRequest)), cpu_us_per_req_with_idle: median(rs.map((r) => r.rawCpuUsPerRequest)), errors: rs.reduce((a, r) => a + r.errors, 0), ...(kind === '304 resumed' ? { resumed_share: median(rs.map((r) => r.reusedShare)) } : {}) } })
    }
    const cpu = median(res.threatfeed.map((r, i) => r.cpuUsPerRequest / res.nginx[i]!.cpuUsPerRequest))
    const rps = median(res.threatfeed.map((r, i) => r.rps / res.nginx[i]!.rps))
    if (kind === '304 keep-alive') ratios.push({ case: name, label: 'throughput, threatfeed / nginx', value: rps, target: '>= 0.9', pass: rps >= 0.9 })
    else ratios.push({ case: name, label: 'throughput, threatfeed / nginx', value: rps })
    if (kind === '304 full handshake' || kind === '304 resumed') ratios.push({ case: name, label: 'server CPU per handshake, threatfeed / nginx', value: cpu, target: '<= 1.1', pass: cpu <= 1.1 })
    else ratios.push({ case: name, label: 'server CPU per request, threatfeed / nginx', value: cpu })
  }
  rotation[label] = await resumptionAcrossRotation(tf, cert.cert, cert.key, type)
  process.stderr.write(`  ${label}: resumption before / across / after a rotation: ${JSON.stringify(rotation[label])}\n`)
  tf.child.kill('SIGTERM')
  nginx.child.kill('SIGTERM')
  await new Promise((resolve) => setTimeout(resolve, 500))
}

report('tls', 'HTTPS: threatfeed (uWS SSLApp, 1 front-end thread) vs nginx (1 worker), same certificate and bytes', rows, ratios, {
  entries: ENTRIES,
  seconds: SECONDS,
  runs: RUNS,
  pinning: `servers on core ${SERVER_CORE}, clients on core ${CLIENT_CORE}`,
  stealPercent: stealPercent(steal0, cpuTicks()),
  resumptionAcrossRotation: rotation,
})
