/**
 * Snapshot building on a 131,072-entry feed: 100,000-odd random IPs, 20 countries and 50 ASNs,
 * expanded with the real registry databases (DB-IP Lite country MMDB from node_modules and the ASN
 * MMDB that ensureDefaultGeo builds from @ip-location-db/asn), carved, rendered in all four
 * dialects, three families, both actions, with checksums, identity and gzip: the 44 variants.
 *
 * Raced against a straightforward build (the anchor): the same networks rendered per variant with
 * template strings, `zlib.gzipSync` and MD5 per body, on one thread — what a first version would do.
 *
 * Targets (issue 6): full rebuild ≤ 1 s; rebuild after one added IP ≤ 200 ms; RSS with ten such
 * lists built ≤ 400 MB (compiled service; measured three times in fresh processes, 1 s after the
 * builds, 10 s later, and after every body was read once — see measureRssRuns). Also: the gzip
 * level table behind GZIP_LEVEL (src/feed/render/gzip.ts).
 *
 * Environment:
 * - BENCH_SNAPSHOT_RUNS: runs per case (default 5);
 * - BENCH_SNAPSHOT_CASES: which cases, comma-separated, of `full` (full rebuild and the anchor),
 *   `incremental` (one added IP), `sharded` (a list of 8 shards with every publish guard, against
 *   the unsharded feed), `levels` (the gzip level table), `rss` (ten lists in a fresh
 *   process); default all. A subset writes its rows to bench/results/snapshot.json all the same.
 * - BENCH_SNAPSHOT_OLD_TREE=<dir>: the sharded case also runs the guarded build of another
 *   checkout's src/feed (`git archive <commit> src workers package.json | tar -x -C <dir>` and a
 *   node_modules link), alternated with this one run by run in the same pool: before and after.
 */
import { createHash } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import os, { tmpdir } from 'node:os'
import { join } from 'node:path'
import { deflateRawSync, gzipSync } from 'node:zlib'
import { median, repoDir, report, type Ratio, type Row } from './lib/report.js'
import { buildSnapshot, metaOf, type BuildResult, type FeedDefinition, type FeedTasks } from '../src/feed/build-snapshot.js'
import { FeedGuard } from '../src/feed/guards.js'
import { guardedBuild } from '../src/feed/guards-run.js'
import { inProcessTasks } from '../src/feed/in-process-tasks.js'
import { LastModifiedKeeper } from '../src/feed/last-modified.js'
import { computeNetworks } from '../src/feed/render/compute-networks.js'
import { GZIP_LEVEL } from '../src/feed/render/gzip.js'
import type { ChunkCache } from '../src/pool/protocol.js'
import type { FeedSnapshot } from '../src/feed/snapshot-types.js'
import { ensureDefaultGeo } from '../src/geo/default-db.js'
import type { GeoIndex } from '../src/geo/geo-index.js'
import { loadGeoIndex } from '../src/geo/load.js'
import { formatCidr4, formatCidr6, formatRange4, formatRange6 } from '../src/net/format.js'
import { NetworkSetBuilder } from '../src/net/network-set.js'
import { createPool } from '../src/pool/pool.js'
import { openEmbeddedStore } from '../src/store/embedded/embedded-store.js'
import type { AccessRule, AccessRuleInput } from '../src/store/types.js'
import { allTargets, groupTargets, selectRules, toRuleTable, type RuleTable } from '../src/feed/rule-table.js'
import { makeRandom, window } from './lib/random.js'

const RUNS = Number(process.env.BENCH_SNAPSHOT_RUNS ?? 5)
const OLD_TREE = process.env.BENCH_SNAPSHOT_OLD_TREE ?? ''
const CASES = new Set((process.env.BENCH_SNAPSHOT_CASES ?? 'full,incremental,sharded,levels,rss').split(',').map((c) => c.trim()))
const TARGET_ENTRIES = 131_072
const COUNTRIES = 20
const ASNS = 50
const IPS = 100_000

function ipText (a: number): string {
  return `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}/32`
}

