/**
 * bench/fleet's run: a fleet of appliances (bench/bigws/poller.c --fleet, one connection each)
 * polling one feed every `periodS` from random phases, keeping the ETag they last took, while the
 * feed changes every `changeEveryS` (1 % of it, bench/lib/feed-versions.ts). Change windows
 * alternate between the fleet asking for full feeds (`If-None-Match`) and for deltas (`since=`),
 * both with `Accept-Encoding: gzip`; each window begins with the mode set and the change written
 * to the store, and lasts until the next change. Per window: what the appliances received (bytes
 * counted by the poller; also the server's port by an nftables counter where nft works, and the
 * machine's TCP retransmissions), the server's CPU (/proc/PID/stat of the whole
 * process: every thread), the poller's, the machine's steal, and each poll's latency from its
 * scheduled time. A lead-in of one period with no change gives the CPU of polling alone.
 *
 * Exported for test/http/feed-delta-fleet.test.ts, which runs a small fleet through it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { openStore } from '../../src/store/open.js'
import { buildCPoller } from '../lib/c-poller.js'
import { FeedChurn, feedGetter, nextTag, startFeedServer } from '../lib/feed-versions.js'
import { cpuSeconds, stopChildren } from '../lib/processes.js'
import { makeRandom } from '../lib/random.js'
import { cpuTicks, median, percentile, stealPercent } from '../lib/report.js'
import { seedFeedStore } from '../lib/seed-feed.js'

export type FleetMode = 'full' | 'delta'

export interface FleetOptions {
  readonly appliances: number
  readonly periodS: number
  readonly changeEveryS: number
  /** Change windows of each mode, alternating full, delta, full, … */
  readonly rounds: number
  readonly entries: number
  /** The feed's query, e.g. `format=nftables&family=v4`. */
  readonly query: string
  /** taskset's core list for the server. */
  readonly serverCores: string
  /** More of the server's environment (THREATFEED_HTTP_THREADS, …). */
  readonly serverEnv?: Record<string, string>
  readonly log?: (line: string) => void
}

/** One change window (or the lead-in, `mode` null: no change, polls only). */
export interface FleetWindow {
  readonly mode: FleetMode | null
  readonly seconds: number
  /** From the store write to the new ETag seen by the bench (HEAD every 100 ms), ms. */
  readonly publishedMs: number
  readonly polls: number
  readonly fullBodies: number
  readonly deltaBodies: number
  readonly notModified: number
  /** Answers neither 200 nor 304. */
  readonly otherStatus: number
  /** Bytes the appliances received (status lines, headers, bodies), and those of the 200s alone. */
  readonly bytes: number
  readonly bytes200: number
  /** IP bytes the server's port sent (nftables counter, headers of IP and TCP included); null without nft. */
  readonly wireBytes: number | null
  /** TCP segments the machine retransmitted (/proc/net/snmp RetransSegs: every process's, loopback's included). */
  readonly retransmits: number
  readonly serverCpuS: number
  readonly pollerCpuS: number
  /** Latency from the scheduled send, ms: every poll, and the 200s alone. */
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly p50Of200: number
  readonly p99Of200: number
  /** How late the poller wrote its polls (its own share, and an appliance's previous poll still out), p99, ms. */
  readonly sendLagP99: number
  readonly retried: number
  readonly steal: number | null
}

export interface FleetReport {
  readonly appliances: number
  readonly periodS: number
  readonly changeEveryS: number
  readonly entries: number
  readonly query: string
  /** The feed's full gzip body and a delta one version behind, bytes (measured once, by the bench). */
  readonly fullGzipBytes: number
  readonly deltaGzipBytes: number
  readonly leadIn: FleetWindow
  readonly windows: FleetWindow[]
  /** Poller counts over the whole measured part (bench/bigws/poller.c, fleet mode). */
  readonly errors: number
  readonly skipped: number
  readonly retried: number
  readonly reconnects: number
  readonly unsent: number
  readonly dropped: number
  readonly fdLimit: number
}

const FIELDS = 8
const sleep = (ms: number): Promise<void> => new Promise((resolve) => { setTimeout(resolve, ms) })

/** TCP segments retransmitted so far, machine-wide (/proc/net/snmp; NaN where unreadable). */
function retransmits (): number {
  try {
    const [names, values] = readFileSync('/proc/net/snmp', 'utf8').split('\n').filter((l) => l.startsWith('Tcp:')).map((l) => l.split(/\s+/))
    return Number(values![names!.indexOf('RetransSegs')])
  } catch {
    return NaN
  }
}

/**
 * An nftables counter of what a local TCP port sends, in a table of its own; null when nft is
 * missing or refuses (not root).
 */
