/**
 * IPv4 and IPv6 address text ⇄ numbers. IPv4 is a u32; IPv6 is four u32 words, most significant
 * first. Parsers walk char codes against lookup tables (hono's `parseIPv4ToBinary`, undici's
 * token tables) instead of `split` and regex: they run once per input line of a million-line
 * coalesce, so an allocation per call shows up in the profile.
 *
 * The grammar is deliberately strict (DECISIONS §3): IPv4 is exactly four decimal octets without
 * leading zeros — `010.1.1.1` means 8.1.1.1 to inet_aton and 10.1.1.1 to most humans, so it is
 * refused rather than guessed — and there are no hex (`0x0a000001`) or integer (`167772161`)
 * forms. IPv6 follows RFC 4291 §2.2 (including a trailing dotted IPv4) without zone ids.
 *
 * The `scan*` variants parse `s[start, end)` so that line scanners can parse in place inside a
 * large input string without slicing it; the `read*` ones read bytes (Uint8Array reads are
 * cheaper than charCodeAt) and stop where the address ends.
 */

const CH_0 = 0x30
const CH_DOT = 0x2e
const CH_COLON = 0x3a

/** Char code → hex digit value, or -1. Covers the 7-bit range; anything above is not hex. */
const HEX_VALUE = new Int8Array(128).fill(-1)
for (let c = 0; c < 10; c++) HEX_VALUE[CH_0 + c] = c
for (let c = 0; c < 6; c++) {
  HEX_VALUE[0x41 + c] = 10 + c
  HEX_VALUE[0x61 + c] = 10 + c
}

const CH_SLASH = 0x2f
/** What any non-ASCII char becomes in SCRATCH: no rule of the grammar accepts it. */
const NON_ASCII = 0x80
/** The longest dotted quad, `255.255.255.255`. */
const MAX_IPV4_LENGTH = 15

/**
 * The one IPv4 parser of the code base (eslint.config.js keeps it the only one): reads the dotted
 * quad that starts at `b[start]` and ends at or before `end`, leaving the address in `out[0]`.
 * Strict (see the file comment): four octets of one to three digits, no leading zero, at most
 * 255. It stops where the grammar does, so the caller checks what follows (the end of its token
 * or line, or a `/len` for readPrefixLength; a digit there means a four-digit octet). Kept this small so that V8 inlines it into the hot
 * loops that call it (coalesce input, feed targets, expression literals); `out` is a typed array
 * because a module variable would box a value above 2^30 on each store.
 * @returns the index after the quad, or -1 when there is no strict quad at `start`
 *
 * @example
 *   readIpv4(Buffer.from('10.0.0.1/8'), 0, 10, out) // 8; out[0] = 0x0a000001
 */
export function readIpv4 (b: Uint8Array, start: number, end: number, out: Uint32Array): number {
  let i = start
  let addr = 0
  for (let octet = 0; octet < 4; octet++) {
    if (octet > 0) {
      if (i >= end || b[i] !== CH_DOT) return -1
      i++
    }
    if (i >= end) return -1
    let v = b[i]! - CH_0
    if (v < 0 || v > 9) return -1
    i++
    // Up to two more digits, unrolled; a leading zero must stand alone ("0", not "01": octal).
    if (i < end) {
      let d = b[i]! - CH_0
      if (d >= 0 && d <= 9) {
        if (v === 0) return -1
        v = v * 10 + d
        i++
        if (i < end) {
          d = b[i]! - CH_0
          if (d >= 0 && d <= 9) {
            v = v * 10 + d
            i++
            if (v > 255) return -1
          }
        }
      }
    }
    addr = addr * 256 + v
  }
  out[0] = addr
  return i
}

/**
 * After an address read by readIpv4 or scanIpv6 at `b[i]`: an optional `/len` (digits without a
 * leading zero, at most `max`) into `out[1]` (`max` without one).
 * @returns the index after it, or -1 when a `/` is not followed by a valid length
 *
 * @example
 *   readPrefixLength(Buffer.from('10.0.0.0/8'), 8, 10, 32, out) // 10; out[1] = 8
 */
