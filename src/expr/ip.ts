/**
 * IP literals for the expression language: strict parsing, canonical text and network checks.
 *
 * src/expr may import nothing but src/errors.ts (STYLE.md), so this is a small, self-contained
 * parser rather than a reuse of src/net. The parsers read the text's bytes (text.ts) in place:
 * IPv4 comes back as an unsigned 32-bit number, IPv6 as its eight 16-bit groups written into
 * an array the caller owns (literals.ts parses sets of them without allocating). The string
 * forms below (ParsedIp: 2 groups for IPv4, 8 for IPv6) are for tests and error messages.
 *
 * Strictness follows Rust's std::net parsers, which wirefilter uses: IPv4 octets with leading
 * zeros are rejected (is 010 octal or decimal? RFC 6943 §3.1.1), zone ids are rejected.
 */
import { codesOf, hexValue } from './text.js'

export interface ParsedIp {
  readonly version: 4 | 6
  readonly groups: readonly number[]
}

const DOT = 46
const COLON = 58

/**
 * The address in codes[start, end) as an unsigned 32-bit number, or -1; no allocation (sets
 * hold many of these, and IPv6 text may end with one). `codes` is text as bytes (text.ts).
 */
export function parseIpv4Codes (codes: Uint8Array, start: number, end: number): number {
  let acc = 0
  let octets = 0
  let value = 0
  let digits = 0
  for (let i = start; i <= end; i++) {
    const c = i < end ? codes[i]! : DOT
    if (c === DOT) {
      if (digits === 0 || octets === 4) return -1
      acc = acc * 256 + value
      octets++
      value = 0
      digits = 0
    } else if (c >= 48 && c <= 57) {
      if (digits === 1 && value === 0) return -1 // leading zero
      value = value * 10 + (c - 48)
      if (++digits > 3 || value > 255) return -1
    } else {
      return -1
    }
  }
  return octets === 4 ? acc : -1
}

/**
 * Parses RFC 4291 §2.2 text in codes[start, end) (with `::` and a trailing dotted quad; no zone
 * ids) into `out`, its 8 groups. False when the text is not an address. Writing into a given
 * array, not a new one: sets of addresses are parsed by the hundred.
 */
export function parseIpv6Into (codes: Uint8Array, start: number, end: number, out: Uint16Array): boolean {
  let gap = -1
  for (let i = start; i + 1 < end; i++) {
    if (codes[i] !== COLON || codes[i + 1] !== COLON) continue
    if (gap !== -1) return false // a second `::`
    gap = i
  }
  if (gap === -1) return parseGroups(codes, start, end, true, out, 0) === 8
  const left = parseGroups(codes, start, gap, false, out, 0)
  if (left < 0) return false
  const count = parseGroups(codes, gap + 2, end, true, out, left)
  if (count < 0 || count > 7) return false
  // Open the gap: move the right-hand groups to the end and zero what lies between.
  const fill = 8 - count
  for (let i = 7; i >= left + fill; i--) out[i] = out[i - fill]!
  for (let i = left; i < left + fill; i++) out[i] = 0
  return true
}

/**
 * Colon-separated hex groups in codes[start, end), written to `out` from `count` on; the last
 * may be a dotted quad when `mayEndWithV4`. Returns the new count, or -1 when a group is
 * malformed or there are more than 8.
 */
function parseGroups (codes: Uint8Array, start: number, end: number, mayEndWithV4: boolean, out: Uint16Array, count: number): number {
  if (start === end) return count
  let from = start
  for (let i = start; i <= end; i++) {
    if (i < end && codes[i] !== COLON) continue
    if (i === end && mayEndWithV4 && hasDot(codes, from, end)) {
      const v4 = parseIpv4Codes(codes, from, end)
      if (v4 < 0 || count > 6) return -1
      out[count++] = v4 >>> 16
      out[count++] = v4 & 0xffff
      return count
    }
    if (i === from || i - from > 4 || count === 8) return -1
    let v = 0
    for (let j = from; j < i; j++) {
      const d = hexValue(codes[j]!)
      if (d < 0) return -1
      v = v * 16 + d
    }
    out[count++] = v
    from = i + 1
  }
  return count
}

function hasDot (codes: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (codes[i] === DOT) return true
  return false
}

/** Parses a dotted quad; undefined unless it is exactly four decimal octets 0–255. */
export function parseIpv4 (s: string): ParsedIp | undefined {
  const n = parseIpv4Codes(codesOf(s), 0, s.length)
  return n < 0 ? undefined : { version: 4, groups: [n >>> 16, n & 0xffff] }
}

/** Parses RFC 4291 §2.2 text (with `::` and a trailing dotted quad); no zone ids. */
export function parseIpv6 (s: string): ParsedIp | undefined {
  const groups = new Uint16Array(8)
  return parseIpv6Into(codesOf(s), 0, s.length, groups) ? { version: 6, groups: Array.from(groups) } : undefined
}

export function parseIp (s: string): ParsedIp | undefined {
  return s.indexOf(':') === -1 ? parseIpv4(s) : parseIpv6(s)
}

/** Dotted quad of an address held as an unsigned 32-bit number. */
export function formatIpv4 (n: number): string {
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`
}

/** Canonical text: dotted quad, or RFC 5952 §4 (lowercase, longest zero run as `::`). */
export function formatIp (ip: ParsedIp): string {
  const g = ip.groups
  return ip.version === 4 ? formatIpv4((g[0]! << 16 | g[1]!) >>> 0) : formatIpv6(g)
}

/** RFC 5952 §4 text of 8 groups. */
export function formatIpv6 (g: ArrayLike<number>): string {
  // RFC 5952 §5: IPv4-mapped addresses keep the dotted quad.
  if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff) {
    return `::ffff:${g[6]! >>> 8}.${g[6]! & 255}.${g[7]! >>> 8}.${g[7]! & 255}`
  }
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

/** -1, 0 or 1 for two IPv6 addresses' groups. */
export function compareGroups (a: ArrayLike<number>, b: ArrayLike<number>): number {
  for (let i = 0; i < a.length; i++) {
    const d = a[i]! - b[i]!
    if (d !== 0) return d < 0 ? -1 : 1
  }
  return 0
}

/** Whether `ip/prefix` has bits set past the prefix (so is not a network address). */
export function hasHostBits (g: ArrayLike<number>, prefix: number): boolean {
  for (let i = 0; i < g.length; i++) {
    const keep = prefix - i * 16
    if (keep >= 16) continue
    const mask = keep <= 0 ? 0 : (0xffff << (16 - keep)) & 0xffff
    if ((g[i]! & ~mask) !== 0) return true
  }
  return false
}

/** -1, 0 or 1; both addresses must be of the same family. */
export function compareIp (a: ParsedIp, b: ParsedIp): number {
  return compareGroups(a.groups, b.groups)
}

/** The network of `ip/prefix` (host bits cleared). */
export function networkOf (ip: ParsedIp, prefix: number): ParsedIp {
  const groups: number[] = []
  for (let i = 0; i < ip.groups.length; i++) {
    const x = ip.groups[i]!
    const keep = Math.max(0, Math.min(16, prefix - i * 16))
    groups.push(keep === 16 ? x : keep === 0 ? 0 : x & ((0xffff << (16 - keep)) & 0xffff))
  }
  return { version: ip.version, groups }
}
