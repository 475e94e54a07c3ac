/**
 * The crash run of issue 35: v1 ingest from concurrent HTTP clients (4 batches in flight), the
 * server SIGKILLed at random moments — twice in a row at times, the second kill during the
 * restart — and CLI commands (`stream status`, `rules`, `consumers ls`) run against the same data
 * directory meanwhile, some of them SIGKILLed too. After every restart, every batch acknowledged
 * since the last check is looked up by its receipt (docs/signals.md): the stream positions it was
 * given must hold records of its batch id and exactly its entries. At the end the whole stream is
 * read once: no batch answered 500 may be in it, and no batch twice.
 *
 *   node --import=tsx bench/crash/run.ts [--minutes 5] [--trials 1000] [--json FILE]
 *
 * Bounded: it stops after `--minutes` or `--trials`, whichever comes first, and kills what it
 * started. Traffic goes to 127.0.0.1 only. Exit code 1 when anything acknowledged is missing,
 * duplicated, or a batch answered 500 was applied.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import type { Store } from '../../src/store/types.js'

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const GEO = join(repo, 'test', 'fixtures', 'geo', 'maxmind')
const BATCH = 1000
const IN_FLIGHT = 4

export interface CrashRunOptions {
  readonly minutes: number
  readonly trials: number
  /** Logs a line per trial. */
  readonly log?: (line: string) => void
  /** How long ingest runs before a kill: a random time in [from, to) ms (default 3–10 s). */
  readonly windowMs?: readonly [number, number]
}

export interface CrashRunReport {
  trials: number
  kills: number
  doubleKills: number
  cliRuns: number
  cliKills: number
  batchesAcknowledged: number
  entriesAcknowledged: number
  batches500: number
  batchesUnanswered: number
  /** Acknowledged batches whose positions do not hold them (by id and entries). */
  missing: number
  /** Batches whose entries the stream holds more than once. */
  duplicated: number
  /** Batches answered 500 whose entries are in the stream. */
  applied500: number
  streamRecords: number
  seconds: number
  problems: string[]
}

interface Ack { readonly n: number, readonly id: string, readonly first: number, readonly last: number }

/** Batch n, entry i → a distinct address of 10.0.0.0/8 (16 M of them: 16,777 batches). */
function ipOf (n: number, i: number): string {
  const x = n * BATCH + i
  return `10.${(x >> 16) & 255}.${(x >> 8) & 255}.${x & 255}`
}

/** The batch an address came from. */
function batchOfIp (ip: string): number {
  const [, b, c, d] = ip.split('.').map(Number)
  return Math.floor(((b! << 16) | (c! << 8) | d!) / BATCH)
}

function bodyOf (n: number): string {
  const entries: string[] = []
  for (let i = 0; i < BATCH; i++) entries.push(`{"type":"access_rules","action":"block","ip":"${ipOf(n, i)}"}`)
  return `[${entries.join(',')}]`
}

function freePort (): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => { const p = (s.address() as AddressInfo).port; s.close(() => resolve(p)) })
  })
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
const rand = (lo: number, hi: number): number => lo + Math.floor(Math.random() * (hi - lo))

