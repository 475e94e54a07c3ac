/**
 * Prefix math and the normalizing scanners for the three network notations: an address, a CIDR
 * (`addr/len`) and a range (`first-last`). Every scanner reduces its text to one closed interval
 * [first, last] and applies the normalization of DECISIONS §3:
 *
 * - an address is a /32 or /128;
 * - a CIDR with host bits set means its network (10.0.0.1/8 → 10.0.0.0/8);
 * - IPv4-mapped IPv6 (::ffff:0:0/96, RFC 4291 §2.5.5.2) is IPv4: `::ffff:1.2.3.4` is 1.2.3.4,
 *   `::ffff:1.2.3.0/120` is 1.2.3.0/24. A CIDR shorter than /96 is only partly mapped space and
 *   stays IPv6, as does a range unless both of its ends are mapped.
 *
 * Scanners write into a caller-owned `Uint32Array(INTERVAL_WORDS)` so that a million lines cost no
 * allocation:
 *
 *   index  0..3         4..7        8
 *          first addr   last addr   prefix length (CIDR and address only)
 *
 * IPv4 uses index 0 and 4 only. The return value is the family, 4 or 6, or 0 when invalid; the
 * reason for a refusal is worked out separately, and slowly, by explain.ts.
 */
import { isIpv4Mapped, scanIpv4, scanIpv6 } from './ip.js'
import { compare128 } from './words.js'

export const INTERVAL_WORDS = 9
export const FIRST = 0
export const LAST = 4
export const PREFIX_LENGTH = 8

export type Family = 4 | 6

const CH_0 = 0x30
const CH_COLON = 0x3a
const CH_SLASH = 0x2f
const CH_DASH = 0x2d

/**
 * The netmask of a prefix length as a u32.
 *
 * @example
 *   maskV4(24) // 0xffffff00
 */
export function maskV4 (len: number): number {
  return len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0
}

/**
 * The last address of an IPv4 prefix.
 *
 * @example
 *   lastV4(0x0a000000, 8) // 0x0affffff
 */
export function lastV4 (addr: number, len: number): number {
  return (addr | ~maskV4(len)) >>> 0
}

/**
 * Clears the host bits of an IPv6 address in place (words are big-endian u32).
 *
 * @example
 *   const w = Uint32Array.of(0x20010db8, 0xffffffff, 1, 1); maskV6(w, 0, 48) // w = [0x20010db8, 0xffff0000, 0, 0]
 */
export function maskV6 (w: Uint32Array, offset: number, len: number): void {
  for (let k = 0; k < 4; k++) {
    const bits = len - 32 * k
    if (bits >= 32) continue
    w[offset + k] = bits <= 0 ? 0 : (w[offset + k]! & maskV4(bits)) >>> 0
  }
}

/**
 * Writes the last address of the prefix `w[offset..]/len` to `out[outOffset..]`.
 *
 * @example
 *   lastV6([0x20010db8, 0, 0, 0], 0, 32, out, 0) // out = [0x20010db8, 0xffffffff, 0xffffffff, 0xffffffff]
 */
export function lastV6 (w: ArrayLike<number>, offset: number, len: number, out: Uint32Array, outOffset: number): void {
  for (let k = 0; k < 4; k++) {
    const bits = len - 32 * k
    const word = w[offset + k]!
    out[outOffset + k] = bits >= 32 ? word : bits <= 0 ? 0xffffffff : lastV4(word, bits)
  }
}

/**
 * Scans an address at `s[start, end)` into `out[offset..]` (one word for IPv4, four for IPv6),
 * turning an IPv4-mapped IPv6 address into IPv4.
 * @returns 4, 6, or 0 when invalid
 *
 * @example
 *   scanAddress('::ffff:192.0.2.1', 0, 16, out, 0) // 4; out[0] = 0xc0000201
 */
export function scanAddress (s: string, start: number, end: number, out: Uint32Array, offset: number): 0 | Family {
  // The first four characters decide: a colon is IPv6; IPv4 has one within four characters.
  for (let i = start; i < end && i < start + 5; i++) {
    if (s.charCodeAt(i) === CH_COLON) {
      if (!scanIpv6(s, start, end, out, offset)) return 0
      if (isIpv4Mapped(out, offset)) {
        out[offset] = out[offset + 3]!
        return 4
      }
      return 6
    }
  }
  const v4 = scanIpv4(s, start, end)
  if (v4 < 0) return 0
  out[offset] = v4
  return 4
}

