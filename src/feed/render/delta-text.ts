/**
 * Delta bodies and the `ipset` and `json` full bodies (docs/deltas.md). Pure: the networks in,
 * the bytes out, so every node writes the same bytes for the same two versions.
 *
 *   format    delta                                                full
 *   plain     `-NET` lines, then `+NET` lines                      (the plain variant)
 *   nftables  `delete element inet T S { … }` then `add element`   (the nftables variant)
 *   ipset     `del S NET -exist` lines, then `add S NET -exist`    create/flush a `S-new`, add, swap, destroy
 *   json      {"deleted":[…],"new":[…]}                            {"deleted":[],"new":[…]}
 *
 * Each list is in the feed's order (IPv4 first, then IPv6, each by address): the order of the
 * full bodies, so an applier that removes and then inserts in order keeps a sorted copy.
 */
import { formatCidr4, formatCidr6 } from '../../net/format.js'
import type { PublishedPrefixes, ShardRef } from '../snapshot-types.js'
import { shardOf } from './shard-networks.js'

export type DeltaFormat = 'plain' | 'nftables' | 'ipset' | 'json'

/** The names an nftables or ipset body writes: README's nftables example and ipset snippet by default. */
export interface SetNames {
  /** nftables table (family inet). */
  readonly table: string
  /** nftables set, or ipset set. */
  readonly set: string
}

/** Elements per nftables `add`/`delete element` command: one transaction however many, lines kept short. */
const NFT_BATCH = 1024
/** An ipset set of a full body holds at least this many elements (README's ipset snippet). */
const IPSET_MIN_MAXELEM = 262144

/** The default names for a family: `inet threatfeed` with `blocklist_v4`/`blocklist_v6`, ipset `threatfeed`. */
export function defaultNames (format: DeltaFormat, family: 'v4' | 'v6' | 'both'): SetNames {
  return { table: 'threatfeed', set: format === 'ipset' ? 'threatfeed' : `blocklist_${family === 'v6' ? 'v6' : 'v4'}` }
}

/**
 * The prefixes of one family (or both) and one shard of a set, in order.
 *
 * @example
 *   selectPrefixes(published.block.total, 'v4', { index: 2, of: 8 }) // shard 2 of 8's IPv4 networks
 */
export function selectPrefixes (p: PublishedPrefixes, family: 'v4' | 'v6' | 'both', shard: ShardRef | null | undefined): PublishedPrefixes {
  const v4 = family === 'v6' ? new Uint32Array(0) : p.v4
  const v6 = family === 'v4' ? new Uint32Array(0) : p.v6
  if (shard === null || shard === undefined) return { v4, v6 }
  return { v4: filterShard(v4, 4, shard), v6: filterShard(v6, 6, shard) }
}

function filterShard (a: Uint32Array, family: 4 | 6, shard: ShardRef): Uint32Array {
  const w = family === 4 ? 2 : 5
  const keep: number[] = []
  for (let k = 0; k < a.length; k += w) {
    if (shardOf(a, k, family, shard.of) === shard.index - 1) for (let i = 0; i < w; i++) keep.push(a[k + i]!)
  }
  return Uint32Array.from(keep)
}

export function countPrefixes (p: PublishedPrefixes): number {
  return (p.v4.length >> 1) + p.v6.length / 5
}

/** Every network of a set as text, in order. */
function cidrs (p: PublishedPrefixes): string[] {
  const out: string[] = []
  for (let k = 0; k < p.v4.length; k += 2) out.push(formatCidr4(p.v4[k]!, p.v4[k + 1]!))
  for (let k = 0; k < p.v6.length; k += 5) out.push(formatCidr6(p.v6, k, p.v6[k + 4]!))
  return out
}

function nftCommands (verb: 'delete' | 'add', names: SetNames, nets: string[]): string {
  let out = ''
  for (let i = 0; i < nets.length; i += NFT_BATCH) {
    out += `${verb} element inet ${names.table} ${names.set} { ${nets.slice(i, i + NFT_BATCH).join(', ')} }\n`
  }
  return out
}

function lines (prefix: string, nets: string[], suffix: string): string {
  let out = ''
  for (const n of nets) out += `${prefix}${n}${suffix}\n`
  return out
}

/**
 * The body of a delta: what turns the full body of the base version into that of the new one.
 *
 * @example
 *   renderDelta('plain', removed, added, names) // '-192.0.2.0/25\n-192.0.2.128/25\n+192.0.2.0/24\n'
 */
export function renderDelta (format: DeltaFormat, removed: PublishedPrefixes, added: PublishedPrefixes, names: SetNames): Buffer {
  const gone = cidrs(removed)
  const fresh = cidrs(added)
  switch (format) {
    case 'plain':
      return Buffer.from(lines('-', gone, '') + lines('+', fresh, ''))
    case 'nftables':
      return Buffer.from(nftCommands('delete', names, gone) + nftCommands('add', names, fresh))
    case 'ipset':
      return Buffer.from(lines(`del ${names.set} `, gone, ' -exist') + lines(`add ${names.set} `, fresh, ' -exist'))
    case 'json':
      return Buffer.from(JSON.stringify({ deleted: gone, new: fresh }))
  }
}

/**
 * The full body of an answer format: json is the delta from nothing; ipset fills a fresh set and
 * swaps it in (README's ipset snippet), so the set is never seen half loaded.
 *
 * @example
 *   renderFull('json', set, 'v4', names, 131072) // '{"deleted":[],"new":["192.0.2.0/24",…]}'
 */
export function renderFull (format: 'ipset' | 'json', set: PublishedPrefixes, family: 'v4' | 'v6' | 'both', names: SetNames, limit: number): Buffer {
  const nets = cidrs(set)
  if (format === 'json') return Buffer.from(JSON.stringify({ deleted: [], new: nets }))
  const create = `hash:net family ${family === 'v6' ? 'inet6' : 'inet'} maxelem ${Math.max(IPSET_MIN_MAXELEM, limit)} -exist`
  const fresh = `${names.set}-new`
  return Buffer.from(
    `create ${names.set} ${create}\ncreate ${fresh} ${create}\nflush ${fresh}\n` +
    lines(`add ${fresh} `, nets, '') +
    `swap ${fresh} ${names.set}\ndestroy ${fresh}\n`,
  )
}
