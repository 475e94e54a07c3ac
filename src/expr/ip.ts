/**
 * IP literals for the expression language: canonical text and network checks. Parsing and
 * 128-bit comparison are src/net's (the one home of both): IPv4 is an unsigned 32-bit number,
 * IPv6 four big-endian u32 words. The string forms below (ParsedIp: one word for IPv4, four for
 * IPv6) are for tests and error messages.
 *
 * Strictness follows Rust's std::net parsers, which wirefilter uses: IPv4 octets with leading
 * zeros are rejected (is 010 octal or decimal? RFC 6943 §3.1.1), zone ids are rejected; src/net
 * applies exactly that grammar (DECISIONS §3).
 */
import { formatIpv4, parseIpv4, parseIpv6 } from '../net/ip.js'
import { compare128 } from '../net/words.js'

export interface ParsedIp {
  readonly version: 4 | 6
  readonly words: readonly number[]
}

/**
 * Parses an address: a dotted quad (exactly four decimal octets 0–255) or RFC 4291 §2.2 text
 * (with `::` and a trailing dotted quad; no zone ids); undefined when it is neither.
 */
export function parseIp (s: string): ParsedIp | undefined {
  if (s.indexOf(':') === -1) {
    const n = parseIpv4(s)
    return n < 0 ? undefined : { version: 4, words: [n] }
  }
  const words = new Uint32Array(4)
  return parseIpv6(s, words) ? { version: 6, words: Array.from(words) } : undefined
}

/** Canonical text: dotted quad, or RFC 5952 §4 (lowercase, longest zero run as `::`). */
export function formatIp (ip: ParsedIp): string {
  return ip.version === 4 ? formatIpv4(ip.words[0]!) : formatIpv6(ip.words)
}

/** The 16-bit groups of the address being formatted (formatting is not re-entrant). */
const groups = new Uint16Array(8)

/** RFC 5952 §4 text of four big-endian u32 words. */
export function formatIpv6 (w: ArrayLike<number>): string {
  // RFC 5952 §5: IPv4-mapped addresses keep the dotted quad.
  if (w[0] === 0 && w[1] === 0 && w[2] === 0xffff) return `::ffff:${formatIpv4(w[3]!)}`
  for (let k = 0; k < 4; k++) {
    groups[2 * k] = w[k]! >>> 16
    groups[2 * k + 1] = w[k]! & 0xffff
  }
  const g = groups
  let bestStart = -1
  let bestLen = 1 // a single zero group is never shortened (RFC 5952 §4.2.2)
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) { i++; continue }
    let j = i
    while (j < 8 && g[j] === 0) j++
    if (j - i > bestLen) { bestStart = i; bestLen = j - i }
    i = j
  }
  if (bestStart === -1) return hexGroups(g, 0, 8)
  return `${hexGroups(g, 0, bestStart)}::${hexGroups(g, bestStart + bestLen, 8)}`
}

/** Hex of every byte, without and with a leading zero: a group is one or two of these. */
const HEX: readonly string[] = Array.from({ length: 256 }, (_, b) => b.toString(16))
const HEX2: readonly string[] = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'))

/**
 * g[from, to) in hex, joined by `:`. From the byte tables rather than toString(16), which
 * measured several times slower (a runtime call and a new string per group).
 */
function hexGroups (g: ArrayLike<number>, from: number, to: number): string {
  let out = ''
  for (let i = from; i < to; i++) {
    const x = g[i]!
    const hex = x < 256 ? HEX[x]! : HEX[x >>> 8]! + HEX2[x & 255]!
    out += i === from ? hex : ':' + hex
  }
  return out
}

/** The mask of the first `keep` bits of a 32-bit word (keep clamped to 0–32). */
function wordMask (keep: number): number {
  return keep >= 32 ? 0xffffffff : keep <= 0 ? 0 : (0xffffffff << (32 - keep)) >>> 0
}

/** Whether `ip/prefix` has bits set past the prefix (so is not a network address); `w`: its words. */
export function hasHostBits (w: ArrayLike<number>, prefix: number): boolean {
  for (let i = 0; i < w.length; i++) {
    if (((w[i]! & ~wordMask(prefix - i * 32)) >>> 0) !== 0) return true
  }
  return false
}

/** -1, 0 or 1; both addresses must be of the same family. */
export function compareIp (a: ParsedIp, b: ParsedIp): number {
  if (a.version === 6) return compare128(a.words, 0, b.words, 0)
  const d = a.words[0]! - b.words[0]!
  return d === 0 ? 0 : d < 0 ? -1 : 1
}

/** The network of `ip/prefix` (host bits cleared). */
export function networkOf (ip: ParsedIp, prefix: number): ParsedIp {
  const words = ip.words.map((x, i) => (x & wordMask(prefix - i * 32)) >>> 0)
  return { version: ip.version, words }
}