export function readPrefixLength (b: Uint8Array, i: number, end: number, max: number, out: Uint32Array): number {
  if (i >= end || b[i] !== CH_SLASH) {
    out[1] = max
    return i
  }
  i++
  let v = 0
  let d = 0
  while (i < end) {
    const x = b[i]! - CH_0
    if (x < 0 || x > 9) break
    if (d === 1 && v === 0) return -1
    v = v * 10 + x
    i++
    if (++d > 3) return -1
  }
  if (d === 0 || v > max) return -1
  out[1] = v
  return i
}

const parsed = new Uint32Array(2)

/**
 * Parses exactly `b[start, end)` as a dotted quad.
 * @returns the address as a u32, or -1
 *
 * @example
 *   parseIpv4Bytes(Buffer.from('192.0.2.1'), 0, 9) // 3221225985
 */
export function parseIpv4Bytes (b: Uint8Array, start: number, end: number): number {
  return readIpv4(b, start, end, parsed) === end ? parsed[0]! : -1
}

/** A string's chars as bytes for readIpv4: a quad is short, so a copy costs less than a second parser. */
const SCRATCH = new Uint8Array(MAX_IPV4_LENGTH)

/**
 * Parses `s[start, end)` as a dotted-quad IPv4 address.
 * @returns the address as a u32, or -1 when the text is not exactly a strict dotted quad
 *
 * @example
 *   scanIpv4('ip=10.0.0.1;', 3, 11) // 0x0a000001
 */
export function scanIpv4 (s: string, start: number, end: number): number {
  const n = end - start
  if (n > MAX_IPV4_LENGTH || n <= 0) return -1
  for (let k = 0; k < n; k++) {
    const c = s.charCodeAt(start + k)
    SCRATCH[k] = c < NON_ASCII ? c : NON_ASCII
  }
  return parseIpv4Bytes(SCRATCH, 0, n)
}

/**
 * Parses a dotted-quad IPv4 address.
 *
 * @example
 *   parseIpv4('192.0.2.1') // 3221225985
 *   parseIpv4('010.0.0.1') // -1 (leading zero)
 * @returns the address as a u32, or -1 when invalid
 */
export function parseIpv4 (text: string): number {
  return scanIpv4(text, 0, text.length)
}

/**
 * Formats a u32 as a dotted quad.
 *
 * @example
 *   formatIpv4(3221225985) // '192.0.2.1'
 */
export function formatIpv4 (u32: number): string {
  return `${u32 >>> 24}.${(u32 >>> 16) & 255}.${(u32 >>> 8) & 255}.${u32 & 255}`
}

// Eight 16-bit groups of the address being parsed. Module scratch: parsers are synchronous and
// never re-entered, and this keeps a million calls from allocating a million arrays.
const groups = new Uint16Array(8)

/**
 * Parses `s[start, end)` as an IPv6 address (RFC 4291 §2.2) into `out[offset..offset+3]`.
 * @returns false when invalid (then `out` may be partly written)
 *
 * @example
 *   scanIpv6('[2001:db8::1]', 1, 12, out) // true; out = [0x20010db8, 0, 0, 1]
 */
