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
import { INTERVAL_WORDS, lastV4, maskV4, scanCidr } from '../../net/cidr.js'
import { readIpv4, readPrefixLength } from '../../net/ip.js'
import { NetworkSet, NetworkSetBuilder } from '../../net/network-set.js'
import type { GeoIndex } from '../../geo/geo-index.js'
import type { ActionNetworks, ComputeResult, ComputeTask, GroupPrefixes, TargetGroup, WirePrefixes } from '../../pool/protocol.js'
import { shardNetworks } from './shard-networks.js'
import { specialSpace } from './special-ranges.js'
import { lapsesOf } from './lapses.js'

const CH_NL = 0x0a

const NON_ASCII = 0x80
const encoder = new TextEncoder()

/**
 * A group's targets as bytes, one per char (non-ASCII as 0x80, which nothing accepts), so that
 * offsets stay string offsets for scanCidr. Reused: a worker computes one task at a time. A plain
 * Uint8Array, like every other array net's readIpv4 reads in a worker, so its reads stay monomorphic.
 */
let targetBytes = new Uint8Array(1 << 16)

function bytesOfTargets (s: string): Uint8Array {
  const n = s.length
  if (targetBytes.length < n) targetBytes = new Uint8Array(Math.max(n, 2 * targetBytes.length))
  // One native pass, exact for ASCII (the targets of a sound store); anything else char by char.
  const { read, written } = encoder.encodeInto(s, targetBytes)
  if (read !== n || written !== n) {
    for (let k = 0; k < n; k++) {
      const c = s.charCodeAt(k)
      targetBytes[k] = c < NON_ASCII ? c : NON_ASCII
    }
  }
  return targetBytes
}

/** Targets given as bytes, in the reused plain array (see bytesOfTargets). */
function plainBytes (src: Uint8Array): Uint8Array {
  if (targetBytes.length < src.length) targetBytes = new Uint8Array(Math.max(src.length, 2 * targetBytes.length))
  targetBytes.set(src)
  return targetBytes
}

/** One line of the bytes as a string, for scanCidr (IPv6 and anything odd: the rare path). */
function latin1 (bytes: Uint8Array, from: number, to: number): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset + from, to - from).toString('latin1')
}

interface Counter { invalid: number }