function portCounter (port: number): { read: () => number, remove: () => void } | null {
  const table = `tf_bench_fleet_${process.pid}`
  const nft = (...args: string[]): string | null => {
    const r = spawnSync('nft', args, { encoding: 'utf8' })
    return r.status === 0 ? r.stdout : null
  }
  if (nft('add', 'table', 'inet', table) === null) return null
  const remove = (): void => { nft('delete', 'table', 'inet', table) }
  process.on('exit', remove)
  if (nft('add', 'chain', 'inet', table, 'out', '{ type filter hook output priority 0; policy accept; }') === null ||
    nft('add', 'rule', 'inet', table, 'out', 'tcp', 'sport', String(port), 'counter') === null) {
    remove()
    return null
  }
  return {
    read: () => Number(/counter packets \d+ bytes (\d+)/.exec(nft('list', 'chain', 'inet', table, 'out') ?? '')?.[1] ?? NaN),
    remove,
  }
}

/** The open-files hard limit a child started through `sh` gets (the poller and the server raise theirs to it). */
function hardFdLimit (): number {
  return Number(spawnSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).stdout.trim())
}

interface Sample { at: number, serverCpu: number, pollerCpu: number, wire: number | null, retransmits: number, ticks: ReturnType<typeof cpuTicks> }