export function scanIpv6 (s: string, start: number, end: number, out: Uint32Array, offset = 0): boolean {
  let i = start
  if (i >= end) return false
  let n = 0
  let gap = -1 // index in `groups` where "::" stands
  if (s.charCodeAt(i) === CH_COLON) {
    // Only "::" may start an address; a lone leading colon is malformed.
    if (i + 1 >= end || s.charCodeAt(i + 1) !== CH_COLON) return false
    gap = 0
    i += 2
  }
  while (i < end) {
    const groupStart = i
    let v = 0
    let digits = 0
    while (i < end) {
      const c = s.charCodeAt(i)
      const h = c < 128 ? HEX_VALUE[c]! : -1
      if (h < 0) break
      if (++digits > 4) return false
      v = (v << 4) | h
      i++
    }
    if (digits === 0) return false
    if (i < end && s.charCodeAt(i) === CH_DOT) {
      // A dotted IPv4 may only fill the last two groups (RFC 4291 §2.2 form 3).
      if (n > 6) return false
      const v4 = scanIpv4(s, groupStart, end)
      if (v4 < 0) return false
      groups[n++] = v4 >>> 16
      groups[n++] = v4 & 0xffff
      i = end
      break
    }
    if (n === 8) return false
    groups[n++] = v
    if (i === end) break
    if (s.charCodeAt(i) !== CH_COLON) return false
    i++
    if (i < end && s.charCodeAt(i) === CH_COLON) {
      if (gap >= 0) return false
      gap = n
      i++
    } else if (i === end) {
      return false // trailing single colon
    }
  }
  if (gap < 0) {
    if (n !== 8) return false
  } else {
    // "::" stands for one or more zero groups, so at most seven groups may be written out.
    if (n > 7) return false
    const zeros = 8 - n
    for (let k = n - 1; k >= gap; k--) groups[k + zeros] = groups[k]!
    for (let k = gap; k < gap + zeros; k++) groups[k] = 0
  }
  for (let w = 0; w < 4; w++) out[offset + w] = ((groups[2 * w]! << 16) | groups[2 * w + 1]!) >>> 0
  return true
}

/**
 * Parses an IPv6 address into four big-endian u32 words.
 *
 * @example
 *   const w = new Uint32Array(4)
 *   parseIpv6('2001:db8::1', w) // true; w = [0x20010db8, 0, 0, 1]
 *   parseIpv6('fe80::1%eth0', w) // false (zone ids are refused)
 */
export function parseIpv6 (text: string, out: Uint32Array, offset = 0): boolean {
  return scanIpv6(text, 0, text.length, out, offset)
}

/**
 * True when the words hold an IPv4-mapped address (::ffff:0:0/96, RFC 4291 §2.5.5.2).
 *
 * @example
 *   isIpv4Mapped([0, 0, 0xffff, 0xc0000201]) // true (::ffff:192.0.2.1)
 */
export function isIpv4Mapped (w: ArrayLike<number>, offset = 0): boolean {
  return w[offset] === 0 && w[offset + 1] === 0 && w[offset + 2] === 0xffff
}

/**
 * Formats four big-endian u32 words as RFC 5952 text: lowercase, no leading zeros in a group,
 * the longest run of two or more zero groups (the first of equal runs) written as "::".
 *
 * @example
 *   formatIpv6([0x20010db8, 0, 0, 1]) // '2001:db8::1'
 *   formatIpv6([0x20010db8, 1, 0x10001, 0x10001]) // '2001:db8:0:1:1:1:1:1'
 */
export function formatIpv6 (w: ArrayLike<number>, offset = 0): string {
  for (let k = 0; k < 4; k++) {
    const word = w[offset + k]!
    groups[2 * k] = word >>> 16
    groups[2 * k + 1] = word & 0xffff
  }
  const [runStart, runLength] = findZeroRun(groups)
  let text = ''
  for (let k = 0; k < 8; k++) {
    if (k === runStart) {
      text += '::'
      k += runLength - 1
      continue
    }
    if (text.length > 0 && k !== runStart + runLength) text += ':'
    text += groups[k]!.toString(16)
  }
  return text
}

/**
 * The longest run of zero groups of length ≥ 2 (RFC 5952 §4.2.2–4.2.3), first of equals.
 * @returns [start, length], start -1 when there is none
 *
 * @example
 *   findZeroRun(Uint16Array.of(0x2001, 0xdb8, 0, 0, 1, 0, 0, 1)) // [2, 2]
 */
export function findZeroRun (g: Uint16Array): [number, number] {
  let bestStart = -1
  let bestLength = 1
  let k = 0
  while (k < 8) {
    if (g[k] !== 0) { k++; continue }
    const s = k
    while (k < 8 && g[k] === 0) k++
    if (k - s > bestLength) {
      bestStart = s
      bestLength = k - s
    }
  }
  return bestStart < 0 ? [-1, 0] : [bestStart, bestLength]
}