/** Picks the geo targets and the number of random IPs that make exactly TARGET_ENTRIES networks. */
function chooseTargets (geo: GeoIndex): { countries: string[], asns: number[], ips: string[] } {
  const prefixes = (p: { v4: Uint32Array, v6: Uint32Array }): number => p.v4.length / 2 + p.v6.length / 5
  // About 14,000 networks of countries and 17,000 of ASNs, so that ~100,000 IPs reach the target.
  const countries = window(geo.countries(), (c) => prefixes(geo.expandCountry(c)), COUNTRIES, 14_000)
  const asns = window(geo.asns().filter((a) => prefixes(geo.expandAsn(a)) > 0), (a) => prefixes(geo.expandAsn(a)), ASNS, 17_000)
  const rnd = makeRandom(0x5eed)
  const pool: number[] = Array.from({ length: IPS + 20_000 }, () => rnd())
  const count = (n: number): number => {
    const b = new NetworkSetBuilder(n, 1024)
    for (const c of countries) b.addPacked(geo.expandCountry(c))
    for (const a of asns) b.addPacked(geo.expandAsn(a))
    for (let i = 0; i < n; i++) b.addV4(pool[i]!, 32)
    return b.build().count()
  }
  let lo = IPS - 20_000
  let hi = pool.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (count(mid) < TARGET_ENTRIES) lo = mid + 1
    else hi = mid
  }
  return { countries, asns, ips: pool.slice(0, lo).map(ipText) }
}

let seq = 1
function ruleInput (workspaceId: string, type: 'ip' | 'asn' | 'country', value: string): AccessRuleInput {
  return { workspaceId, kind: 'access_rule', ruleRef: null, labels: {}, reason: null, expiresAt: null, seq: seq++, target: { type, value }, action: 'block', name: null, confidence: null, severity: null }
}

/** The anchor: every variant rendered with strings, gzipSync and MD5, one body at a time. */
function naiveBuild (rules: RuleTable, geo: GeoIndex, level: number): number {
  const selection = selectRules(rules, null, Date.now())
  const networks = computeNetworks({ geo: { version: 0 }, block: groupTargets(rules, selection.block, null), allow: [], carve: allTargets(rules, selection.carve), meta: '' }, geo)
  let bytes = 0
  for (const action of [networks.block, networks.allow]) {
    const v4: string[] = []
    const v6: string[] = []
    const r4: string[] = []
    const r6: string[] = []
    const { v4: p4, v6: p6 } = action.total
    for (let k = 0; k < p4.length; k += 2) {
      v4.push(formatCidr4(p4[k]!, p4[k + 1]!))
      r4.push(`${p4[k + 1] === 32 ? formatCidr4(p4[k]!, 32).slice(0, -3) + ',IP' : formatRange4(p4[k]!, p4[k + 1]!) + ',IP Range'},high,high`)
    }
    for (let k = 0; k < p6.length; k += 5) {
      v6.push(formatCidr6(p6, k, p6[k + 4]!))
      r6.push(`${p6[k + 4] === 128 ? formatCidr6(p6, k, 128).slice(0, -4) + ',IP' : formatRange6(p6, k, p6[k + 4]!) + ',IP Range'},high,high`)
    }
    const lines = (a: string[]): string => a.length === 0 ? '' : a.join('\n') + '\n'
    const header = (family: string, n: number): string => `# feed\n# All access rules\n# action: block\n# family: ${family}\n# generated: 2025-01-01T00:00:00Z\n# entries: ${n}\n`
    const bodies = [
      lines(v4), lines(v6), lines([...v4, ...v6]),
      header('v4', v4.length) + lines(v4), header('v6', v6.length) + lines(v6), header('both', v4.length + v6.length) + lines([...v4, ...v6]),
      lines(r4), lines(r6), lines([...r4, ...r6]),
      v4.length === 0 ? '' : `elements = { ${v4.join(', ')} }\n`, v6.length === 0 ? '' : `elements = { ${v6.join(', ')} }\n`,
    ]
    for (const text of bodies) {
      const body = Buffer.from(text)
      const md5 = Buffer.from(createHash('md5').update(body).digest('hex'))
      const gz = gzipSync(body, { level })
      createHash('sha1').update(gz).digest()
      gzipSync(md5, { level })
      bytes += body.length + gz.length
    }
  }
  return bytes
}

function gzipBytes (s: FeedSnapshot): number {
  let n = 0
  for (const v of s.variants.values()) n += v.gzip.body.byteLength
  return n
}

