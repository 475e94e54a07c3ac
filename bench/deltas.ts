/**
 * Feed deltas (docs/deltas.md) on the 131,072-entry feed with 1 % churn a version — 1,311
 * networks differ between two versions, 656 removed and 655 added (the feed stays within its cap) — in one run:
 * - bytes: the gzip delta one version behind ÷ the full gzip feed (target ≤ 0.02);
 * - server CPU per answer, raced round by round against a 304 of the same feed (the anchor): a
 *   delta one version behind (rendered ahead in the pool; target ≤ 2× a 304's CPU) and five
 *   versions behind (composed and rendered on the first request, then kept);
 * - the history's memory: a DeltaHistory fed 33 versions of the same shape in this process,
 *   measured as heap + array buffers after a full collection, beside its own count of prefixes.
 *
 * The server (`threatfeed serve`, one HTTP thread so every answer is the main thread's) runs
 * pinned to core 0 and wrk to core 1; versions are made by writing the store from this process,
 * which the server picks up by polling it, as it would a CLI's or another node's writes.
 *
 * Environment: BENCH_DELTAS_SECONDS (5), BENCH_DELTAS_RUNS (3).
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { openStore } from '../src/store/open.js'
import { DeltaHistory } from '../src/feed/delta-history.js'
import type { FeedSnapshot } from '../src/feed/snapshot-types.js'
import { FeedChurn, feedGetter, nextTag, startFeedServer } from './lib/feed-versions.js'
import { cpuSeconds, stopChildren } from './lib/processes.js'
import { makeRandom } from './lib/random.js'
import { ensureCommand, median, report, type Ratio, type Row } from './lib/report.js'
import { seedFeedStore } from './lib/seed-feed.js'

const SECONDS = Number(process.env.BENCH_DELTAS_SECONDS ?? 5)
const RUNS = Number(process.env.BENCH_DELTAS_RUNS ?? 3)
const ENTRIES = 131_072
const VERSIONS = 6

if (!ensureCommand('wrk', 'wrk') || !ensureCommand('taskset', 'util-linux')) process.exit(1)
process.on('exit', stopChildren)

const dir = mkdtempSync(join(tmpdir(), 'tf-bench-deltas-'))
const dataDir = join(dir, 'data')
console.log(`bench/deltas: seeding ${ENTRIES} rules…`)
const { workspaceId, key } = await seedFeedStore(dataDir, ENTRIES)
const auth = `Bearer ${key}`
const { server, port } = await startFeedServer(dataDir, '0', { THREATFEED_HTTP_THREADS: '1' })
const get = feedGetter(port, key)
const FEED = '/v1/threat/feeds?format=plain&family=v4'
const GZIP = { 'accept-encoding': 'gzip' }

// Versions: 1 % of the feed differing each time (bench/lib/feed-versions.ts).
const store = await openStore({ kind: 'embedded', dataDir })
const random = makeRandom(7)
const versions = new FeedChurn(workspaceId, ENTRIES, random)
const { churn: CHURN, removed: REMOVED } = versions
const tags: string[] = []
let tag = await nextTag(get, FEED, '', 200, 1500)
if (!tag.startsWith('"')) throw new Error('the feed was not served within 5 minutes')
tags.push(tag)
for (let v = 1; v <= VERSIONS; v++) {
  await store.applyRuleBatch({ ops: versions.nextOps() })
  tag = await nextTag(get, FEED, tags[tags.length - 1]!)
  tags.push(tag)
  console.log(`bench/deltas: version ${v}: ${tag}`)
}
await store.close()
const latest = tags[VERSIONS]!
const full = await get(FEED, GZIP)
const oneBehind = await get(`${FEED}&since=${encodeURIComponent(tags[VERSIONS - 1]!)}`, GZIP)
const fiveBehind = await get(`${FEED}&since=${encodeURIComponent(tags[VERSIONS - 5]!)}`, GZIP)
if (oneBehind.headers['x-feed-delta'] !== 'delta' || fiveBehind.headers['x-feed-delta'] !== 'delta') throw new Error('no delta answered')
console.log(`bench/deltas: full gzip ${full.bytes} B, delta one behind ${oneBehind.bytes} B (${String(oneBehind.headers['x-feed-delta-removed'])} removed, ${String(oneBehind.headers['x-feed-delta-added'])} added), five behind ${fiveBehind.bytes} B`)

interface Subject { readonly name: string, readonly path: string, readonly headers: string[] }
const subjects: Subject[] = [
  { name: '304 (anchor)', path: FEED, headers: ['Accept-Encoding: gzip', `If-None-Match: ${latest}`] },
  { name: 'delta, one version behind', path: `${FEED}&since=${encodeURIComponent(tags[VERSIONS - 1]!)}`, headers: ['Accept-Encoding: gzip'] },
  { name: 'delta, five versions behind', path: `${FEED}&since=${encodeURIComponent(tags[VERSIONS - 5]!)}`, headers: ['Accept-Encoding: gzip'] },
]

async function wrk (s: Subject): Promise<{ rps: number, cpuUs: number }> {
  const before = cpuSeconds(server.pid!)
  const args = ['-c', '1', 'wrk', '-t1', '-c16', `-d${SECONDS}s`, '-H', `Authorization: ${auth}`, ...s.headers.flatMap((h) => ['-H', h]), `http://127.0.0.1:${port}${s.path}`]
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn('taskset', args, { stdio: ['ignore', 'pipe', 'inherit'] })
    let text = ''
    child.stdout.on('data', (c: Buffer) => { text += c.toString() })
    child.on('exit', () => { resolve(text) })
    child.on('error', reject)
  })
  const cpu = cpuSeconds(server.pid!) - before
  const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? NaN)
  if (/Non-2xx or 3xx/.test(out)) throw new Error(`${s.name}: errors\n${out}`)
  return { rps: requests / SECONDS, cpuUs: cpu * 1e6 / requests }
}

const measured = new Map<string, Array<{ rps: number, cpuUs: number }>>(subjects.map((s) => [s.name, []]))
for (let run = 0; run < RUNS; run++) {
  const order = run % 2 === 0 ? subjects : [...subjects].reverse()
  for (const s of order) {
    const r = await wrk(s)
    measured.get(s.name)!.push(r)
    console.log(`  ${s.name}: ${r.rps.toFixed(0)} req/s, ${r.cpuUs.toFixed(1)} µs CPU/req`)
  }
}
server.kill('SIGTERM')

// The history's memory, measured in this process on the same shape: 33 versions of 131,072
// IPv4 networks, 1 % replaced each time.
setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void
const sets: Uint32Array[] = []
let addrs = Array.from({ length: ENTRIES }, (_, i) => 0x0a000000 + i * 2)
let next = 0x0b000000
for (let v = 0; v <= 32; v++) {
  if (v > 0) {
    addrs = [...addrs]
    for (let k = 0; k < REMOVED; k++) { const at = random() % addrs.length; addrs[at] = addrs[addrs.length - 1]!; addrs.pop() }
    for (let k = REMOVED; k < CHURN; k++) { addrs.push(next); next += 2 }
    addrs.sort((a, b) => a - b)
  }
  const packed = new Uint32Array(addrs.length * 2)
  addrs.forEach((a, i) => { packed[i * 2] = a; packed[i * 2 + 1] = 32 })
  sets.push(packed)
}
const snapshotOf = (v: number): FeedSnapshot => ({
  workspaceId: 'w', feedId: '*', name: '', defaults: null, limit: ENTRIES, builtAt: v, expiresAt: Infinity, shardCounts: [],
  networks: { block: { v4: ENTRIES, v6: 0 }, allow: { v4: 0, v6: 0 } },
  variants: new Map([['plain|v4|block|', { status: 200, identity: { etag: `"plain.v4.block.identity.${v}"` }, gzip: { etag: `"plain.v4.block.gzip.${v}"` } } as never]]),
  published: { block: { total: { v4: sets[v]!, v6: new Uint32Array(0) }, groups: [] }, allow: { total: { v4: new Uint32Array(0), v6: new Uint32Array(0) }, groups: [] } },
})
const history = new DeltaHistory({ versions: 32, maxAgeMs: 86_400_000 })
const snapshots = sets.map((_, v) => snapshotOf(v))
gc()
const before = process.memoryUsage()
for (const [v, s] of snapshots.entries()) history.record('w', '*', s, v)
gc()
const after = process.memoryUsage()
const historyBytes = (after.heapUsed - before.heapUsed) + (after.arrayBuffers - before.arrayBuffers)
const held = history.size('w', '*', 'block')
console.log(`bench/deltas: history of 33 versions: ${held.versions} versions, ${held.prefixes} prefixes, ${(historyBytes / 1e6).toFixed(2)} MB`)
rmSync(dir, { recursive: true, force: true })

const rows: Row[] = subjects.map((s) => {
  const m = measured.get(s.name)!
  return { case: 'plain v4, gzip, 16 conns', subject: s.name, value: median(m.map((r) => r.rps)), unit: 'req/s', runs: m.map((r) => r.rps), extra: { cpu_us_per_req: median(m.map((r) => r.cpuUs)) } }
})
const cpuOf = (name: string): number => median(measured.get(name)!.map((r) => r.cpuUs))
const perRound = (name: string): number[] => measured.get(name)!.map((r, i) => r.cpuUs / measured.get('304 (anchor)')![i]!.cpuUs)
const ratios: Ratio[] = [
  { case: 'bytes', label: 'gzip delta one version behind / full gzip feed', value: oneBehind.bytes / full.bytes, target: '<= 0.02', pass: oneBehind.bytes / full.bytes <= 0.02 },
  { case: 'cpu', label: `server CPU per answer, delta one behind / 304 (per round ${Math.min(...perRound('delta, one version behind')).toFixed(2)}–${Math.max(...perRound('delta, one version behind')).toFixed(2)})`, value: cpuOf('delta, one version behind') / cpuOf('304 (anchor)'), target: '<= 2', pass: cpuOf('delta, one version behind') / cpuOf('304 (anchor)') <= 2 },
  { case: 'cpu', label: 'server CPU per answer, delta five behind / 304', value: cpuOf('delta, five versions behind') / cpuOf('304 (anchor)') },
  { case: 'memory', label: `history of a 131,072-entry feed, 32 bases at 1 % churn, MB (${held.prefixes} prefixes)`, value: historyBytes / 1e6 },
]
report('deltas', 'Feed deltas: bytes, CPU per answer against a 304, history memory', rows, ratios, {
  entries: ENTRIES, churn: CHURN, full_gzip_bytes: full.bytes, delta_one_behind_gzip_bytes: oneBehind.bytes, delta_five_behind_gzip_bytes: fiveBehind.bytes, seconds: SECONDS, runs: RUNS,
})
