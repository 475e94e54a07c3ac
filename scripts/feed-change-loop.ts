/**
 * A change reaching a feed, in a loop, against real processes (issue 35, item 7): `threatfeed
 * serve` in a child process; per run, made with the CLI (a process each): a workspace with three
 * keys (signals and feeds, signals only, feeds only), a second workspace, a list; each key polled
 * until it answers 200 (the feeds keys build the workspace feed, empty); one v1 block posted with
 * the first key; the workspace feed polled every 250 ms with the feeds-only key until it lists
 * the block. A run misses when that takes longer than the rebuild interval plus a second. Each
 * run starts the server afresh, as each run of a black-box suite does (FRESH=0: one for all).
 *
 *   RUNS=20 REBUILD_MS=2000 [NICE=n] [THREADS=n] npx tsx scripts/feed-change-loop.ts [build dir] [node]
 *
 * Prints one line a run and a summary; exits 1 on any miss.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'

const build = process.argv[2] ?? join(fileURLToPath(import.meta.url), '..', '..')
const node = process.argv[3] ?? process.execPath
const RUNS = Number(process.env.RUNS ?? 20)
const REBUILD_MS = Number(process.env.REBUILD_MS ?? 2000)
const FRESH = process.env.FRESH !== '0'
const GEO = join(build, 'test', 'fixtures', 'geo', 'maxmind')
const dir = mkdtempSync(join(tmpdir(), 'tf-change-loop-'))
const env = {
  PATH: process.env.PATH,
  HOST: '127.0.0.1',
  PORT: '0',
  THREATFEED_DATA_DIR: dir,
  THREATFEED_FEED_REBUILD_MS: String(REBUILD_MS),
  THREATFEED_GEO_COUNTRY_DB: join(GEO, 'GeoLite2-Country-Test.mmdb'),
  THREATFEED_GEO_ASN_DB: join(GEO, 'GeoLite2-ASN-Test.mmdb'),
  ...(process.env.THREADS === undefined ? {} : { THREATFEED_HTTP_THREADS: process.env.THREADS }),
  ...(process.env.NICE === undefined ? {} : { THREATFEED_BACKGROUND_NICE: process.env.NICE }),
}

function cli (...args: string[]): Record<string, string> {
  const r = spawnSync(node, [join(build, 'bin', 'threatfeed'), ...args, '--json'], { env, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`threatfeed ${args.join(' ')}: ${r.status} ${r.stderr}`)
  return JSON.parse(r.stdout) as Record<string, string>
}

let server: ChildProcess | null = null
let base = ''
process.on('exit', () => { server?.kill('SIGKILL') })

/** `threatfeed serve` on the directory, resolved once it listens (the one before stopped first). */
async function serve (): Promise<void> {
  await stop()
  const child = spawn(node, [join(build, 'bin', 'threatfeed'), 'serve'], { env, stdio: ['ignore', 'pipe', 'inherit'] })
  server = child
  const port = await new Promise<number>((resolve) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      try {
        const rec = JSON.parse(line) as { msg?: string, port?: number }
        if (rec.msg === 'listening' && rec.port !== undefined) resolve(rec.port)
        else if (process.env.SERVER_LOG === '1') process.stderr.write(line + '\n')
      } catch { /* not a log line */ }
    })
  })
  base = `http://127.0.0.1:${port}`
}

async function stop (): Promise<void> {
  const child = server
  if (child === null) return
  server = null
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  await exited
}

async function status (key: string, path: string, init: RequestInit = {}): Promise<{ status: number, body: string }> {
  for (let attempt = 0; ; attempt++) {
    try {
      const r = await fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } })
      return { status: r.status, body: await r.text() }
    } catch (e) {
      // A kept-alive connection the server closed as it was reused: asked again on a new one.
      if (attempt >= 2) throw e
    }
  }
}

async function until200 (key: string, path: string, init: RequestInit = {}): Promise<void> {
  for (const deadline = Date.now() + 20_000; ;) {
    if ((await status(key, path, init)).status === 200) return
    if (Date.now() > deadline) throw new Error(`${path} never answered 200`)
    await sleep(100)
  }
}

let misses = 0
const delays: number[] = []
for (let run = 1; run <= RUNS; run++) {
  // As a suite run does: a server started for the run (FRESH=0: one server for every run).
  if (run === 1 || FRESH) await serve()
  const ws = cli('workspace', 'create', '--name', `loop-${run}`).id!
  const both = cli('key', 'create', '--workspace', ws, '--scopes', 'signals:write,feeds:read').key!
  const signals = cli('key', 'create', '--workspace', ws, '--scopes', 'signals:write').key!
  const feeds = cli('key', 'create', '--workspace', ws, '--scopes', 'feeds:read').key!
  cli('workspace', 'create', '--name', `other-${run}`)
  cli('list', 'create', '--workspace', ws, '--name', `edge-${run}`)
  await until200(both, '/v1/threat/feeds?format=plain')
  // The signals-only key: an unblock of an address nobody blocked (a batch that changes no rule).
  await until200(signals, '/v1/signal', { method: 'POST', body: '[{"type":"access_rules","action":"unblock","ip":"192.0.2.255"}]' })
  await until200(feeds, '/v1/threat/feeds?format=plain')
  const ip = `198.51.${run >> 8}.${run & 255}`
  const posted = await status(both, '/v1/signal', { method: 'POST', body: JSON.stringify([{ type: 'access_rules', action: 'block', ip }]) })
  if (posted.status !== 200) throw new Error(`post: ${posted.status} ${posted.body}`)
  const at = Date.now()
  if (process.env.SERVER_LOG === '1') process.stderr.write(`posted ${ip} at ${new Date(at).toISOString()} to ${ws}\n`)
  let seen = -1
  for (const deadline = at + REBUILD_MS + 8000; Date.now() < deadline;) {
    const r = await status(feeds, '/v1/threat/feeds?format=plain')
    if (r.status === 200 && r.body.includes(ip)) { seen = Date.now() - at; break }
    await sleep(250)
  }
  const missed = seen < 0 || seen > REBUILD_MS + 1000
  if (missed) misses++
  if (seen >= 0) delays.push(seen)
  process.stdout.write(`run ${run}: ${seen < 0 ? `not seen in ${REBUILD_MS + 8000} ms` : `seen after ${seen} ms`}${missed ? '  MISS' : ''}\n`)
}
await stop()
rmSync(dir, { recursive: true, force: true })
process.stdout.write(`runs ${RUNS}, misses ${misses} (bound ${REBUILD_MS + 1000} ms), slowest ${Math.max(0, ...delays)} ms\n`)
process.exit(misses === 0 ? 0 : 1)
