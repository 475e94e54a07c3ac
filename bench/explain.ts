/**
 * Explain on a 131,072-entry feed: ~100,000 random IPs (a tenth in a second dialect_b group, a few
 * hundred allows carving), 20 countries and 50 ASNs expanded with the registry databases that
 * bench/snapshot uses (DB-IP Lite country; ASN built from @ip-location-db/asn, cached in the tmpdir).
 *
 * Cases, each over the same 20,000 addresses (a third published IPs, a third inside the countries
 * and ASNs, a third random):
 * - lookup of one (feed, action) across its formats — snapshot.published, the index the workers
 *   computed: `total` (plain, dialect_a, nftables) and every dialect_b group. Target ≤ 1 ms each.
 *   Raced against the anchor a first version would write: a scan of the same arrays per request;
 * - the whole explanation of the workspace feed (both actions), per family: the store's target
 *   index (LMDB: the address's 25 covering networks for IPv4, 117 for IPv6, its country and ASN,
 *   and their tombstones), the mmdb-lib point lookups, the rules' fields and reasons.
 * Each reports lookups per second, p50/p99 of single calls, process CPU per lookup and the
 * machine's steal while it ran (the cores are shared: quote CPU, not wall time alone).
 *
 * Environment: BENCH_EXPLAIN_ADDRESSES (default 20000).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { cpuTicks, percentile, report, stealPercent, type Ratio, type Row } from './lib/report.js'
import { buildSnapshot } from '../src/feed/build-snapshot.js'
import { explainAddress, type ExplainSources } from '../src/feed/explain.js'
import { lookupPublished, parseExplainAddress, type ExplainAddress } from '../src/feed/explain-lookup.js'
import { inProcessTasks } from '../src/feed/in-process-tasks.js'
import { LastModifiedKeeper } from '../src/feed/last-modified.js'
import { toRuleTable } from '../src/feed/rule-table.js'
import type { FeedSnapshot, PublishedNetworks } from '../src/feed/snapshot-types.js'
import { ensureDefaultGeo } from '../src/geo/default-db.js'
import type { GeoIndex } from '../src/geo/geo-index.js'
import { loadGeoIndex } from '../src/geo/load.js'
import { GeoLookup } from '../src/geo/lookup.js'
import { formatIpv4, formatIpv6 } from '../src/net/ip.js'
import { lastV4 } from '../src/net/cidr.js'
import { NetworkSetBuilder } from '../src/net/network-set.js'
import { openEmbeddedStore } from '../src/store/embedded/embedded-store.js'
import type { AccessRuleInput } from '../src/store/types.js'
import { makeRandom, window } from './lib/random.js'

const ADDRESSES = Number(process.env.BENCH_EXPLAIN_ADDRESSES ?? 20_000)
const TARGET_ENTRIES = 131_072
const IPS = 100_000

function chooseTargets (geo: GeoIndex): { countries: string[], asns: number[], ips: number[] } {
  const prefixes = (p: { v4: Uint32Array, v6: Uint32Array }): number => p.v4.length / 2 + p.v6.length / 5
  const countries = window(geo.countries(), (c) => prefixes(geo.expandCountry(c)), 20, 14_000)
  const asns = window(geo.asns().filter((a) => prefixes(geo.expandAsn(a)) > 0), (a) => prefixes(geo.expandAsn(a)), 50, 17_000)
  const rnd = makeRandom(0x5eed)
  const pool = Array.from({ length: IPS + 20_000 }, () => rnd())
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
  return { countries, asns, ips: pool.slice(0, lo) }
}

/** The anchor: the same answer by scanning every array of the action, as a per-request scan would. */
function scanPublished (n: PublishedNetworks, a: ExplainAddress): number {
  let hits = 0
  for (const p of [n.total, ...n.groups]) {
    if (a.family === 'v4') {
      const l = p.v4
      for (let k = 0; k < l.length; k += 2) if (l[k]! <= a.v4 && a.v4 <= lastV4(l[k]!, l[k + 1]!)) { hits++; break }
    } else {
      const l = p.v6
      for (let k = 0; k < l.length; k += 5) {
        const len = l[k + 4]!
        let inside = true
        for (let w = 0; w < 4 && inside; w++) {
          const bits = Math.max(0, Math.min(32, len - 32 * w))
          const mask = bits === 0 ? 0 : bits === 32 ? 0xffffffff : (0xffffffff << (32 - bits)) >>> 0
          inside = ((a.v6[w]! & mask) >>> 0) === l[k + w]!
        }
        if (inside) { hits++; break }
      }
    }
  }
  return hits
}