export async function runCrash (options: CrashRunOptions): Promise<CrashRunReport> {
  const log = options.log ?? (() => {})
  const started = Date.now()
  const deadline = started + options.minutes * 60_000
  const dir = mkdtempSync(join(tmpdir(), 'tf-crash-run-'))
  const dataDir = join(dir, 'data')
  const port = await freePort()
  const key = generateApiKey()
  const setup = await openStore({ kind: 'embedded', dataDir })
  const ws = await setup.workspaces.create({ name: 'crash', subscription: 'active' })
  await setup.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read', 'rules:read'] })
  await setup.close()

  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: String(port),
    THREATFEED_DATA_DIR: dataDir,
    THREATFEED_LOG_LEVEL: 'warn',
    THREATFEED_HTTP_THREADS: '2',
    THREATFEED_WORKERS: '1',
    THREATFEED_STREAM_RETENTION: '3650d', // nothing trimmed: every receipt stays checkable
    THREATFEED_GEO_COUNTRY_DB: join(GEO, 'GeoLite2-Country-Test.mmdb'),
    THREATFEED_GEO_ASN_DB: join(GEO, 'GeoLite2-ASN-Test.mmdb'),
  }
  const report: CrashRunReport = {
    trials: 0, kills: 0, doubleKills: 0, cliRuns: 0, cliKills: 0, batchesAcknowledged: 0, entriesAcknowledged: 0,
    batches500: 0, batchesUnanswered: 0, missing: 0, duplicated: 0, applied500: 0, streamRecords: 0, seconds: 0, problems: [],
  }
  const children = new Set<ChildProcess>()
  let lastStderr = ''
  const spawnNode = (args: string[]): ChildProcess => {
    const c = spawn(process.execPath, ['--import=tsx', join(repo, 'src/cli/run.ts'), ...args], { cwd: repo, env, stdio: ['ignore', 'ignore', 'pipe'] })
    // What a process says on stderr is kept (the last 4 KiB), to name why a server did not start.
    c.stderr!.on('data', (d: Buffer) => { lastStderr = (lastStderr + d.toString()).slice(-4096) })
    children.add(c)
    c.once('exit', () => children.delete(c))
    return c
  }
  const exited = (c: ChildProcess): Promise<void> => c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise((resolve) => c.once('exit', () => resolve()))
  const healthy = async (ms: number): Promise<boolean> => {
    const end = Date.now() + ms
    while (Date.now() < end) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) })).status === 200) return true
      } catch { /* not yet */ }
      await sleep(100)
    }
    return false
  }

  // The harness keeps the store open across every kill, as an operator's CLI or a second server would.
  const store: Store = await openStore({ kind: 'embedded', dataDir })
  let server = spawnNode(['serve'])
  const acks: Ack[] = []
  const refused = new Set<number>()
  let unchecked = 0
  let next = 0

  try {
    if (!await healthy(60_000)) throw new Error(`the server did not start: ${lastStderr}`)
    while (Date.now() < deadline && report.trials < options.trials && next < 16_000) {
      report.trials++
      let stop = false
      // The clients: each posts one batch after another, so IN_FLIGHT are in flight at any time.
      const client = async (): Promise<void> => {
        while (!stop && next < 16_000) {
          const n = next++
          let r: Response
          try {
            r = await fetch(`http://127.0.0.1:${port}/v1/signal`, {
              method: 'POST',
              headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
              body: bodyOf(n),
              signal: AbortSignal.timeout(10_000),
            })
          } catch {
            report.batchesUnanswered++ // the connection died with the server: either outcome is allowed
            await sleep(50)
            continue
          }
          const text = await r.text().catch(() => null)
          if (text === null) { report.batchesUnanswered++; continue }
          if (r.status === 200) {
            const batch = (JSON.parse(text) as { batch?: { id: string, first_seq: number, last_seq: number } }).batch
            if (batch === undefined) { report.problems.push(`batch ${n}: 200 without a receipt`); continue }
            acks.push({ n, id: batch.id, first: batch.first_seq, last: batch.last_seq })
            report.batchesAcknowledged++
            report.entriesAcknowledged += BATCH
          } else if (r.status === 500) {
            refused.add(n)
            report.batches500++
          } else if (r.status === 429 || r.status === 503) {
            await sleep(100)
          } else {
            report.problems.push(`batch ${n}: status ${r.status}: ${text.slice(0, 200)}`)
          }
        }
      }
      const clients = Array.from({ length: IN_FLIGHT }, client)

      // CLI commands on the same data directory while ingest runs; some are killed half-way.
      const cli = (async () => {
        while (!stop) {
          await sleep(rand(100, 800))
          if (stop) break
          const commands = [['stream', 'status', '--json'], ['rules', 'ls', '--workspace', ws.id, '--kind', 'waf_rule', '--json'], ['consumers', 'ls', '--json'], ['stream', 'tail', '--from', '1', '--limit', '100000', '--json']]
          const c = spawnNode(commands[rand(0, commands.length)]!)
          report.cliRuns++
          if (Math.random() < 0.4) {
            await sleep(rand(200, 2500))
            if (c.exitCode === null && c.signalCode === null) { c.kill('SIGKILL'); report.cliKills++ }
          }
          await exited(c)
        }
      })()

      await sleep(rand(options.windowMs?.[0] ?? 3000, options.windowMs?.[1] ?? 10_000))
      server.kill('SIGKILL')
      report.kills++
      // The clients stop posting (what is in flight is cut off): no batch is spent on a dead port.
      stop = true
      await exited(server)
      if (Math.random() < 0.35) {
        // A double kill: the restarted server dies again during its start.
        server = spawnNode(['serve'])
        await sleep(rand(300, 3000))
        server.kill('SIGKILL')
        report.kills++
        report.doubleKills++
        await exited(server)
      }
      await Promise.all([...clients, cli])
      server = spawnNode(['serve'])
      if (!await healthy(90_000)) throw new Error(`trial ${report.trials}: the server did not come back: ${lastStderr}`)

      // Every batch acknowledged since the last check, by its receipt.
      const fresh = acks.slice(unchecked)
      unchecked = acks.length
      await store.stream.retained() // renews the read snapshot: the checks read the latest commit
      for (const a of fresh) {
        const problem = await checkReceipt(store, a)
        if (problem !== null) { report.missing++; report.problems.push(problem) }
      }
      log(`trial ${report.trials}: ${report.kills} kills (${report.doubleKills} double), ${report.batchesAcknowledged} batches acknowledged (${fresh.length} new, checked), ${report.batches500} answered 500, ${report.batchesUnanswered} unanswered, ${report.cliRuns} CLI runs (${report.cliKills} killed), missing ${report.missing}`)
    }

    // The whole stream: nothing twice, nothing answered 500.
    const seen = new Map<number, number>()
    await store.stream.retained()
    const head = await store.stream.head()
    for (let from = 1; from <= head;) {
      const records = await store.stream.read(from, 100_000)
      if (records.length === 0) break
      for (const r of records) {
        const ip = /"ip":"([\d.]+)"/.exec(r.payload)?.[1]
        if (ip !== undefined) { const n = batchOfIp(ip); seen.set(n, (seen.get(n) ?? 0) + 1) }
      }
      report.streamRecords += records.length
      from = records[records.length - 1]!.seq + 1
    }
    for (const [n, count] of seen) {
      if (count > BATCH) { report.duplicated++; report.problems.push(`batch ${n}: ${count} records in the stream`) }
      if (refused.has(n)) { report.applied500++; report.problems.push(`batch ${n} was answered 500 and is in the stream`) }
    }
  } finally {
    for (const c of children) c.kill('SIGKILL')
    await store.close().catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  }
  report.seconds = Math.round((Date.now() - started) / 1000)
  return report
}

