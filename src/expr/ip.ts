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

/** Parses a dotted quad; undefined unless it is exactly four decimal octets 0–255. */
export function parseIpv4 (s: string): ParsedIp | undefined {
  const n = parseIpv4Number(s)
  return n < 0 ? undefined : { version: 4, groups: [n >>> 16, n & 0xffff] }
}

/** The address as an unsigned 32-bit number, or -1; no allocation (sets hold many of these). */
function parseIpv4Number (s: string): number {
  let acc = 0
  let octets = 0
  let value = 0
  let digits = 0
  for (let i = 0; i <= s.length; i++) {
    const c = i < s.length ? s.charCodeAt(i) : DOT
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

function parseIpv4Octets (s: string): number[] | undefined {
  const out: number[] = []
  let value = 0
  let digits = 0
  for (let i = 0; i <= s.length; i++) {
    const c = i < s.length ? s.charCodeAt(i) : DOT
    if (c === DOT) {
      if (digits === 0 || out.length === 4) return undefined
      out.push(value)
      value = 0
      digits = 0
    } else if (c >= 48 && c <= 57) {
      if (digits === 1 && value === 0) return undefined // leading zero
      value = value * 10 + (c - 48)
      if (++digits > 3 || value > 255) return undefined
    } else {
      return undefined
    }
  }
  return out.length === 4 ? out : undefined
}

/** Parses RFC 4291 §2.2 text (with `::` and a trailing dotted quad); no zone ids. */
export function parseIpv6 (s: string): ParsedIp | undefined {
  const gap = s.indexOf('::')
  if (gap !== -1 && s.indexOf('::', gap + 1) !== -1) return undefined
  const head = gap === -1 ? s : s.slice(0, gap)
  const tail = gap === -1 ? '' : s.slice(gap + 2)
  const left = parseGroups(head, gap === -1)
  const right = gap === -1 ? [] : parseGroups(tail, true)
  if (left === undefined || right === undefined) return undefined
  const count = left.length + right.length
  if (gap === -1 ? count !== 8 : count > 7) return undefined
  const groups = left.concat(new Array<number>(8 - count).fill(0), right)
  return { version: 6, groups }
}

/** Colon-separated hex groups; the last may be a dotted quad when `mayEndWithV4`. */
function parseGroups (s: string, mayEndWithV4: boolean): number[] | undefined {
  if (s === '') return []
  const parts = s.split(':')
  const out: number[] = []
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!
    if (i === parts.length - 1 && mayEndWithV4 && p.indexOf('.') !== -1) {
      const v4 = parseIpv4Octets(p)
      if (v4 === undefined) return undefined
      out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!)
      continue
    }
    if (p.length === 0 || p.length > 4) return undefined
    let v = 0
    for (let j = 0; j < p.length; j++) {
      const d = hexValue(p.charCodeAt(j))
      if (d < 0) return undefined
      v = v * 16 + d
    }
    out.push(v)
  }
  return out
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
  if (bestStart === -1) return g.map((x) => x.toString(16)).join(':')
  const head = g.slice(0, bestStart).map((x) => x.toString(16)).join(':')
  const tail = g.slice(bestStart + bestLen).map((x) => x.toString(16)).join(':')
  return `${head}::${tail}`
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
  const groups = ip.groups.map((x, i) => {
    const keep = Math.max(0, Math.min(16, prefix - i * 16))
    return keep === 16 ? x : keep === 0 ? 0 : x & ((0xffff << (16 - keep)) & 0xffff)
  })
  return { version: ip.version, groups }
}

export function maxPrefix (ip: ParsedIp): number {
  return ip.groups.length * 16
}
