/**
 * Rule targets → the networks of a feed (SPEC 2.7, DECISIONS §5), off the event loop:
 *
 *   per group: ip CIDRs ∪ expand(ASNs) ∪ expand(countries)      → coalesced set
 *   deny  = each selected block group − every allow rule of the workspace (lossless carve)
 *   allow = each selected allow group
 *   total = ∪ groups                                            → PackedPrefixes, ordered
 *
 * plus one content hash per family and action over everything any dialect shows except the
 * `generated` time: the networks, the dialect_b groups and the header text. Last-Modified is keyed
 * on it (store.feedVersions), so it is the same whatever the format, node or restart.
 *
 * Pure apart from node:crypto; runs in a worker (workers/feed-worker.ts) or in-process (CLI).
 */
import { createHash, type Hash } from 'node:crypto'
import { INTERVAL_WORDS, scanCidr } from '../../net/cidr.js'
import { NetworkSet, NetworkSetBuilder } from '../../net/network-set.js'
import type { GeoIndex } from '../../geo/geo-index.js'
import type { ActionNetworks, ComputeResult, ComputeTask, GroupPrefixes, TargetGroup, WirePrefixes } from '../../pool/protocol.js'

const CH_NL = 0x0a

interface Counter { invalid: number }

/** The coalesced networks of one group's targets. */
function buildGroupSet (g: TargetGroup, geo: GeoIndex | null, counter: Counter): NetworkSet {
  const s = g.ips
  const b = new NetworkSetBuilder(s.length / 12, 64)
  const interval = new Uint32Array(INTERVAL_WORDS)
  let i = 0
  while (i < s.length) {
    let j = i
    while (j < s.length && s.charCodeAt(j) !== CH_NL) j++
    if (j > i) {
      const family = scanCidr(s, i, j, interval)
      if (family === 0) counter.invalid++
      else b.addScanned(family, interval)
    }
    i = j + 1
  }
  const ips = b.build()
  if (geo === null) {
    counter.invalid += g.asns.length + g.countries.length
    return ips
  }
  if (g.asns.length === 0 && g.countries.length === 0) return ips
  // The index keeps each key's networks as sorted intervals, so merging them there and taking one
  // union is ~20× cheaper than feeding every expanded prefix back through the builder's sort.
  return ips.union(geo.expandToSet({ countries: g.countries, asns: g.asns }))
}

function unionAll (sets: NetworkSet[]): NetworkSet {
  if (sets.length === 0) return NetworkSet.empty()
  let total = sets[0]!
  for (let k = 1; k < sets.length; k++) total = total.union(sets[k]!)
  return total
}

function bytesOf (a: Uint32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
}

function hashFamily (meta: string, total: WirePrefixes, groups: GroupPrefixes[], family: 'v4' | 'v6'): string {
  const h: Hash = createHash('sha256')
  h.update(meta).update(`\0${family}\0`)
  h.update(bytesOf(total[family]))
  for (const g of groups) h.update(`\0${g.confidence}\0${g.severity}\0`).update(bytesOf(g[family]))
  return h.digest('base64url')
}

function toAction (sets: NetworkSet[], groups: TargetGroup[], meta: string): ActionNetworks {
  const totalSet = unionAll(sets)
  const total: WirePrefixes = totalSet.prefixes()
  const out: GroupPrefixes[] = sets.length === 1
    ? [{ confidence: groups[0]!.confidence, severity: groups[0]!.severity, v4: total.v4, v6: total.v6 }]
    : sets.map((s, k) => ({ confidence: groups[k]!.confidence, severity: groups[k]!.severity, ...s.prefixes() }))
  const v4 = hashFamily(meta, total, out, 'v4')
  const v6 = hashFamily(meta, total, out, 'v6')
  const both = createHash('sha256').update(v4).update('\0').update(v6).digest('base64url')
  return { total, groups: out, hash: { v4, v6, both } }
}

/**
 * @example
 *   computeNetworks({ geo: { version: 0 }, block: [{ confidence: 'high', severity: 'high', ips: '10.0.0.0/24\n', asns: [], countries: [] }],
 *     allow: [], carve: { confidence: 'high', severity: 'high', ips: '10.0.0.128/25\n', asns: [], countries: [] }, meta: '' }, null)
 *   // block.total.v4 = [0x0a000000, 25]
 */
export function computeNetworks (task: ComputeTask, geo: GeoIndex | null): ComputeResult {
  const counter: Counter = { invalid: 0 }
  const carve = buildGroupSet(task.carve, geo, counter)
  let blockSets = task.block.map((g) => buildGroupSet(g, geo, counter))
  if (!carve.isEmpty()) blockSets = blockSets.map((s) => s.subtract(carve))
  const allowSets = task.allow.map((g) => buildGroupSet(g, geo, counter))
  return {
    block: toAction(blockSets, task.block, task.meta),
    allow: toAction(allowSets, task.allow, task.meta),
    invalid: counter.invalid,
  }
}

/** True when any group of the task names an ASN or a country (the task then needs the geo index). */
export function needsGeo (task: ComputeTask): boolean {
  const uses = (g: TargetGroup): boolean => g.asns.length > 0 || g.countries.length > 0
  return uses(task.carve) || task.block.some(uses) || task.allow.some(uses)
}

/** Every buffer of a result, for the transfer list. */
export function computeBuffers (r: ComputeResult): ArrayBufferLike[] {
  const out: ArrayBufferLike[] = []
  for (const a of [r.block, r.allow]) {
    out.push(a.total.v4.buffer, a.total.v6.buffer)
    for (const g of a.groups) out.push(g.v4.buffer, g.v6.buffer)
  }
  return out
}