/** Wall time, and CPU time of the whole process (all threads) in ms. */
async function timed<T> (fn: () => Promise<T>): Promise<{ ms: number, cpu: number, value: T }> {
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  const value = await fn()
  const c = process.cpuUsage(c0)
  return { ms: performance.now() - t0, cpu: (c.user + c.system) / 1000, value }
}

/** The host's steal time so far, in clock ticks (/proc/stat; 0 where there is none). */
function stealTicks (): number {
  try {
    return Number(readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/)[8] ?? 0)
  } catch {
    return 0
  }
}

function loadAverage (): string {
  return os.loadavg().map((x) => x.toFixed(1)).join(' ')
}

async function main (): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-bench-snapshot-'))
  const rows: Row[] = []
  const ratios: Ratio[] = []
  try {
    process.stderr.write('bench: geo databases (DB-IP Lite country; ASN built from @ip-location-db/asn, cached)\n')
    const geoPaths = await ensureDefaultGeo(join(tmpdir(), 'threatfeed-bench-geo'))
    const geo = await loadGeoIndex(geoPaths)
    const { countries, asns, ips } = chooseTargets(geo)
    process.stderr.write(`bench: ${ips.length} IPs + ${countries.length} countries + ${asns.length} ASNs\n`)

    const store = await openEmbeddedStore(dir)
    const ws = await store.workspaces.create({ name: 'bench', subscription: 'active' })
    const inputs = [
      ...countries.map((c) => ruleInput(ws.id, 'country', c)),
      ...asns.map((a) => ruleInput(ws.id, 'asn', `AS${a}`)),
      ...ips.map((ip) => ruleInput(ws.id, 'ip', ip)),
    ]
    for (let i = 0; i < inputs.length; i += 10_000) {
      await store.applyRuleBatch({ ops: inputs.slice(i, i + 10_000).map((input) => ({ op: 'upsertAccessRule' as const, input })) })
    }
    const fetchRuns: number[] = []
    const tableRuns: number[] = []
    let stored: AccessRule[] = []
    let rules = toRuleTable([])
    for (let i = 0; i < RUNS; i++) {
      const r = await timed(() => store.rules.listAccessRules(ws.id, Date.now()))
      fetchRuns.push(r.ms)
      stored = r.value
      const t = await timed(async () => toRuleTable(stored))
      tableRuns.push(t.ms)
      rules = t.value
    }
    rows.push({ case: `store fetch of ${rules.length} rules (main thread)`, subject: 'store.rules.listAccessRules (LMDB)', value: median(fetchRuns), unit: 'ms', runs: fetchRuns })
    rows.push({ case: `store fetch of ${rules.length} rules (main thread)`, subject: 'toRuleTable', value: median(tableRuns), unit: 'ms', runs: tableRuns })

    const pool = createPool({ workers: 2, taskTimeoutMs: 120_000 })
    pool.setGeo(geo.toTransferable())
    const lastModified = new LastModifiedKeeper(store.feedVersions, { timeoutMs: 5000 })
    const def: FeedDefinition = { workspaceId: ws.id, workspaceName: ws.name, list: null }
    // Without caches, a cold build: nothing reused from earlier builds of any feed (as after a restart).
    const build = (tasks: FeedTasks, rs: RuleTable, caches?: Map<string, ChunkCache>, gzipLevel?: number): Promise<{ snapshot: FeedSnapshot, caches: Map<string, ChunkCache> }> =>
      buildSnapshot(def, rs, { tasks, lastModified, now: Date.now(), reuseOtherFeeds: false, ...(caches !== undefined ? { caches } : {}), ...(gzipLevel !== undefined ? { gzipLevel } : {}) })
    // Warm-up: worker start, JIT, geo index delivery.
    const warm = await build(pool, rules)
    const entries = warm.snapshot.variants.get('plain|both|block|')!.entries
    process.stderr.write(`bench: ${entries} entries in the feed; ${warm.snapshot.variants.size} variants\n`)

    // Full rebuild (no chunk cache) in the pool vs the anchor, alternating. Each run has one IP
    // of its own, so that nothing computed for an earlier run (the workers keep the last networks
    // they computed, for lists selecting the same rules) can serve it: a cold build.
    const local = inProcessTasks(geo)
    const another = makeRandom(0xf0)
    const withAnotherIp = (): RuleTable => toRuleTable([...stored, { ...stored[stored.length - 1]!, id: `full-${seq}`, target: { type: 'ip', value: ipText(another()) }, seq: seq++ }])
    const full: number[] = []
    const anchor: number[] = []
    const anchorCpu: number[] = []
    const inProcess: number[] = []
    const inProcessCpu: number[] = []
    for (let i = 0; i < (CASES.has('full') ? RUNS : 0); i++) {
      const table = withAnotherIp()
      full.push((await timed(() => build(pool, table))).ms)
      const a = await timed(async () => naiveBuild(table, geo, 6))
      anchor.push(a.ms)
      anchorCpu.push(a.cpu)
      const l = await timed(() => build(local, table))
      inProcess.push(l.ms)
      inProcessCpu.push(l.cpu)
    }
    const fullCase = `full rebuild, ${entries} entries, 44 variants × identity+gzip`
    if (CASES.has('full')) {
      rows.push({ case: fullCase, subject: 'threatfeed (pool, 2 workers)', value: median(full), unit: 'ms', runs: full, extra: { min: Math.min(...full) } })
      rows.push({ case: fullCase, subject: 'threatfeed (in-process, one thread)', value: median(inProcess), unit: 'ms', runs: inProcess, extra: { cpuMs: median(inProcessCpu) } })
      rows.push({ case: fullCase, subject: 'anchor: strings + gzipSync per body', value: median(anchor), unit: 'ms', runs: anchor, extra: { cpuMs: median(anchorCpu) } })
      ratios.push({ case: 'full rebuild', label: 'threatfeed pool / anchor (wall)', value: median(full) / median(anchor) })
      ratios.push({ case: 'full rebuild', label: 'threatfeed in-process / anchor (CPU)', value: median(inProcessCpu) / median(anchorCpu) })
      ratios.push({ case: 'full rebuild', label: 'threatfeed pool ms / 1000 ms budget', value: median(full) / 1000, target: '≤ 1', pass: median(full) <= 1000 })
    }

    // Rebuild after one added IP: the previous build's chunks are reused.
    if (CASES.has('incremental')) {
      const incremental: number[] = []
      const incrementalLocal: number[] = []
      const incrementalCpu: number[] = []
      let caches = (await build(pool, rules)).caches
      let localCaches = (await build(local, rules)).caches
      const extra = makeRandom(0xadd)
      for (let i = 0; i < RUNS; i++) {
        stored = [...stored, { ...stored[stored.length - 1]!, id: `extra-${i}`, target: { type: 'ip', value: ipText(extra()) }, seq: seq++ }]
        const table = toRuleTable(stored)
        const r = await timed(() => build(pool, table, caches))
        caches = r.value.caches
        incremental.push(r.ms)
        const l = await timed(() => build(local, table, localCaches))
        localCaches = l.value.caches
        incrementalLocal.push(l.ms)
        incrementalCpu.push(l.cpu)
      }
      rows.push({ case: 'rebuild after one added IP', subject: 'threatfeed (pool, chunk reuse)', value: median(incremental), unit: 'ms', runs: incremental, extra: { min: Math.min(...incremental) } })
      rows.push({ case: 'rebuild after one added IP', subject: 'threatfeed (in-process, one thread)', value: median(incrementalLocal), unit: 'ms', runs: incrementalLocal, extra: { cpuMs: median(incrementalCpu) } })
      ratios.push({ case: 'rebuild after one added IP', label: 'threatfeed pool ms / 200 ms budget', value: median(incremental) / 200, target: '≤ 1', pass: median(incremental) <= 200 })
      if (full.length > 0) ratios.push({ case: 'rebuild after one added IP', label: 'incremental / full rebuild (pool)', value: median(incremental) / median(full) })
    }

    // A sharded list (N = 8) with every publish guard on, against the unsharded workspace feed,
    // alternating: a full rebuild through the guard (two compute tasks, the candidate's rows
    // frozen) and 6 × 9 render tasks (the whole feed and its 8 shards). CPU is the process's (all
    // threads); steal is the host's, from /proc/stat, over the same runs.
    if (CASES.has('sharded')) {
      const guards = { minEntries: 1, maxShrinkPct: 50, maxGrowPct: 50, rejectSpecial: true, mode: 'drop' as const, minPrefixV4: 8, minPrefixV6: 12 }
      const list = { id: 'bench-sharded', workspaceId: ws.id, name: 'sharded', description: '', defaults: { shards: 8, guards }, selector: {}, createdAt: 0, updatedAt: 0 }
      const shardedDef: FeedDefinition = { ...def, list }
      // The same guarded build from the modules of a checkout (this one, or BENCH_SNAPSHOT_OLD_TREE's).
      const guardedWith = (m: { buildSnapshot: typeof buildSnapshot, FeedGuard: typeof FeedGuard, guardedBuild: typeof guardedBuild }): (table: RuleTable) => Promise<BuildResult> => {
        const guard = new m.FeedGuard()
        return (table) => m.guardedBuild({
          workspaceId: ws.id, guard, settings: guards, list, meta: metaOf(shardedDef), now: Date.now(),
          read: (fn) => fn(table),
          compute: (t) => pool.compute(t),
          build: (targets, special) => m.buildSnapshot(shardedDef, targets, { tasks: pool, lastModified, now: Date.now(), reuseOtherFeeds: false, ...(special !== undefined ? { special } : {}) }),
          shards: [],
          onState: () => {},
        })
      }
      const guarded = guardedWith({ buildSnapshot, FeedGuard, guardedBuild })
      const oldGuarded = OLD_TREE === ''
        ? null
        : guardedWith({
          buildSnapshot: (await import(pathToFileURL(join(OLD_TREE, 'src/feed/build-snapshot.ts')).href) as { buildSnapshot: typeof buildSnapshot }).buildSnapshot,
          FeedGuard: (await import(pathToFileURL(join(OLD_TREE, 'src/feed/guards.ts')).href) as { FeedGuard: typeof FeedGuard }).FeedGuard,
          guardedBuild: (await import(pathToFileURL(join(OLD_TREE, 'src/feed/guards-run.ts')).href) as { guardedBuild: typeof guardedBuild }).guardedBuild,
        })
      await guarded(withAnotherIp())
      if (oldGuarded !== null) await oldGuarded(withAnotherIp())
      const oldMs: number[] = []
      const oldCpu: number[] = []
      const plainMs: number[] = []
      const plainCpu: number[] = []
      const shardMs: number[] = []
      const shardCpu: number[] = []
      const steal0 = stealTicks()
      let variants = 0
      let lastPlain: BuildResult | null = null
      let lastSharded: BuildResult | null = null
      for (let i = 0; i < RUNS; i++) {
        const table = withAnotherIp()
        const p = await timed(() => build(pool, table))
        lastPlain = { ...p.value, invalid: 0 }
        plainMs.push(p.ms)
        plainCpu.push(p.cpu)
        // Old and new alternate which goes first: the first of the two records the feed versions.
        const runOld = async (): Promise<void> => {
          if (oldGuarded === null) return
          const o = await timed(() => oldGuarded(table))
          oldMs.push(o.ms)
          oldCpu.push(o.cpu)
        }
        if (i % 2 === 1) await runOld()
        const g = await timed(() => guarded(table))
        shardMs.push(g.ms)
        shardCpu.push(g.cpu)
        variants = g.value.snapshot.variants.size
        lastSharded = g.value
        if (i % 2 === 0) await runOld()
      }
      const steal = stealTicks() - steal0
      const shardCase = `full rebuild, ${entries} entries: sharded list (N = 8, ${variants} variants) with every guard vs the unsharded feed`
      rows.push({ case: shardCase, subject: 'unsharded, no guards (pool)', value: median(plainMs), unit: 'ms', runs: plainMs, extra: { cpuMs: median(plainCpu), cpuUsPerEntry: median(plainCpu) * 1000 / entries } })
      rows.push({ case: shardCase, subject: 'N = 8 + guards (pool)', value: median(shardMs), unit: 'ms', runs: shardMs, extra: { cpuMs: median(shardCpu), cpuUsPerEntry: median(shardCpu) * 1000 / entries, stealTicks: steal } })
      if (oldGuarded !== null) {
        rows.push({ case: shardCase, subject: `N = 8 + guards (pool), ${OLD_TREE}`, value: median(oldMs), unit: 'ms', runs: oldMs, extra: { cpuMs: median(oldCpu), cpuUsPerEntry: median(oldCpu) * 1000 / entries } })
        ratios.push({ case: 'sharded + guards', label: `CPU this tree / ${OLD_TREE}`, value: median(shardCpu) / median(oldCpu) })
      }
      // The floor under both builds: deflating, at the build's level, every text chunk each one
      // publishes (whole feed, plus the shards for the list), on this thread.
      const floorOf = (r: BuildResult | null): number => {
        if (r === null) return NaN
        const c0 = process.cpuUsage()
        for (const cache of r.caches.values()) {
          const text = cache.text
          if (text === null) continue
          const { offsets } = text.pieces
          for (let k = 0; k + 1 < offsets.length; k++) if (offsets[k + 1]! > offsets[k]!) deflateRawSync(text.bytes.subarray(offsets[k]!, offsets[k + 1]!), { level: GZIP_LEVEL })
        }
        const c = process.cpuUsage(c0)
        return (c.user + c.system) / 1000
      }
      const floors = Array.from({ length: 3 }, () => ({ plain: floorOf(lastPlain), sharded: floorOf(lastSharded) }))
      const plainFloor = median(floors.map((f) => f.plain))
      const shardedFloor = median(floors.map((f) => f.sharded))
      rows.push({ case: shardCase, subject: `floor: level-${GZIP_LEVEL} deflate of every text chunk, unsharded (one thread)`, value: plainFloor, unit: 'ms CPU', runs: floors.map((f) => f.plain) })
      rows.push({ case: shardCase, subject: `floor: level-${GZIP_LEVEL} deflate of every text chunk, N = 8 list (one thread)`, value: shardedFloor, unit: 'ms CPU', runs: floors.map((f) => f.sharded) })
      ratios.push({ case: 'sharded + guards', label: 'CPU sharded+guards beyond its deflate floor / unsharded beyond its own', value: (median(shardCpu) - shardedFloor) / (median(plainCpu) - plainFloor) })
      ratios.push({ case: 'sharded + guards', label: 'CPU sharded+guards / unsharded', value: median(shardCpu) / median(plainCpu) })
      ratios.push({ case: 'sharded + guards', label: 'CPU ms (median) / 1000 ms', value: median(shardCpu) / 1000, target: '≤ 1', pass: median(shardCpu) <= 1000 })
      ratios.push({ case: 'sharded + guards', label: 'pool ms / 1000 ms budget', value: median(shardMs) / 1000, target: '≤ 1', pass: median(shardMs) <= 1000 })
    }

    // The gzip level table: full in-process builds (one thread), so CPU time is the work itself,
    // whatever else the machine runs; levels alternate run by run.
    if (CASES.has('levels')) {
      const levels: Record<number, { cpu: number[], bytes: number }> = { 1: { cpu: [], bytes: 0 }, 4: { cpu: [], bytes: 0 }, 6: { cpu: [], bytes: 0 }, 9: { cpu: [], bytes: 0 } }
      for (let i = 0; i < RUNS; i++) {
        for (const level of [1, 4, 6, 9]) {
          const r = await timed(() => build(local, rules, undefined, level))
          levels[level]!.cpu.push(r.cpu)
          levels[level]!.bytes = gzipBytes(r.value.snapshot)
        }
      }
      for (const [level, l] of Object.entries(levels)) {
        rows.push({ case: 'gzip level (full in-process build, CPU time)', subject: `level ${level}`, value: median(l.cpu), unit: 'ms', runs: l.cpu, extra: { gzipBytes: l.bytes } })
      }
      const cpuOf = (level: number): number => median(levels[level]!.cpu)
      for (const level of [1, 4, 9]) {
        ratios.push({ case: 'gzip level', label: `level ${level} / level 6 build CPU`, value: cpuOf(level) / cpuOf(6) })
        ratios.push({ case: 'gzip level', label: `level ${level} / level 6 gzip bytes`, value: levels[level]!.bytes / levels[6]!.bytes })
      }
    }

    await pool.destroy()
    // RSS with ten such lists built and held by the FeedService (plus the workspace feed), measured
    // in a fresh process: this one carries the high-water marks of everything above (the anchor's
    // strings among them), and RSS never gives those back.
    for (let i = 0; i < 10; i++) await store.lists.create({ workspaceId: ws.id, name: `list-${i}`, description: `bench list ${i}`, defaults: { maxEntries: 200_000 }, selector: {} })
    await store.close()
    if (CASES.has('rss')) measureRssRuns(dir, geoPaths, rows, ratios)
    report('snapshot', 'Snapshot building (issue 6)', rows, ratios, { entries, ips: ips.length, countries, asns, geo: geoPaths, loadAverage: loadAverage() })
    process.stdout.write(`load average at the end: ${loadAverage()} (${os.cpus().length} CPUs; other work on the machine inflates wall times)\n`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

interface RssFigures {
  /** RSS (VmRSS), its anonymous and file-mapped parts, and the V8 heap, in MiB. */
  rss: number
  anon: number
  file: number
  heap: number
  /** Every ArrayBuffer and SharedArrayBuffer of the main thread (the snapshots' bytes). */
  buffers: number
}

interface RssChild {
  beforeService: number
  buildAllMs: number
  /** 1 s after the last build. */
  built: RssFigures
  /** 10 s later (V8 has given back the heap pages of the build burst). */
  rest: RssFigures
  /** Then every body of every variant of every feed read once (assembled where it has several spans). */
  readAll: RssFigures
  /** Peak RSS of the process (VmHWM). */
  peak: number
}

const RSS_RUNS = 3

/**
 * Runs the RSS child RSS_RUNS times as the service runs in production (compiled, dist/) and once
 * from the sources under tsx (whose loader adds to the main thread and to each worker), and
 * reports the medians. Repeated because the figure moves by tens of MiB from run to run: how
 * much heap V8 still holds from the store fetch at start, and where glibc's per-thread heaps
 * end up, depend on timing.
 */
function measureRssRuns (dir: string, geoPaths: { countryDb: string, asnDb: string }, rows: Row[], ratios: Ratio[]): void {
  const child = writeRssChild(dir)
  const subjects: Array<{ subject: string, argv: string[], runs: number, compiled: boolean }> = []
  if (ensureBuilt()) subjects.push({ subject: 'FeedService, fresh process, compiled (dist/)', argv: ['--expose-gc', child, pathToFileURL(join(repoDir, 'dist/src/')).href], runs: RSS_RUNS, compiled: true })
  subjects.push({ subject: 'FeedService, fresh process, tsx', argv: ['--expose-gc', '--import=tsx', child, pathToFileURL(join(repoDir, 'src/')).href + '#ts'], runs: 1, compiled: false })
  for (const { subject, argv, runs, compiled } of subjects) {
    const results: RssChild[] = []
    for (let i = 0; i < runs; i++) {
      const r = spawnSync(process.execPath, argv, {
        env: { ...process.env, BENCH_SNAPSHOT_RSS_CHILD: dir, BENCH_SNAPSHOT_GEO: JSON.stringify(geoPaths) },
        stdio: ['ignore', 'pipe', 'inherit'],
        encoding: 'utf8',
      })
      if (r.status !== 0) throw new Error(`the RSS child (${subject}) exited with ${r.status}`)
      results.push(JSON.parse(r.stdout) as RssChild)
    }
    const med = (f: (c: RssChild) => number): number => median(results.map(f))
    const caseName = 'ten 131,072-entry lists + the workspace feed built'
    rows.push({
      case: caseName,
      subject,
      value: med((c) => c.built.rss),
      unit: 'MiB RSS',
      runs: results.map((c) => c.built.rss),
      extra: {
        anonMiB: med((c) => c.built.anon),
        fileMiB: med((c) => c.built.file),
        heapMiB: med((c) => c.built.heap),
        buffersMiB: med((c) => c.built.buffers),
        beforeServiceMiB: med((c) => c.beforeService),
        peakMiB: med((c) => c.peak),
        buildAllMs: med((c) => c.buildAllMs),
      },
    })
    rows.push({ case: `${caseName}, 10 s later`, subject, value: med((c) => c.rest.rss), unit: 'MiB RSS', runs: results.map((c) => c.rest.rss), extra: { anonMiB: med((c) => c.rest.anon), heapMiB: med((c) => c.rest.heap) } })
    rows.push({ case: `${caseName}, then every body read once`, subject, value: med((c) => c.readAll.rss), unit: 'MiB RSS', runs: results.map((c) => c.readAll.rss), extra: { anonMiB: med((c) => c.readAll.anon), buffersMiB: med((c) => c.readAll.buffers) } })
    const worst = Math.max(...results.map((c) => c.built.rss))
    // The budget is the compiled service's; under tsx the loader adds to every thread (for information).
    const budget = compiled ? { target: '≤ 1', pass: med((c) => c.built.rss) <= 400 } : {}
    ratios.push({ case: `RSS, ten lists (${subject})`, label: 'RSS MiB (median, 1 s after the builds) / 400 MiB budget', value: med((c) => c.built.rss) / 400, ...budget })
    if (compiled) ratios.push({ case: `RSS, ten lists (${subject})`, label: 'worst run / 400 MiB budget', value: worst / 400, target: '≤ 1', pass: worst <= 400 })
    ratios.push({ case: `RSS, ten lists (${subject})`, label: 'every body read once / 400 MiB budget', value: med((c) => c.readAll.rss) / 400 })
  }
}

/** Brings dist/ up to date (tsc is incremental); false when it did not produce the feed service. */
function ensureBuilt (): boolean {
  const r = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: repoDir, stdio: ['ignore', 'ignore', 'inherit'] })
  if (r.status !== 0) process.stderr.write('bench: tsc reported errors; measuring the emitted files anyway\n')
  return existsSync(join(repoDir, 'dist/src/feed/feed-service.js'))
}

