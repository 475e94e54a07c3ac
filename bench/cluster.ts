/**
 * bench/cluster: a fleet of appliances polling round-robin over three nodes on one store, raced
 * against the same fleet on one node, with a change every BENCH_CLUSTER_CHANGE_MS (30 s). Each
 * appliance keeps the ETag it was last given and sends it to whichever node comes next, so every
 * hop to a node that answers differently costs a download: the 304 ratio of the three-node fleet
 * should be within 0.5 percentage points of the single node's (issue 18).
 *
 * The 304 ratio depends on how many polls fall between two changes (a faster fleet has a higher
 * one), so the table also gives the downloads per appliance per change: 1.0 when no hop between
 * nodes costs a download.
 *
 * The two set-ups alternate slice by slice in one run (one, three, one, three …), and CPU is
 * reported per answer (the nodes' own CPU time, from /proc) beside the steal, since polls/s on a
 * shared machine move with its load.
 *
 *   BENCH_CLUSTER_CHANGE_MS=30000 BENCH_CLUSTER_SLICE_MS=65000 BENCH_CLUSTER_SLICES=2 npm run bench cluster
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { get, post, seedCluster, startNode, stopNode, type Node } from '../test/helpers/cluster-nodes.js'
import { cpuTicks, report, stealPercent, type Ratio, type Row } from './lib/report.js'

const CHANGE_MS = Number(process.env.BENCH_CLUSTER_CHANGE_MS ?? 30_000)
const SLICE_MS = Number(process.env.BENCH_CLUSTER_SLICE_MS ?? 65_000)
const SLICES = Number(process.env.BENCH_CLUSTER_SLICES ?? 2)
const REBUILD_MS = Number(process.env.BENCH_CLUSTER_REBUILD_MS ?? 30_000)
const APPLIANCES = 200
const IN_FLIGHT = 8
const PATH = '/v1/threat/feeds?format=dialect_a&family=both'

/** utime + stime of a process, in clock ticks (/proc/<pid>/stat fields 14 and 15). */
function processTicks (pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return Number(f[11]) + Number(f[12])
}

interface Slice { polls: number, notModified: number, seconds: number, cpuMsPerAnswer: number, steal: number | null, changes: number }

async function runSlice (count: number): Promise<Slice> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-bench-cluster-'))
  const nodes: Node[] = []
  try {
    const fleet = await seedCluster(dir)
    const auth = { authorization: fleet.auth }
    for (let i = 0; i < count; i++) nodes.push(await startNode(dir, { THREATFEED_FEED_REBUILD_MS: String(REBUILD_MS) }))
    let serial = 0
    let changes = 0
    const change = async (): Promise<void> => {
      changes++
      const body = Array.from({ length: 50 }, () => { serial++; return { type: 'access_rules', action: 'block', ip: `10.${(serial >> 8) & 255}.${serial & 255}.1` } })
      await post(nodes[serial % nodes.length]!.port, '/v1/signal', auth, body)
    }
    await change()
    for (const n of nodes) await get(n.port, PATH, auth)
    const tags: Array<string | undefined> = new Array(APPLIANCES).fill(undefined)
    let polls = 0
    let notModified = 0
    let next = 0
    const ticks0 = nodes.map((n) => processTicks(n.pid))
    const machine0 = cpuTicks()
    const started = Date.now()
    const timer = setInterval(() => { void change() }, CHANGE_MS)
    await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
      while (Date.now() - started < SLICE_MS) {
        const i = next++ % APPLIANCES
        const tag = tags[i]
        const r = await get(nodes[(next + i) % nodes.length]!.port, PATH, tag === undefined ? auth : { ...auth, 'if-none-match': tag })
        polls++
        if (r.status === 304) notModified++
        else tags[i] = r.etag
      }
    }))
    clearInterval(timer)
    const seconds = (Date.now() - started) / 1000
    const cpuTicksUsed = nodes.reduce((sum, n, k) => sum + processTicks(n.pid) - ticks0[k]!, 0)
    // The first change was made before the fleet held any tag: every appliance's first poll downloads.
    return { polls, notModified, seconds, cpuMsPerAnswer: (cpuTicksUsed * 10) / polls, steal: stealPercent(machine0, cpuTicks()), changes: changes - 1 }
  } finally {
    for (const n of nodes) await stopNode(n)
    rmSync(dir, { recursive: true, force: true })
  }
}

const results: Record<'one' | 'three', Slice[]> = { one: [], three: [] }
for (let s = 0; s < SLICES; s++) {
  for (const [name, count] of [['one', 1], ['three', 3]] as const) {
    const r = await runSlice(count)
    results[name].push(r)
    process.stdout.write(`slice ${s} ${name}: ${r.polls} polls, ${(100 * r.notModified / r.polls).toFixed(2)} % 304, ${(r.polls / r.seconds).toFixed(0)} polls/s, ${r.cpuMsPerAnswer.toFixed(3)} ms CPU/answer, steal ${r.steal?.toFixed(1) ?? '?'} %\n`)
  }
}

const sum = (xs: Slice[], f: (x: Slice) => number): number => xs.reduce((a, x) => a + f(x), 0)
const rows: Row[] = []
const ratio304: Record<string, number> = {}
for (const name of ['one', 'three'] as const) {
  const xs = results[name]
  const polls = sum(xs, (x) => x.polls)
  ratio304[name] = 100 * sum(xs, (x) => x.notModified) / polls
  rows.push({ case: `round-robin polls, a change every ${CHANGE_MS / 1000} s`, subject: `${name} node${name === 'one' ? '' : 's'}`, value: polls / sum(xs, (x) => x.seconds), unit: 'polls/s', runs: xs.map((x) => x.polls / x.seconds), extra: { '304 %': Number(ratio304[name]!.toFixed(3)), 'downloads/appliance/change': Number(((polls - sum(xs, (x) => x.notModified) - APPLIANCES * xs.length) / APPLIANCES / Math.max(1, sum(xs, (x) => x.changes))).toFixed(3)), 'CPU ms/answer': Number((sum(xs, (x) => x.cpuMsPerAnswer * x.polls) / polls).toFixed(4)), 'steal %': xs.map((x) => x.steal?.toFixed(1) ?? '?').join('/') } })
}
const gap = ratio304.one! - ratio304.three!
const ratios: Ratio[] = [{ case: '304 ratio', label: 'one node − three nodes, percentage points', value: Number(gap.toFixed(3)), target: '≤ 0.5', pass: gap <= 0.5 }]
report('cluster', 'Several nodes: round-robin fleet over three nodes vs one', rows, ratios, { changeMs: CHANGE_MS, sliceMs: SLICE_MS, slices: SLICES, rebuildMs: REBUILD_MS, appliances: APPLIANCES, inFlight: IN_FLIGHT })