/** Addresses: a third published IPs, a third inside geo networks of the feed, a third random. */
function sampleAddresses (ips: number[], snapshot: FeedSnapshot): ExplainAddress[] {
  const rnd = makeRandom(0xfeed)
  const total = snapshot.published.block.total
  const out: ExplainAddress[] = []
  for (let i = 0; i < ADDRESSES; i++) {
    const kind = i % 3
    if (kind === 0) {
      out.push(parseExplainAddress(formatIpv4(ips[rnd() % ips.length]!)))
    } else if (kind === 1 && total.v6.length > 0 && i % 2 === 0) {
      const k = (rnd() % (total.v6.length / 5)) * 5
      const w = Uint32Array.from(total.v6.subarray(k, k + 4))
      w[3] = (w[3]! | (rnd() & 0xff)) >>> 0
      out.push(parseExplainAddress(formatIpv6(w)))
    } else if (kind === 1) {
      const k = (rnd() % (total.v4.length / 2)) * 2
      const first = total.v4[k]!
      const span = lastV4(first, total.v4[k + 1]!) - first
      out.push(parseExplainAddress(formatIpv4((first + (span === 0 ? 0 : rnd() % span)) >>> 0)))
    } else {
      out.push(parseExplainAddress(formatIpv4(rnd())))
    }
  }
  return out
}

interface Measured { perSecond: number, p50: number, p99: number, cpuUs: number, steal: number | null, ms: number[] }

async function measure (addresses: ExplainAddress[], fn: (a: ExplainAddress) => unknown): Promise<Measured> {
  for (const a of addresses.slice(0, 500)) await fn(a) // warm-up: JIT, caches
  const single: number[] = new Array(addresses.length)
  const ticks = cpuTicks()
  const cpu = process.cpuUsage()
  const started = performance.now()
  for (let i = 0; i < addresses.length; i++) {
    const t0 = performance.now()
    await fn(addresses[i]!)
    single[i] = performance.now() - t0
  }
  const wall = performance.now() - started
  const used = process.cpuUsage(cpu)
  return {
    perSecond: addresses.length / (wall / 1000),
    p50: percentile(single, 50),
    p99: percentile(single, 99),
    cpuUs: (used.user + used.system) / addresses.length,
    steal: stealPercent(ticks, cpuTicks()),
    ms: single,
  }
}

function row (c: string, subject: string, m: Measured): Row {
  return { case: c, subject, value: m.perSecond, unit: 'lookups/s', extra: { p50_ms: m.p50, p99_ms: m.p99, cpu_us_per_lookup: m.cpuUs, steal_pct: m.steal ?? 'n/a' } }
}

