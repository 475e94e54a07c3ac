/**
 * IP literals for the expression language: strict parsing, canonical text and network checks.
 *
 * src/expr may import nothing but src/errors.ts (STYLE.md), so this is a small, self-contained
 * parser rather than a reuse of src/net. An address is its 16-bit groups, most significant
 * first: 2 for IPv4, 8 for IPv6 — which makes ordering and host-bit checks one loop for both.
 *
 * Strictness follows Rust's std::net parsers, which wirefilter uses: IPv4 octets with leading
 * zeros are rejected (is 010 octal or decimal? RFC 6943 §3.1.1), zone ids are rejected.
 */

export interface ParsedIp {
  readonly version: 4 | 6
  readonly groups: readonly number[]
}

const DOT = 46
const COLON = 58

/** Parses a dotted quad; undefined unless it is exactly four decimal octets 0–255. */
export function parseIpv4 (s: string): ParsedIp | undefined {
  const n = parseIpv4Number(s)
  return n < 0 ? undefined : { version: 4, groups: [n >>> 16, n & 0xffff] }
}

/**
 * The address in s[start, end) as an unsigned 32-bit number, or -1; no allocation (sets hold
 * many of these, and IPv6 text may end with one).
 */
function parseIpv4Number (s: string, start = 0, end = s.length): number {
  let acc = 0
  let octets = 0
  let value = 0
  let digits = 0
  for (let i = start; i <= end; i++) {
    const c = i < end ? s.charCodeAt(i) : DOT
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

/** Parses RFC 4291 §2.2 text (with `::` and a trailing dotted quad); no zone ids. */
export function parseIpv6 (s: string): ParsedIp | undefined {
  const gap = s.indexOf('::')
  if (gap !== -1 && s.indexOf('::', gap + 1) !== -1) return undefined
  // One array for both sides of the gap, by index ranges: addresses fill sets by the hundred.
  const groups: number[] = []
  if (gap === -1) {
    return parseGroups(s, 0, s.length, true, groups) && groups.length === 8 ? { version: 6, groups } : undefined
  }
  if (!parseGroups(s, 0, gap, false, groups)) return undefined
  const left = groups.length
  if (!parseGroups(s, gap + 2, s.length, true, groups) || groups.length > 7) return undefined
  // Open the gap: move the right-hand groups to the end and zero what lies between.
  const fill = 8 - groups.length
  for (let k = 0; k < fill; k++) groups.push(0)
  for (let i = 7; i >= left + fill; i--) groups[i] = groups[i - fill]!
  for (let i = left; i < left + fill; i++) groups[i] = 0
  return { version: 6, groups }
}

/**
 * Colon-separated hex groups in s[start, end), appended to `out`; the last may be a dotted quad
 * when `mayEndWithV4`. False when a group is malformed.
 */
function parseGroups (s: string, start: number, end: number, mayEndWithV4: boolean, out: number[]): boolean {
  if (start === end) return true
  let from = start
  for (let i = start; i <= end; i++) {
    if (i < end && s.charCodeAt(i) !== COLON) continue
    if (i === end && mayEndWithV4 && hasDot(s, from, end)) {
      const v4 = parseIpv4Number(s, from, end)
      if (v4 < 0) return false
      out.push(v4 >>> 16, v4 & 0xffff)
      return true
    }
    if (i === from || i - from > 4) return false
    let v = 0
    for (let j = from; j < i; j++) {
      const d = hexValue(s.charCodeAt(j))
      if (d < 0) return false
      v = v * 16 + d
    }
    out.push(v)
    from = i + 1
  }
  return true
}

function hasDot (s: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (s.charCodeAt(i) === DOT) return true
  return false
}

export function hexValue (c: number): number {
  if (c >= 48 && c <= 57) return c - 48
  if (c >= 97 && c <= 102) return c - 87
  if (c >= 65 && c <= 70) return c - 55
  return -1
}

export function parseIp (s: string): ParsedIp | undefined {
  return s.indexOf(':') === -1 ? parseIpv4(s) : parseIpv6(s)
}

/** Canonical text: dotted quad, or RFC 5952 §4 (lowercase, longest zero run as `::`). */
export function formatIp (ip: ParsedIp): string {
  const g = ip.groups
  if (ip.version === 4) return `${g[0]! >>> 8}.${g[0]! & 255}.${g[1]! >>> 8}.${g[1]! & 255}`
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

/** g[from, to) in hex, joined by `:` (a loop, not slice/map/join: three arrays per address). */
function hexGroups (g: readonly number[], from: number, to: number): string {
  let out = ''
  for (let i = from; i < to; i++) out += i === from ? g[i]!.toString(16) : ':' + g[i]!.toString(16)
  return out
}

/** -1, 0 or 1; both addresses must be of the same family. */
export function compareIp (a: ParsedIp, b: ParsedIp): number {
  for (let i = 0; i < a.groups.length; i++) {
    const d = a.groups[i]! - b.groups[i]!
    if (d !== 0) return d < 0 ? -1 : 1
  }
  return 0
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

export function maxPrefix (ip: ParsedIp): number {
  return ip.groups.length * 16
}