/** null when the receipt's positions hold its batch: its id on each record, its entries in order. */
async function checkReceipt (store: Store, a: Ack): Promise<string | null> {
  if (a.last - a.first + 1 !== BATCH) return `batch ${a.n} (${a.id}): a receipt of ${a.last - a.first + 1} positions`
  const records = await store.stream.read(a.first, BATCH)
  if (records.length !== BATCH || records[0]!.seq !== a.first) return `batch ${a.n} (${a.id}): ${records.length} records at ${a.first}…${a.last}`
  for (let i = 0; i < BATCH; i++) {
    const r = records[i]!
    if (r.batchId !== a.id) return `batch ${a.n} (${a.id}): seq ${r.seq} holds batch ${r.batchId ?? 'none'}`
    if (!r.payload.includes(`"${ipOf(a.n, i)}"`)) return `batch ${a.n} (${a.id}): seq ${r.seq} holds ${r.payload}`
  }
  return null
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { minutes: { type: 'string' }, trials: { type: 'string' }, json: { type: 'string' } } })
  const report = await runCrash({
    minutes: Number(values.minutes ?? 5),
    trials: Number(values.trials ?? 1000),
    log: (line) => { process.stderr.write(line + '\n') },
  })
  process.stdout.write(JSON.stringify(report, null, 2) + '\n')
  if (values.json !== undefined) writeFileSync(values.json, JSON.stringify(report, null, 2) + '\n')
  process.exitCode = report.missing + report.duplicated + report.applied500 + report.problems.length === 0 ? 0 : 1
}