async function main (): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-bench-explain-'))
  try {
    process.stderr.write('bench: geo databases (DB-IP Lite country; ASN built from @ip-location-db/asn, cached)\n')
    const paths = await ensureDefaultGeo(join(tmpdir(), 'threatfeed-bench-geo'))
    const geo = await loadGeoIndex(paths)
    const { countries, asns, ips } = chooseTargets(geo)
    const store = await openEmbeddedStore(dir)
    const ws = await store.workspaces.create({ name: 'bench', subscription: 'active' })
    let seq = 1
    const input = (type: 'ip' | 'asn' | 'country', value: string, i: number): AccessRuleInput => ({
      workspaceId: ws.id, kind: 'access_rule', ruleRef: null, reason: null, expiresAt: null, seq: seq++, target: { type, value }, name: null, severity: null,
      // A tenth in a second dialect_b group; one in 400 an allow, carved out of the deny feed.
      action: i % 400 === 399 ? 'allow' : 'block', confidence: i % 10 === 9 ? 'medium' : null, labels: {},
    })
    const inputs = [
      ...countries.map((c, i) => input('country', c, i)),
      ...asns.map((a, i) => input('asn', `AS${a}`, i)),
      ...ips.map((ip, i) => input('ip', `${formatIpv4(ip)}/32`, i)),
    ]
    for (let i = 0; i < inputs.length; i += 10_000) {
      await store.applyRuleBatch({ ops: inputs.slice(i, i + 10_000).map((r) => ({ op: 'upsertAccessRule' as const, input: r })) })
    }
    const now = Date.now()
    const table = toRuleTable(await store.rules.listAccessRules(ws.id, now))
    const { snapshot } = await buildSnapshot({ workspaceId: ws.id, workspaceName: ws.name, list: null }, table, {
      tasks: inProcessTasks(geo), lastModified: new LastModifiedKeeper(store.feedVersions, { timeoutMs: 5000 }), now,
    })
    const entries = snapshot.variants.get('plain|both|block|')!.entries
    const groups = snapshot.published.block.groups.length
    process.stderr.write(`bench: ${inputs.length} rules → ${entries} entries (plain, both, block), ${groups} dialect_b groups\n`)
    const addresses = sampleAddresses(ips, snapshot)
    const block = snapshot.published.block

    let published = 0
    const index = await measure(addresses, (a) => { if (lookupPublished(block, a).network !== null) published++ })
    const scan = await measure(addresses.slice(0, Math.min(addresses.length, 2000)), (a) => scanPublished(block, a))
    const sources: ExplainSources = { rules: store.rules, geo: { index: geo, lookup: GeoLookup.open(paths) }, snapshotOf: async () => snapshot }
    // An IPv6 address has 117 covering networks (/12 to /128) to read rules and tombstones of, IPv4 25.
    const wholeV4 = await measure(addresses.filter((a) => a.family === 'v4'), (a) => explainAddress(sources, ws, [null], a, now))
    const wholeV6 = await measure(addresses.filter((a) => a.family === 'v6'), (a) => explainAddress(sources, ws, [null], a, now))

    const heldBytes = new Set([block.total.v4, block.total.v6, ...block.groups.flatMap((g) => [g.v4, g.v6])])
    const bytes = [...heldBytes].reduce((s, a) => s + a.byteLength, 0)
    const c1 = `lookup of one (feed, action) across its formats, ${entries}-entry feed`
    const c2 = 'whole explanation of the workspace feed (both actions), LMDB'
    const rows: Row[] = [
      row(c1, 'snapshot.published (binary search)', index),
      row(c1, 'anchor: scan of the same arrays per request', scan),
      row(c2, 'explainAddress, IPv4 addresses', wholeV4),
      row(c2, 'explainAddress, IPv6 addresses', wholeV6),
    ]
    const ratios: Ratio[] = [
      { case: c1, label: 'p99 of one lookup (ms)', value: index.p99, target: '≤ 1 ms', pass: index.p99 <= 1 },
      { case: c1, label: 'scan / index CPU per lookup', value: scan.cpuUs / index.cpuUs },
    ]
    report('explain', `Explain on a ${entries}-entry feed with ${countries.length} countries and ${asns.length} ASNs`, rows, ratios, {
      rules: inputs.length, entries, groups, addresses: addresses.length, publishedShare: published / addresses.length, indexBytesHeld: bytes,
    })
    await store.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