export async function runFleet (opts: FleetOptions): Promise<FleetReport> {
  const log = opts.log ?? ((line: string) => { console.log(line) })
  const poller = buildCPoller()
  if (poller === null) throw new Error('bench/fleet needs a C compiler: bench/bigws/poller.c did not build')
  // One connection an appliance in the poller, one in the server: each needs the open files.
  const fdLimit = hardFdLimit()
  if (!(fdLimit >= opts.appliances + 1024)) throw new Error(`bench/fleet: ${opts.appliances} appliances need an open-files hard limit of ${opts.appliances + 1024} (ulimit -Hn is ${fdLimit})`)
  const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number)
  if (high! - low! < opts.appliances + 1024) throw new Error(`bench/fleet: ${opts.appliances} appliances need as many local ports (net.ipv4.ip_local_port_range is ${low}–${high})`)

  const dir = mkdtempSync(join(tmpdir(), 'tf-bench-fleet-'))
  const dataDir = join(dir, 'data')
  const outFile = join(dir, 'polls.bin')
  let server: ChildProcess | null = null
  let child: ChildProcess | null = null
  let counter: ReturnType<typeof portCounter> = null
  try {
    log(`bench/fleet: seeding ${opts.entries} rules…`)
    const { workspaceId, key } = await seedFeedStore(dataDir, opts.entries)
    const started = await startFeedServer(dataDir, opts.serverCores, opts.serverEnv)
    server = started.server
    const port = started.port
    const get = feedGetter(port, key)
    const feed = `/v1/threat/feeds?${opts.query}`
    let tag = await nextTag(get, feed, '', 200, 1500)
    if (!tag.startsWith('"')) throw new Error('the feed was not served within 5 minutes')
    const store = await openStore({ kind: 'embedded', dataDir })
    const churn = new FeedChurn(workspaceId, opts.entries, makeRandom(11))

    const maxSeconds = opts.periodS * 2 + opts.changeEveryS * (2 * opts.rounds + 1)
    child = spawn('sh', ['-c', 'ulimit -n $(ulimit -Hn) && exec "$@"', 'sh', poller, '--fleet', String(port), key, feed, String(opts.appliances), String(opts.periodS), tag, outFile, String(maxSeconds)], { stdio: ['pipe', 'pipe', 'inherit'] })
    const pollerChild = child
    const exited = new Promise<never>((_resolve, reject) => { pollerChild.once('exit', (code) => { reject(new Error(`the poller exited with ${code}`)) }) })
    exited.catch(() => {})
    const lines: string[] = []
    const waiters: Array<() => void> = []
    createInterface({ input: child.stdout! }).on('line', (l) => { lines.push(l); for (const w of waiters.splice(0)) w() })
    const line = async (want: string): Promise<void> => {
      while (!lines.includes(want)) await Promise.race([new Promise<void>((resolve) => { waiters.push(resolve) }), exited])
      lines.splice(lines.indexOf(want), 1)
    }
    log(`bench/fleet: ${opts.appliances} appliances connecting…`)
    await line('ready')
    counter = portCounter(port)
    const sample = (): Sample => ({ at: Date.now(), serverCpu: cpuSeconds(server!.pid!), pollerCpu: cpuSeconds(pollerChild.pid!), wire: counter?.read() ?? null, retransmits: retransmits(), ticks: cpuTicks() })

    // Lead-in: a period of polls with nothing changing (the cost of polling alone).
    let lastBase = tag
    const marks: Array<{ mode: FleetMode | null, from: Sample, to?: Sample, publishedMs: number }> = [{ mode: null, from: sample(), publishedMs: NaN }]
    await sleep(opts.periodS * 1000)
    for (let w = 0; w < 2 * opts.rounds; w++) {
      const mode: FleetMode = w % 2 === 0 ? 'full' : 'delta'
      pollerChild.stdin!.write(`${mode}\n`)
      await line(`mode ${mode}`)
      const from = sample()
      marks[marks.length - 1]!.to = from
      const ops = churn.nextOps()
      await store.applyRuleBatch({ ops })
      const written = Date.now()
      const previous = tag
      lastBase = previous
      tag = await nextTag(get, feed, previous)
      const mark = { mode, from, publishedMs: tag === previous ? NaN : Date.now() - written }
      marks.push(mark)
      log(`bench/fleet: change ${w + 1} (${mode}): ${tag} served ${mark.publishedMs} ms after the write`)
      await sleep(Math.max(0, from.at + opts.changeEveryS * 1000 - Date.now()))
    }
    marks[marks.length - 1]!.to = sample()
    await store.close()

    // One full body and the delta of the last change, bodies alone.
    const gz = { 'accept-encoding': 'gzip' }
    const full = await get(feed, gz)
    const delta = await get(`${feed}&since=${encodeURIComponent(lastBase)}`, gz)
    pollerChild.stdin!.end()
    await line('done')
    const raw = readFileSync(outFile)
    const n = Number(raw.readBigUInt64LE(0))
    const count = (k: number): number => Number(raw.readBigInt64LE(8 + 8 * k))
    const [errors, skipped, retried, reconnects, unsent, dropped] = [count(0), count(1), count(2), count(3), count(4), count(5)]
    const records = new Float64Array(raw.buffer.slice(raw.byteOffset + 56, raw.byteOffset + 56 + n * FIELDS * 8))

    const windows = marks.map((m) => {
      const to = m.to!
      const all: number[] = []
      const of200: number[] = []
      const lags: number[] = []
      let fullBodies = 0; let deltaBodies = 0; let notModified = 0; let otherStatus = 0; let bytes = 0; let bytes200 = 0; let retriedHere = 0
      for (let i = 0; i < n; i++) {
        const r = i * FIELDS
        const scheduled = records[r]!
        if (scheduled < m.from.at || scheduled >= to.at) continue
        const latency = records[r + 1]!
        const status = records[r + 3]!
        all.push(latency)
        lags.push(records[r + 2]!)
        bytes += records[r + 4]!
        retriedHere += records[r + 7]!
        if (status === 304) notModified++
        else if (status !== 200) otherStatus++
        else {
          of200.push(latency)
          bytes200 += records[r + 4]!
          if (records[r + 6] === 2) deltaBodies++
          else fullBodies++
        }
      }
      const window: FleetWindow = {
        mode: m.mode,
        seconds: (to.at - m.from.at) / 1000,
        publishedMs: m.publishedMs,
        polls: all.length,
        fullBodies,
        deltaBodies,
        notModified,
        otherStatus,
        bytes,
        bytes200,
        wireBytes: to.wire === null || m.from.wire === null ? null : to.wire - m.from.wire,
        retransmits: to.retransmits - m.from.retransmits,
        serverCpuS: to.serverCpu - m.from.serverCpu,
        pollerCpuS: to.pollerCpu - m.from.pollerCpu,
        p50: all.length > 0 ? median(all) : NaN,
        p99: all.length > 0 ? percentile(all, 99) : NaN,
        max: all.length > 0 ? Math.max(...all) : NaN,
        p50Of200: of200.length > 0 ? median(of200) : NaN,
        p99Of200: of200.length > 0 ? percentile(of200, 99) : NaN,
        sendLagP99: lags.length > 0 ? percentile(lags, 99) : NaN,
        retried: retriedHere,
        steal: stealPercent(m.from.ticks, to.ticks),
      }
      return window
    })
    return {
      appliances: opts.appliances,
      periodS: opts.periodS,
      changeEveryS: opts.changeEveryS,
      entries: opts.entries,
      query: opts.query,
      fullGzipBytes: full.bytes,
      deltaGzipBytes: delta.headers['x-feed-delta'] === 'delta' ? delta.bytes : NaN,
      leadIn: windows[0]!,
      windows: windows.slice(1),
      errors,
      skipped,
      retried,
      reconnects,
      unsent,
      dropped,
      fdLimit,
    }
  } finally {
    counter?.remove()
    if (child !== null && child.exitCode === null) child.kill('SIGKILL')
    if (server !== null && server.exitCode === null) {
      const s = server
      s.kill('SIGTERM')
      await new Promise((resolve) => { s.once('exit', resolve); setTimeout(resolve, 10_000) })
    }
    stopChildren()
    rmSync(dir, { recursive: true, force: true })
  }
}