/** Decimal prefix length at `s[start, end)` without a leading zero, or -1. */
function scanPrefixLength (s: string, start: number, end: number, max: number): number {
  const n = end - start
  if (n < 1 || n > 3) return -1
  let v = 0
  for (let i = start; i < end; i++) {
    const d = s.charCodeAt(i) - CH_0
    if (d < 0 || d > 9) return -1
    v = v * 10 + d
  }
  // "/08" is refused like an octet "08": one spelling per value keeps targets comparable.
  if (n > 1 && s.charCodeAt(start) === CH_0) return -1
  return v <= max ? v : -1
}

/**
 * Scans an address or CIDR at `s[start, end)` into the interval layout (see the file comment).
 *
 * @example
 *   const out = new Uint32Array(INTERVAL_WORDS)
 *   scanCidr('10.1.2.3/8', 0, 10, out) // 4; out[FIRST] = 0x0a000000, out[LAST] = 0x0affffff, out[PREFIX_LENGTH] = 8
 * @returns 4, 6, or 0 when invalid
 */
export function scanCidr (s: string, start: number, end: number, out: Uint32Array): 0 | Family {
  let slash = -1
  for (let i = start; i < end; i++) {
    if (s.charCodeAt(i) === CH_SLASH) { slash = i; break }
  }
  const addrEnd = slash < 0 ? end : slash
  // Scan as written, then decide: a mapped address keeps IPv6 prefix semantics until masked.
  let family: 0 | 4 | 6 = 0
  for (let i = start; i < addrEnd && i < start + 5; i++) {
    if (s.charCodeAt(i) === CH_COLON) { family = 6; break }
  }
  if (family === 6) {
    if (!scanIpv6(s, start, addrEnd, out, FIRST)) return 0
    const len = slash < 0 ? 128 : scanPrefixLength(s, slash + 1, end, 128)
    if (len < 0) return 0
    maskV6(out, FIRST, len)
    if (len >= 96 && isIpv4Mapped(out, FIRST)) {
      out[FIRST] = out[FIRST + 3]!
      out[PREFIX_LENGTH] = len - 96
      out[LAST] = lastV4(out[FIRST]!, len - 96)
      return 4
    }
    lastV6(out, FIRST, len, out, LAST)
    out[PREFIX_LENGTH] = len
    return 6
  }
  const v4 = scanIpv4(s, start, addrEnd)
  if (v4 < 0) return 0
  const len = slash < 0 ? 32 : scanPrefixLength(s, slash + 1, end, 32)
  if (len < 0) return 0
  out[FIRST] = (v4 & maskV4(len)) >>> 0
  out[LAST] = lastV4(v4, len)
  out[PREFIX_LENGTH] = len
  return 4
}

/**
 * Scans a range `first-last` at `s[start, end)` (blanks allowed around the dash when
 * `allowBlanks`) into the interval layout. Both ends must be addresses of one family, in order.
 * @returns 4, 6, or 0 when invalid
 *
 * @example
 *   scanRange('10.0.0.5 - 10.0.0.9', 0, 19, out, true) // 4; out[FIRST] = 0x0a000005, out[LAST] = 0x0a000009
 */
export function scanRange (s: string, start: number, end: number, out: Uint32Array, allowBlanks = false): 0 | Family {
  let dash = -1
  for (let i = start; i < end; i++) {
    if (s.charCodeAt(i) === CH_DASH) { dash = i; break }
  }
  if (dash < 0) return 0
  let leftEnd = dash
  let rightStart = dash + 1
  if (allowBlanks) {
    while (leftEnd > start && isBlank(s.charCodeAt(leftEnd - 1))) leftEnd--
    while (rightStart < end && isBlank(s.charCodeAt(rightStart))) rightStart++
  }
  const f1 = scanAddress(s, start, leftEnd, out, FIRST)
  if (f1 === 0) return 0
  const f2 = scanAddress(s, rightStart, end, out, LAST)
  if (f2 !== f1) return 0
  out[PREFIX_LENGTH] = 0xffffffff
  if (f1 === 4) return out[FIRST]! <= out[LAST]! ? 4 : 0
  return compare128(out, FIRST, out, LAST) <= 0 ? 6 : 0
}

/**
 * Space or tab.
 *
 * @example
 *   isBlank(0x09) // true (tab)
 */
export function isBlank (c: number): boolean {
  return c === 0x20 || c === 0x09
}
