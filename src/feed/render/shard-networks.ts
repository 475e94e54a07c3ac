/**
 * Shards of a feed (`?shard=I&of=N`, README "Shards"): a partition of a variant's networks into N
 * feeds, each small enough for an appliance's table, by rendezvous hashing of the network
 * (Thaler & Ravishankar, "Using name-based mappings to increase hit rates", IEEE/ACM ToN 1998):
 * a network goes to the shard j that maximises score(network, j). The score depends on the network
 * and j alone, so a network stays in its shard for as long as it exists, whatever else changes,
 * and going from N to N+1 shards moves only the networks whose new score wins (about 1/(N+1)).
 *
 * Shards partition the coalesced networks (what the feed publishes), never the rule targets: the
 * union of a variant's shards is its body's networks, each once. dialect_b's groups are
 * partitioned with the same function, so a network's row sits in the shard of its network.
 *
 * Pure; runs in a worker with the compute task (compute-networks.ts).
 */
import type { ActionNetworks, GroupPrefixes, WirePrefixes } from '../../pool/protocol.js'
import { mix32 } from './mix32.js'

/** Most shards a request may ask for (issue 21: 1 ≤ I ≤ N ≤ 64). */
export const MAX_SHARDS = 64

const GOLDEN = 0x9e3779b9

/** The shard (0-based) of a network whose identity hash is `h`: the highest score wins, ties to the lower j. */
function pick (h: number, n: number): number {
  let best = 0
  let top = -1
  for (let j = 0; j < n; j++) {
    const score = mix32((h ^ Math.imul(j + 1, GOLDEN)) >>> 0)
    if (score > top) {
      top = score
      best = j
    }
  }
  return best
}

function hashV4 (addr: number, len: number): number {
  return mix32((mix32(addr) ^ Math.imul(len + 1, 0x27d4eb2d)) >>> 0)
}

function hashV6 (a: Uint32Array, k: number): number {
  let h = mix32(a[k]! ^ 0x6a09e667)
  h = mix32((h ^ a[k + 1]!) >>> 0)
  h = mix32((h ^ a[k + 2]!) >>> 0)
  h = mix32((h ^ a[k + 3]!) >>> 0)
  return mix32((h ^ Math.imul(a[k + 4]! + 1, 0x27d4eb2d)) >>> 0)
}

/**
 * The 0-based shard of the network at word `k` of a packed array.
 *
 * @example
 *   shardOf(new Uint32Array([0xc0000201, 32]), 0, 4, 8) // the same number on every node and run
 */
export function shardOf (a: Uint32Array, k: number, family: 4 | 6, n: number): number {
  if (n <= 1) return 0
  return pick(family === 4 ? hashV4(a[k]!, a[k + 1]!) : hashV6(a, k), n)
}

/** The packed arrays of each shard, keeping order (the arrays are sorted, so every part is). */
function split (a: Uint32Array, family: 4 | 6, n: number): Uint32Array[] {
  const words = family === 4 ? 2 : 5
  const count = a.length / words
  const of = new Uint8Array(count)
  const sizes = new Uint32Array(n)
  for (let i = 0; i < count; i++) {
    const s = shardOf(a, i * words, family, n)
    of[i] = s
    sizes[s]!++
  }
  const parts = Array.from(sizes, (size) => new Uint32Array(size * words))
  const fill = new Uint32Array(n)
  for (let i = 0; i < count; i++) {
    const s = of[i]!
    parts[s]!.set(a.subarray(i * words, i * words + words), fill[s]! * words)
    fill[s]!++
  }
  return parts
}

function splitPrefixes (p: WirePrefixes, n: number): WirePrefixes[] {
  const v4 = split(p.v4, 4, n)
  const v6 = split(p.v6, 6, n)
  return v4.map((a, s) => ({ v4: a, v6: v6[s]! }))
}

/**
 * A feed action's networks as N shards, each with its own content hash (by `hash`, the function
 * that hashes unsharded networks), so each has its own Last-Modified.
 *
 * @example
 *   shardNetworks(networks.block, 8, (total, groups) => hashAction(total, groups, meta)).length // 8
 */
export function shardNetworks (networks: ActionNetworks, n: number, hash: (total: WirePrefixes, groups: GroupPrefixes[]) => ActionNetworks['hash']): ActionNetworks[] {
  const totals = splitPrefixes(networks.total, n)
  // One group: its arrays are the total's (protocol.ts ActionNetworks.groups), and stay so per shard.
  const groups = networks.groups.length === 1 && networks.groups[0]!.v4 === networks.total.v4 && networks.groups[0]!.v6 === networks.total.v6
    ? totals.map((t) => [{ confidence: networks.groups[0]!.confidence, severity: networks.groups[0]!.severity, ...t }])
    : transpose(networks.groups.map((g) => splitPrefixes(g, n).map((p) => ({ confidence: g.confidence, severity: g.severity, ...p }))), n)
  return totals.map((total, s) => ({ total, groups: groups[s]!, hash: hash(total, groups[s]!) }))
}

function transpose (perGroup: GroupPrefixes[][], n: number): GroupPrefixes[][] {
  return Array.from({ length: n }, (_, s) => perGroup.map((parts) => parts[s]!))
}
