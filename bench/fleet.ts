/**
 * bench/fleet: 10,000 appliances against the 131,072-entry feed of bench/feeds, each polling every
 * 10 s from a random phase and keeping the ETag it took, the feed changing every 30 s (1 % of it),
 * full feeds against deltas in one run: change windows alternate between the fleet asking with
 * `If-None-Match` (the whole feed again after each change) and with `since=` (the delta), gzip
 * both. Reported per change, for each mode: bytes sent to the fleet, server CPU, poll latency p50
 * and p99 (from each poll's scheduled time), the 304s; and the ratios delta ÷ full. The method
 * is bench/fleet/run.ts; the figures and how to read them are in bench/NOTES.md ("Fleet: full
 * feeds against deltas").
 *
 * The appliances are bench/bigws/poller.c in its fleet mode (built with `cc`): one process, one
 * connection an appliance, so the run needs open files and local ports for them (it checks).
 * The server is not pinned (both cores), as a deployment runs it.
 *
 * Environment: BENCH_FLEET_APPLIANCES (10000), BENCH_FLEET_PERIOD_S (10), BENCH_FLEET_CHANGE_S
 * (30), BENCH_FLEET_ROUNDS (3 windows of each mode), BENCH_FLEET_ENTRIES (131072),
 * BENCH_FLEET_QUERY (format=nftables&family=v4, the feed docs/deltas.md's appliance script
 * applies), BENCH_FLEET_CORES (0-1), BENCH_FLEET_HTTP_THREADS (the server's default).
 *
 *   npm run bench fleet
 */
import { median, report, type Ratio, type Row } from './lib/report.js'
import { runFleet, type FleetMode, type FleetWindow } from './fleet/run.js'

const r = await runFleet({
  appliances: Number(process.env.BENCH_FLEET_APPLIANCES ?? 10_000),
  periodS: Number(process.env.BENCH_FLEET_PERIOD_S ?? 10),
  changeEveryS: Number(process.env.BENCH_FLEET_CHANGE_S ?? 30),
  rounds: Number(process.env.BENCH_FLEET_ROUNDS ?? 3),
  entries: Number(process.env.BENCH_FLEET_ENTRIES ?? 131_072),
  query: process.env.BENCH_FLEET_QUERY ?? 'format=nftables&family=v4',
  serverCores: process.env.BENCH_FLEET_CORES ?? '0-1',
  serverEnv: process.env.BENCH_FLEET_HTTP_THREADS === undefined ? {} : { THREATFEED_HTTP_THREADS: process.env.BENCH_FLEET_HTTP_THREADS },
})

const mb = (b: number): string => (b / 1e6).toFixed(b >= 1e8 ? 0 : 2)
const lead = r.leadIn
const idleCpuPerS = lead.serverCpuS / lead.seconds
console.log(`\nlead-in (no change, ${lead.seconds.toFixed(1)} s): ${lead.polls} polls, ${lead.notModified} 304s, server CPU ${lead.serverCpuS.toFixed(2)} s (${(idleCpuPerS * 100).toFixed(1)} % of a core), p99 ${lead.p99.toFixed(1)} ms`)
console.log('window  mode   polls  200 full  200 delta  304    bytes MB  nft MB   server CPU s  poller CPU s  p50 ms  p99 ms  p99 of 200s  published ms  written again  TCP retransmits  steal %')
r.windows.forEach((w, i) => {
  console.log(`${String(i + 1).padEnd(7)} ${String(w.mode).padEnd(6)} ${String(w.polls).padEnd(6)} ${String(w.fullBodies).padEnd(9)} ${String(w.deltaBodies).padEnd(10)} ${String(w.notModified).padEnd(6)} ${mb(w.bytes).padEnd(9)} ${(w.wireBytes === null ? '—' : mb(w.wireBytes)).padEnd(8)} ${w.serverCpuS.toFixed(2).padEnd(13)} ${w.pollerCpuS.toFixed(2).padEnd(13)} ${w.p50.toFixed(1).padEnd(7)} ${w.p99.toFixed(1).padEnd(7)} ${w.p99Of200.toFixed(1).padEnd(12)} ${String(w.publishedMs).padEnd(13)} ${String(w.retried).padEnd(14)} ${String(w.retransmits).padEnd(16)} ${w.steal?.toFixed(1) ?? '—'}`)
})
console.log(`poller: ${r.errors} failed polls, ${r.skipped} skipped (one still out and one owed), ${r.retried} written again on a new connection, ${r.reconnects} idle connections the server closed (reopened), ${r.unsent} due at the stop, ${r.dropped} not recorded; open files hard limit ${r.fdLimit}`)

const of = (mode: FleetMode): FleetWindow[] => r.windows.filter((w) => w.mode === mode)
const c = `${r.appliances} appliances every ${r.periodS} s, a change every ${r.changeEveryS} s, ${r.entries} entries, ${r.query}, gzip${process.env.BENCH_FLEET_HTTP_THREADS === undefined ? '' : `, ${process.env.BENCH_FLEET_HTTP_THREADS} HTTP threads`}`
const rows: Row[] = []
const add = (subject: string, unit: string, f: (w: FleetWindow) => number): void => {
  for (const mode of ['full', 'delta'] as const) {
    const runs = of(mode).map(f)
    rows.push({ case: c, subject: `${mode}: ${subject}`, value: median(runs), unit, runs })
  }
}
add('bytes sent per change (the window\'s answers)', 'MB', (w) => w.bytes / 1e6)
add('bytes on the server port per change (nft, IP)', 'MB', (w) => (w.wireBytes ?? NaN) / 1e6)
add('server CPU per change (the window)', 's', (w) => w.serverCpuS)
add('server CPU per change above the lead-in rate (polls, no change)', 's', (w) => w.serverCpuS - idleCpuPerS * w.seconds)
add('poller CPU per change', 's', (w) => w.pollerCpuS)
add('TCP segments retransmitted per change (machine)', '', (w) => w.retransmits)
add('poll latency p50', 'ms', (w) => w.p50)
add('poll latency p99', 'ms', (w) => w.p99)
add('poll latency max', 'ms', (w) => w.max)
add('latency p99 of the 200s', 'ms', (w) => w.p99Of200)
add('304s per change', '', (w) => w.notModified)
add('200s per change', '', (w) => w.fullBodies + w.deltaBodies)
add('steal', '%', (w) => w.steal ?? NaN)
const ratio = (label: string, f: (w: FleetWindow) => number): Ratio => ({ case: 'delta / full', label, value: median(of('delta').map(f)) / median(of('full').map(f)) })
const ratios: Ratio[] = [
  ratio('bytes sent per change', (w) => w.bytes),
  ratio('server CPU per change', (w) => w.serverCpuS),
  ratio('server CPU per change above the lead-in rate', (w) => w.serverCpuS - idleCpuPerS * w.seconds),
  ratio('poll latency p99', (w) => w.p99),
]
report('fleet', 'Fleet: full feeds against deltas', rows, ratios, { ...r, windows: r.windows, leadIn: r.leadIn })
