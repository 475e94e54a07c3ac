/**
 * The per-request half of explain: one address against a snapshot's published networks
 * (snapshot-types.ts PublishedNetworks). Each array is sorted by first address and disjoint, so
 * the network holding an address is the last one starting at or before it — one binary search
 * per array, O(log n) with no allocation but the answer's strings: on a 131,072-entry feed,
 * 17 steps per array (bench/explain.ts).
 */
import { ThreatfeedError } from '../errors.js'
import { formatIpv4, formatIpv6, isIpv4Mapped, parseIpv4, parseIpv6 } from '../net/ip.js'
import { lastV4, lastV6, maskV4, maskV6 } from '../net/cidr.js'
import type { PublishedNetworks, PublishedPrefixes } from './snapshot-types.js'

/** One address to explain, parsed once. */
export interface ExplainAddress {
  /** Canonical text: IPv4 dotted quad, IPv6 in RFC 5952 form (IPv4-mapped IPv6 becomes IPv4). */
  readonly text: string
  readonly family: 'v4' | 'v6'
  /** The IPv4 address as a u32 (v4), else 0. */
  readonly v4: number
  /** The IPv6 address as four u32 words (v6), else zeros. */
  readonly v6: Uint32Array
}

/** Longer than any spelling of an IPv6 address (45 characters with an embedded IPv4 part). */
const MAX_ADDRESS_LENGTH = 64

function bad (message: string, value: string): ThreatfeedError {
  const shown = value.length > MAX_ADDRESS_LENGTH ? value.slice(0, MAX_ADDRESS_LENGTH) + '…' : value
  return new ThreatfeedError('TF_ERR_INVALID_ARGUMENT', [message], { details: { parameter: 'ip', value: shown } })
}

/**
 * Parses the address to explain, with the ingest path's strictness (src/net/ip.ts): no leading
 * zeros, no zone id, no networks. Throws TF_ERR_INVALID_ARGUMENT (400) with a message naming what
 * is wrong.
 *
 * @example
 *   parseExplainAddress('::ffff:203.0.113.7') // { text: '203.0.113.7', family: 'v4', … }
 */
export function parseExplainAddress (raw: string): ExplainAddress {
  if (raw === '') throw bad('ip: an address is required (?ip=ADDR)', raw)
  if (raw.length > MAX_ADDRESS_LENGTH) throw bad(`ip: longer than ${MAX_ADDRESS_LENGTH} characters, not an IP address`, raw)
  if (raw.includes('/')) throw bad(`ip: ${JSON.stringify(raw)} is a network; give one address`, raw)
  if (raw.includes('%')) throw bad(`ip: ${JSON.stringify(raw)} has a zone id; give the address without it`, raw)
  const v4 = parseIpv4(raw)
  if (v4 >= 0) return { text: formatIpv4(v4), family: 'v4', v4, v6: new Uint32Array(4) }
  const w = new Uint32Array(4)
  if (!parseIpv6(raw, w)) throw bad(`ip: ${JSON.stringify(raw)} is not an IPv4 or IPv6 address`, raw)
  if (isIpv4Mapped(w)) return { text: formatIpv4(w[3]!), family: 'v4', v4: w[3]!, v6: new Uint32Array(4) }
  return { text: formatIpv6(w), family: 'v6', v4: 0, v6: w }
}

/** Index (in prefixes) of the v4 prefix holding `addr`, or -1. */
export function findV4 (list: Uint32Array, addr: number): number {
  let lo = 0
  let hi = (list.length >>> 1) - 1
  let at = -1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    if (list[mid * 2]! <= addr) {
      at = mid
      lo = mid + 1
    } else {
      hi = mid - 1
    }
  }
  return at >= 0 && addr <= lastV4(list[at * 2]!, list[at * 2 + 1]!) ? at : -1
}

function compareV6 (list: Uint32Array, o: number, w: Uint32Array): number {
  for (let k = 0; k < 4; k++) {
    const a = list[o + k]!
    const b = w[k]!
    if (a !== b) return a < b ? -1 : 1
  }
  return 0
}