/**
 * The RSS child: the server's feed side alone — store, geo, pool, FeedService — loaded from the
 * directory given as its argument (dist/src/ compiled, or src/ under tsx when it ends in `#ts`).
 * RSS is read from /proc/self/status (Linux) 300 ms after a full GC: V8 unmaps the pages a GC
 * freed on a background thread, and reading at once counted them (up to 60 MiB more).
 */
function writeRssChild (dir: string): string {
  const file = join(dir, 'rss-child.mjs')
  writeFileSync(file, `
import { readFileSync } from 'node:fs'
const [base, ts] = process.argv[2].split('#')
const load = (p) => import(new URL(ts === 'ts' ? p + '.ts' : p + '.js', base).href)
const { openEmbeddedStore } = await load('store/embedded/embedded-store')
const { loadGeoIndex } = await load('geo/load')
const { createPool } = await load('pool/pool')
const { FeedService } = await load('feed/feed-service')
const mib = (n) => Math.round(n / 2 ** 20)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
function status (key) {
  return Math.round(Number(new RegExp('^' + key + ':\\\\s+(\\\\d+) kB', 'm').exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? NaN) / 1024)
}
async function figures () {
  globalThis.gc()
  await sleep(300)
  const m = process.memoryUsage()
  return { rss: status('VmRSS'), anon: status('RssAnon'), file: status('RssFile'), heap: mib(m.heapTotal), buffers: mib(m.arrayBuffers) }
}
const store = await openEmbeddedStore(process.env.BENCH_SNAPSHOT_RSS_CHILD)
const geo = await loadGeoIndex(JSON.parse(process.env.BENCH_SNAPSHOT_GEO))
const pool = createPool({ workers: 2, taskTimeoutMs: 120000 })
const beforeService = (await figures()).rss
const service = new FeedService({ store, pool, config: { feedRebuildMs: 3600000, pollMs: 1000 }, log: { info () {}, warn () {}, error () {}, debug () {} }, geo })
const [workspace] = await store.workspaces.list()
const feedIds = ['*', ...(await store.lists.list()).map((l) => l.id)]
const t0 = performance.now()
await service.start()
// Feeds are built on their first request: ask for every one of them at once.
await Promise.all(feedIds.map((feedId) => service.awaitSnapshot(workspace.id, feedId)))
const buildAllMs = Math.round(performance.now() - t0)
await sleep(1000)
const built = await figures()
await sleep(10000)
const rest = await figures()
let bytes = 0
for (const feedId of feedIds) {
  const snapshot = service.getSnapshot(workspace.id, feedId)
  if (snapshot === null) throw new Error('feed ' + feedId + ' has no snapshot')
  for (const v of snapshot.variants.values()) bytes += v.identity.body.length + v.gzip.body.length
}
const readAll = await figures()
process.stdout.write(JSON.stringify({ beforeService, buildAllMs, built, rest, readAll, peak: status('VmHWM'), bytes }) + '\\n')
await service.stop()
await pool.destroy()
await store.close()
`)
  return file
}

await main()
