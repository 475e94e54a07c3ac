/**
 * The server under test of bench/soak, a child process of the driver (so that generating load
 * and measuring it never shares the server's event loop). It is `threatfeed serve` — startServer
 * from src/main.ts, embedded store — started with THREATFEED_SWEEP_INTERVAL=off, plus a
 * Housekeeper of the same options main.ts gives its own, which the driver turns on and off over
 * IPC (the alternating slices of the p99 comparison). Nothing here is reachable over HTTP.
 *
 * argv: <dataDir> <retention> <sweepInterval> <mode on|off> <batchJournalMax> <batchJournalRetention>
 */
import { readdirSync, readFileSync } from 'node:fs'
import { loadConfig, parseDuration } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer } from '../../src/main.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { Housekeeper, type HousekeeperLog } from '../../src/stream/housekeeping.js'
import { benchServerEnv } from '../lib/server-env.js'

/** What the driver asks. */
export type ToServer = { cmd: 'housekeeping', on: boolean } | { cmd: 'sample', id: number } | { cmd: 'stop' }

/** What the server answers. */
export type FromServer =
  | { cmd: 'ready', port: number, key: string, adminKey: string, workspaceId: string, pid: number }
  | { cmd: 'sample', id: number, sample: ServerSample }

export interface ServerSample {
  /** The store's own counters since start (store.housekeeping). */
  housekeeping: Record<string, number>
  retained: { first: number, last: number, records: number, bytes: number }
  /** Housekeeping runs since the last sample: wall ms of each run's sweep and trim. */
  sweepRunsMs: number[]
  trimRunsMs: number[]
  /** The server process's CPU time so far, all threads, µs. */
  cpuMicros: number
  /** The HTTP (main) thread's CPU time so far, ms (/proc, 10 ms ticks). */
  mainThreadCpuMs: number
  /**
   * The workspace feed's rule reloads (RuleStore#accessRulesChangedSince) since the last sample:
   * CPU of the HTTP thread while each ran (its slices interleave with request handling, which is
   * counted too: a few ms per interval at this load), and wall time.
   */
  reloads: Array<{ cpuMs: number, wallMs: number }>
  /** CPU ms so far of every thread of the server process (tid → ms), so the pool's share shows. */
  threadsCpuMs: Record<string, number>
  rssBytes: number
  housekeepingOn: boolean
}

/** utime + stime of one thread of this process, ms (fields 14 and 15 of its stat, 100 Hz ticks). */
function threadCpuMs (tid: string | number): number {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12])) * 10
}

/** Time one thread of this process has run, ms, to the nanosecond (the first field of its schedstat). */
function threadRunMs (tid: string | number): number {
  return Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6
}

function threadsCpuMs (): Record<string, number> {
  const out: Record<string, number> = {}
  for (const tid of readdirSync('/proc/self/task')) {
    try { out[tid] = threadCpuMs(tid) } catch { /* the thread ended */ }
  }
  return out
}


async function main (): Promise<void> {
  const [dataDir, retention, interval, mode, batchJournalMax, batchJournalRetention] = process.argv.slice(2) as [string, string, string, string, string, string]
  const intervalMs = parseDuration(interval)
  if (intervalMs === null) throw new Error(`bad sweep interval ${interval}`)
  const config = loadConfig({
    ...benchServerEnv(dataDir),
    THREATFEED_STREAM_RETENTION: retention,
    THREATFEED_SWEEP_INTERVAL: 'off',
    // Small enough that the batch journal reaches its cap within the run (bench/soak.ts).
    THREATFEED_BATCH_JOURNAL_MAX: batchJournalMax,
    THREATFEED_BATCH_JOURNAL_RETENTION: batchJournalRetention,
  })
  const log = createLogger(config.logLevel, process.stderr)
  const server = await startServer(config, log)
  const store = server.store
  const ws = await store.workspaces.create({ name: 'soak', subscription: 'active' })
  const key = generateApiKey()
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
  // For the driver's admin changes, so that the audit log grows as it does in use.
  const adminKey = generateApiKey()
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(adminKey), scopes: ['admin'] })

  // Measure the feed's rule reloads where they run: the store object the feed service reads.
  let reloads: Array<{ cpuMs: number, wallMs: number }> = []
  const rules = store.rules
  const reload = rules.accessRulesChangedSince.bind(rules)
  rules.accessRulesChangedSince = async (...args) => {
    // schedstat, not stat: a reload of tens of ms is a few of stat's 10 ms ticks.
    const cpu0 = threadRunMs(process.pid)
    const wall0 = performance.now()
    try {
      return await reload(...args)
    } finally {
      reloads.push({ cpuMs: threadRunMs(process.pid) - cpu0, wallMs: performance.now() - wall0 })
    }
  }

  let sweepRunsMs: number[] = []
  let trimRunsMs: number[] = []
  // The Housekeeper reports each run's work and wall time in its log lines.
  const hkLog: HousekeeperLog = {
    info (fields, msg) {
      const ms = (fields as { ms?: number }).ms ?? 0
      if (msg.startsWith('sweep')) sweepRunsMs.push(ms)
      else if (msg.startsWith('stream trimmed')) trimRunsMs.push(ms)
    },
    warn (fields, msg) { log.warn(fields, msg) },
  }
  let housekeeper: Housekeeper | null = null
  const setHousekeeping = async (on: boolean): Promise<void> => {
    if (on && housekeeper === null) {
      // What main.ts starts when THREATFEED_SWEEP_INTERVAL is set: a fresh one per slice, since
      // a stopped Housekeeper stays stopped (it runs once at start, then every interval).
      housekeeper = new Housekeeper({ store, intervalMs, retentionMs: config.streamRetentionMs, log: hkLog, ...(server.sweeper === null ? {} : { sweeper: server.sweeper }) })
      housekeeper.start()
    } else if (!on && housekeeper !== null) {
      const h = housekeeper
      housekeeper = null
      await h.stop()
    }
  }
  await setHousekeeping(mode === 'on')

  const send = (m: FromServer): void => { process.send!(m) }
  process.on('message', (m: ToServer) => {
    void (async () => {
      if (m.cmd === 'housekeeping') {
        if (mode === 'on') await setHousekeeping(m.on)
      } else if (m.cmd === 'sample') {
        const retained = await store.stream.retained()
        const cpu = process.cpuUsage()
        send({
          cmd: 'sample',
          id: m.id,
          sample: {
            housekeeping: { ...store.housekeeping },
            retained: { first: retained.first, last: retained.last, records: retained.records, bytes: retained.bytes },
            sweepRunsMs,
            trimRunsMs,
            cpuMicros: cpu.user + cpu.system,
            mainThreadCpuMs: threadCpuMs(process.pid),
            reloads,
            threadsCpuMs: threadsCpuMs(),
            rssBytes: process.memoryUsage().rss,
            housekeepingOn: housekeeper !== null,
          },
        })
        sweepRunsMs = []
        trimRunsMs = []
        reloads = []
      } else if (m.cmd === 'stop') {
        await setHousekeeping(false)
        await server.stop()
        process.exit(0)
      }
    })().catch((e: unknown) => { log.error({ err: e }, 'bench/soak server: command failed'); process.exit(1) })
  })
  send({ cmd: 'ready', port: server.port, key, adminKey, workspaceId: ws.id, pid: process.pid })
}

await main()