/** Index (in prefixes) of the v6 prefix holding `w`, or -1. */
export function findV6 (list: Uint32Array, w: Uint32Array): number {
  let lo = 0
  let hi = list.length / 5 - 1
  let at = -1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    if (compareV6(list, mid * 5, w) <= 0) {
      at = mid
      lo = mid + 1
    } else {
      hi = mid - 1
    }
  }
  if (at < 0) return -1
  const masked = Uint32Array.from(w)
  maskV6(masked, 0, list[at * 5 + 4]!)
  return compareV6(list, at * 5, masked) === 0 ? at : -1
}

/** A found prefix: its CIDR text and its dialect_b row value and type. */
interface FoundPrefix { cidr: string, value: string, type: 'IP' | 'IP Range' }

function prefixAt (p: PublishedPrefixes, addr: ExplainAddress): FoundPrefix | null {
  if (addr.family === 'v4') {
    const i = findV4(p.v4, addr.v4)
    if (i < 0) return null
    const first = p.v4[i * 2]!
    const len = p.v4[i * 2 + 1]!
    const text = formatIpv4(first)
    return { cidr: `${text}/${len}`, ...(len === 32 ? { value: text, type: 'IP' } : { value: `${text}-${formatIpv4(lastV4(first, len))}`, type: 'IP Range' }) }
  }
  const i = findV6(p.v6, addr.v6)
  if (i < 0) return null
  const first = p.v6.subarray(i * 5, i * 5 + 4)
  const len = p.v6[i * 5 + 4]!
  const text = formatIpv6(first)
  if (len === 128) return { cidr: `${text}/128`, value: text, type: 'IP' }
  const last = new Uint32Array(4)
  lastV6(first, 0, len, last, 0)
  return { cidr: `${text}/${len}`, value: `${text}-${formatIpv6(last)}`, type: 'IP Range' }
}

/** One dialect_b row that covers the address, as the body prints it (without its `\n`). */
export interface PublishedRow {
  readonly row: string
  readonly network: string
  readonly confidence: string
  readonly severity: string
}

/** Where an address is in one action's networks: the `total` network and the dialect_b rows. */
export interface PublishedLookup {
  /** The network of plain, dialect_a and nftables that holds the address; null when none does. */
  readonly network: string | null
  /** Every dialect_b row holding it, one per group at most, in group order. */
  readonly rows: readonly PublishedRow[]
}

/**
 * @example
 *   lookupPublished(snapshot.published.block, parseExplainAddress('203.0.113.7'))
 *   // { network: '203.0.112.0/22', rows: [{ row: '203.0.112.0-203.0.115.255,IP Range,high,high', … }] }
 */
export function lookupPublished (n: PublishedNetworks, addr: ExplainAddress): PublishedLookup {
  const total = prefixAt(n.total, addr)
  const rows: PublishedRow[] = []
  for (const g of n.groups) {
    const p = g === n.groups[0] && g.v4 === n.total.v4 && g.v6 === n.total.v6 ? total : prefixAt(g, addr)
    if (p !== null) rows.push({ row: `${p.value},${p.type},${g.confidence},${g.severity}`, network: p.cidr, confidence: g.confidence, severity: g.severity })
  }
  return { network: total?.cidr ?? null, rows }
}

/**
 * Every network that holds the address, widest first: the ip targets a rule could have to cover
 * it (33 for IPv4, 129 for IPv6), down to the floors ingest accepts (/8 and /12, DECISIONS §3).
 */
export function coveringNetworks (addr: ExplainAddress): string[] {
  const out: string[] = []
  if (addr.family === 'v4') {
    for (let len = MIN_V4; len <= 32; len++) out.push(`${formatIpv4((addr.v4 & maskV4(len)) >>> 0)}/${len}`)
    return out
  }
  const w = new Uint32Array(4)
  for (let len = MIN_V6; len <= 128; len++) {
    w.set(addr.v6)
    maskV6(w, 0, len)
    out.push(`${formatIpv6(w)}/${len}`)
  }
  return out
}

/** The shortest prefixes a signal may name (DECISIONS §3: one signal cannot block the Internet). */
const MIN_V4 = 8
const MIN_V6 = 12