/** The coalesced networks of one group's targets. */
function buildGroupSet (g: TargetGroup, geo: GeoIndex | null, counter: Counter): NetworkSet {
  const s = g.ips
  const b = new NetworkSetBuilder(s.length / 12, 64)
  const interval = new Uint32Array(INTERVAL_WORDS)
  const v4 = new Uint32Array(2)
  // Bytes (the feed service's shared text) are read in place, copied once into the reused
  // plain array only when they are shared memory, so readIpv4's reads stay monomorphic.
  const bytes = typeof s === 'string' ? bytesOfTargets(s) : plainBytes(s)
  const n = s.length
  let i = 0
  while (i < n) {
    // The common target, a canonical IPv4 address or CIDR on its own line, in one pass (bench/NOTES.md);
    // anything else (IPv6, a stray character) goes to scanCidr, which accepts the same and more.
    let end = readIpv4(bytes, i, n, v4)
    if (end >= 0) end = readPrefixLength(bytes, end, n, 32, v4)
    if (end >= 0 && (end === n || bytes[end] === CH_NL)) {
      const len = v4[1]!
      b.addRangeV4((v4[0]! & maskV4(len)) >>> 0, lastV4(v4[0]!, len))
      i = end + 1
      continue
    }
    let j = bytes.indexOf(CH_NL, i)
    if (j < 0 || j > n) j = n
    if (j > i) {
      const family = typeof s === 'string' ? scanCidr(s, i, j, interval) : scanCidr(latin1(bytes, i, j), 0, j - i, interval)
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
  return ips.union(expandGeo(geo, g.countries, g.asns))
}

/** Expansions kept per geo index (a new index, a new table): the last few sets of keys. */
const expansions = new WeakMap<GeoIndex, Map<string, NetworkSet>>()
const EXPANSIONS_KEPT = 8

/**
 * The networks of some countries and ASNs, merged from the index's sorted intervals and kept for
 * the next build, as geo rules change far less often than IPs (bench/NOTES.md, "Feeds: geo
 * expansion"). A NetworkSet is immutable, so sharing one is safe.
 */
function expandGeo (geo: GeoIndex, countries: readonly string[], asns: readonly number[]): NetworkSet {
  let kept = expansions.get(geo)
  if (kept === undefined) {
    kept = new Map()
    expansions.set(geo, kept)
  }
  const key = JSON.stringify([[...new Set(countries)].sort(), [...new Set(asns)].sort((a, b) => a - b)])
  let set = kept.get(key)
  if (set !== undefined) {
    // Most recently used last: Map keeps insertion order.
    kept.delete(key)
  } else {
    set = geo.expandToSet({ countries, asns })
    if (kept.size >= EXPANSIONS_KEPT) kept.delete(kept.keys().next().value!)
  }
  kept.set(key, set)
  return set
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

function bytesOf64 (a: Float64Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
}

function hashFamily (meta: string, total: WirePrefixes, groups: GroupPrefixes[], family: 'v4' | 'v6'): string {
  const h: Hash = createHash('sha256')
  h.update(meta).update(`\0${family}\0`)
  h.update(bytesOf(total[family]))
  for (const g of groups) h.update(`\0${g.confidence}\0${g.severity}\0`).update(bytesOf(g[family]))
  return h.digest('base64url')
}

function hashAction (total: WirePrefixes, groups: GroupPrefixes[], meta: string): ActionNetworks['hash'] {
  const v4 = hashFamily(meta, total, groups, 'v4')
  const v6 = hashFamily(meta, total, groups, 'v6')
  const both = createHash('sha256').update(v4).update('\0').update(v6).digest('base64url')
  return { v4, v6, both }
}

function toAction (sets: NetworkSet[], groups: TargetGroup[], meta: string): ActionNetworks {
  const totalSet = unionAll(sets)
  const total: WirePrefixes = totalSet.prefixes()
  const out: GroupPrefixes[] = sets.length === 1
    ? [{ confidence: groups[0]!.confidence, severity: groups[0]!.severity, v4: total.v4, v6: total.v6 }]
    : sets.map((s, k) => ({ confidence: groups[k]!.confidence, severity: groups[k]!.severity, ...s.prefixes() }))
  return { total, groups: out, hash: hashAction(total, out, meta) }
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
  let allowSets = task.allow.map((g) => buildGroupSet(g, geo, counter))
  let special: ComputeResult['special']
  if (task.special !== undefined) {
    const block = specialOf(blockSets, task.special === 'drop')
    const allow = specialOf(allowSets, task.special === 'drop')
    blockSets = block.sets
    allowSets = allow.sets
    special = { block: block.count, allow: allow.count }
  }
  const result: ComputeResult = {
    block: withShards(toAction(blockSets, task.block, task.meta), task.shards, task.meta),
    allow: withShards(toAction(allowSets, task.allow, task.meta), task.shards, task.meta),
    invalid: counter.invalid,
  }
  if (special !== undefined) result.special = special
  if (task.lapses !== undefined) {
    result.block.lapse = lapsesOf(result.block.total, task.lapses.block, geo)
    result.allow.lapse = lapsesOf(result.allow.total, task.lapses.allow, geo)
  }
  return result
}

/**
 * The networks of the special space in some groups (counted as the prefixes of their union with
 * it), and the groups without them when `drop`: a lossless carve, like the allow rules'.
 */
function specialOf (sets: NetworkSet[], drop: boolean): { sets: NetworkSet[], count: number } {
  const space = specialSpace()
  const kept = sets.map((s) => s.subtract(space))
  const found = unionAll(sets).subtract(unionAll(kept))
  return { sets: drop ? kept : sets, count: found.count() }
}

/** The action's networks with its shards for each N asked for (shard-networks.ts). */
function withShards (n: ActionNetworks, shards: readonly number[] | undefined, meta: string): ActionNetworks {
  if (shards === undefined || shards.length === 0) return n
  return { ...n, shards: shards.map((of) => ({ of, parts: shardNetworks(n, of, (total, groups) => hashAction(total, groups, meta)) })) }
}

/**
 * A digest of everything a task's networks depend on but `meta` and the geo index (which the
 * caller tells apart): lists that select the same rules — one list per appliance, differing in
 * their default format or family — give the same key, and one computation serves them all.
 */
export function networksKey (task: ComputeTask): string {
  const h = createHash('sha256')
  const group = (g: TargetGroup): void => {
    h.update(JSON.stringify([g.confidence, g.severity, g.countries, g.asns, g.ips.length])).update(g.ips)
  }
  for (const [name, groups] of [['block', task.block], ['allow', task.allow], ['carve', [task.carve]]] as const) {
    h.update(`${name}\0${groups.length}\0`)
    for (const g of groups) group(g)
  }
  h.update(`shards\0${(task.shards ?? []).join(',')}\0special\0${task.special ?? ''}`)
  // Rules of other expiries make the same networks with other lapses.
  for (const lt of task.lapses === undefined ? [] : [task.lapses.block, task.lapses.allow]) {
    h.update(`lapses\0${lt.ips.length}\0`).update(lt.ips).update(bytesOf64(lt.ipExpiry))
    h.update(JSON.stringify([lt.asns, lt.asnExpiry, lt.countries, lt.countryExpiry]))
  }
  return h.digest('base64url')
}

/** The same networks under another `meta`: only the content hashes change (they cover it). */
export function withMeta (r: ComputeResult, meta: string): ComputeResult {
  const action = (n: ActionNetworks): ActionNetworks => {
    const out: ActionNetworks = { ...n, hash: hashAction(n.total, n.groups, meta) }
    if (n.shards !== undefined) out.shards = n.shards.map(({ of, parts }) => ({ of, parts: parts.map(action) }))
    return out
  }
  return { ...r, block: action(r.block), allow: action(r.allow) }
}

/** True when any group of the task names an ASN or a country (the task then needs the geo index). */
export function needsGeo (task: ComputeTask): boolean {
  const uses = (g: TargetGroup): boolean => g.asns.length > 0 || g.countries.length > 0
  return uses(task.carve) || task.block.some(uses) || task.allow.some(uses)
}

/**
 * The result with its prefix arrays in shared memory. A worker answers with it because every
 * render task of the build is sent these arrays again: shared, they cross for nothing, where six
 * clones of ~1 MB (131,072 networks) cost the main thread 2–8 ms per build. One copy here, off
 * the event loop; arrays used twice (one group's are the total's) stay one.
 */
export function shareResult (r: ComputeResult): ComputeResult {
  const copies = new Map<Uint32Array, Uint32Array>()
  const share = (a: Uint32Array): Uint32Array => {
    let c = copies.get(a)
    if (c === undefined) {
      c = new Uint32Array(new SharedArrayBuffer(a.byteLength))
      c.set(a)
      copies.set(a, c)
    }
    return c
  }
  const action = (n: ActionNetworks): ActionNetworks => {
    const out: ActionNetworks = {
      total: { v4: share(n.total.v4), v6: share(n.total.v6) },
      groups: n.groups.map((g) => ({ ...g, v4: share(g.v4), v6: share(g.v6) })),
      hash: n.hash,
    }
    if (n.shards !== undefined) out.shards = n.shards.map(({ of, parts }) => ({ of, parts: parts.map(action) }))
    if (n.lapse !== undefined) {
      const lapse = new Float64Array(new SharedArrayBuffer(n.lapse.byteLength))
      lapse.set(n.lapse)
      out.lapse = lapse
    }
    return out
  }
  return { ...r, block: action(r.block), allow: action(r.allow) }
}
