/**
 * Bare value tokens → literals: integers (decimal, `0x` hex, leading-`0` octal, as wirefilter
 * lexes them), integer ranges `80..90`, IPv4/IPv6 addresses, CIDRs and IP ranges.
 *
 * A token is given as offsets into the text being lexed rather than as a string: it is parsed
 * from the text's bytes (TEXT, text.ts), and only what the AST keeps (an address's text) or
 * what a message quotes is ever sliced out of the text itself (`src`). IPv4, the common address, is handled as an unsigned 32-bit
 * number throughout (parse, host-bit mask, range order); IPv6 as four u32 words. Both are parsed
 * by src/net, the one home of address parsing.
 *
 * Integers are limited to JS safe integers (±2^53−1) where wirefilter allows i64: every Int
 * field of both schemes (ports, ASNs, sizes, codes, flags) lies far inside that range, and it
 * keeps the AST plain JSON for the stores and worker threads that carry it.
 */
import { CIDR_KIND, INT_KIND, INT_RANGE_KIND, IP_KIND, IP_RANGE_KIND, type CidrLit, type IntLit, type IntRangeLit, type IpLit, type IpRangeLit } from './ast.js'
import { fail } from './diagnostic.js'
import { formatIpv4, parseIpv4Bytes, readIpv4, scanIpv6 } from '../net/ip.js'
import { compare128 } from '../net/words.js'
import { formatIp, formatIpv6, hasHostBits, networkOf } from './ip.js'
import { TEXT } from './text.js'

export type BareLiteral = IntLit | IntRangeLit | IpLit | CidrLit | IpRangeLit

/** The bytes of the text being lexed: a constant of this module, see TEXT in text.ts. */
const CODES = TEXT
const DOT = 46
const COLON = 58
const SLASH = 47

/**
 * The kind (an ast.ts KIND bit) of the literal parseBareValue last returned, for callers that
 * need it without reading the literal's `kind` (see STRING_KIND). One object, overwritten by
 * each call: parsing is not re-entrant.
 */
export const parsed = { kind: 0 }

/** Classifies and parses the bare token at [start, end); fails with a message naming it. */
export function parseBareValue (src: string, start: number, end: number): BareLiteral {
  const common = parseCommon(src, start, end)
  if (common !== undefined) return common
  // One pass for the shape: where the first `..` is, whether what precedes it looks like an
  // address (a `.` or `:`), and where the colons (IPv6) and the first `/` (a prefix) are.
  // (CODES[end] is never a dot: a dot would have extended the token.)
  let dots = -1
  let address = false
  let firstColon = -1
  let lastColon = -1
  let slash = -1
  for (let i = start; i < end; i++) {
    const ch = CODES[i]
    if (ch === DOT) {
      if (dots !== -1) continue
      if (CODES[i + 1] === DOT) dots = i
      else address = true
    } else if (ch === COLON) {
      if (firstColon === -1) firstColon = i
      lastColon = i
      if (dots === -1) address = true
    } else if (ch === SLASH && slash === -1) {
      slash = i
    }
  }
  const c = CODES[start]!
  const startsWithLetter = (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95
  if (startsWithLetter && firstColon === -1) {
    const token = src.slice(start, end)
    if (token === 'true' || token === 'false') {
      fail(`${token} is not a value: test a Bool field by itself ("ssl", "not ssl")`, start)
    }
    fail(`expected a value, found ${token}: strings are quoted ("${token}")`, start)
  }
  if (address && dots === -1) {
    parsed.kind = slash === -1 ? IP_KIND : CIDR_KIND
    return parseIpOrCidr(src, start, end, slash, firstColon !== -1 && (slash === -1 || firstColon < slash))
  }
  if (address) {
    parsed.kind = IP_RANGE_KIND
    return parseIpRange(src, start, dots, end, firstColon !== -1 && firstColon < dots, lastColon > dots)
  }
  if (dots === -1) {
    parsed.kind = INT_KIND
    return { kind: 'int', value: parseInteger(src, start, end), pos: start }
  }
  parsed.kind = INT_RANGE_KIND
  const from = parseInteger(src, start, dots)
  const to = parseInteger(src, dots + 2, end)
  if (from > to) fail(`range ${src.slice(start, end)} starts above its end`, start)
  return { kind: 'int_range', from, to, pos: start }
}

/**
 * The values rules are mostly made of, parsed in one pass over their bytes: a decimal integer
 * (without a leading zero) or range of them, an IPv4 address, network or range. Anything else,
 * and anything invalid, is undefined: parseBareValue then classifies it and parses it (or words
 * the error) the general way, so this answers only where it gives that way's answer. (The
 * general way reads a token twice, once for its shape and once to parse it; that first pass,
 * with a branch per byte on its class, measured 2 % of a whole check.)
 */
function parseCommon (src: string, start: number, end: number): BareLiteral | undefined {
  let i = start
  let ch = CODES[i]!
  if (ch < 49 || ch > 57) return undefined // not 1–9: a leading 0 (octal, hex, a 0 octet), a sign, a letter…
  let v = 0
  do {
    v = v * 10 + (ch - 48)
    ch = CODES[++i]!
  } while (i < end && ch >= 48 && ch <= 57)
  if (i === end) {
    if (v > Number.MAX_SAFE_INTEGER) return undefined
    parsed.kind = INT_KIND
    return { kind: 'int', value: v, pos: start }
  }
  if (ch !== DOT) return undefined
  if (CODES[i + 1] === DOT) {
    // from..to: `to` also decimal, without a leading zero, and not below `from`.
    let j = i + 2
    let to = 0
    if (j === end || CODES[j]! < 49 || CODES[j]! > 57) return undefined
    for (; j < end; j++) {
      const d = CODES[j]! - 48
      if (d < 0 || d > 9) return undefined
      to = to * 10 + d
    }
    if (v > to || to > Number.MAX_SAFE_INTEGER) return undefined
    parsed.kind = INT_RANGE_KIND
    return { kind: 'int_range', from: v, to, pos: start }
  }
  const quadEnd = readIpv4(CODES, start, end, quad)
  if (quadEnd < 0) return undefined
  const ip = quad[0]!
  if (quadEnd === end) {
    parsed.kind = IP_KIND
    return { kind: 'ip', address: src.slice(start, end), pos: start }
  }
  if (CODES[quadEnd] === SLASH) {
    const prefix = parsePrefix(quadEnd + 1, end)
    if (prefix < 0 || prefix > 32) return undefined
    const net = prefix === 0 ? 0 : (ip & (0xffffffff << (32 - prefix))) >>> 0
    if (net !== ip) return undefined // host bits set (see parseIpOrCidr)
    parsed.kind = CIDR_KIND
    return { kind: 'cidr', address: src.slice(start, quadEnd), prefix, pos: start }
  }
  if (CODES[quadEnd] === DOT && CODES[quadEnd + 1] === DOT && readIpv4(CODES, quadEnd + 2, end, quad) === end && ip <= quad[0]!) {
    parsed.kind = IP_RANGE_KIND
    return { kind: 'ip_range', from: src.slice(start, quadEnd), to: src.slice(quadEnd + 2, end), pos: start }
  }
  return undefined
}

/**
 * The value of the dotted quad readIpv4 last read. In a typed array rather than a variable:
 * a module variable holds a number above 2^30 as a heap object, allocated at each store.
 */
const quad = new Uint32Array(1)

/** [start, end) as `123`, `-5`, `0x1f` or `017` (octal: a leading zero means base 8, as in wirefilter). */
export function parseInteger (src: string, start: number, end: number): number {
  let i = start
  const negative = CODES[i] === 45 /* - */
  if (negative) i++
  let radix = 10
  if (i + 1 < end && CODES[i] === 48 /* 0 */ && CODES[i + 1] === 120 /* x */) {
    radix = 16
    i += 2
  } else if (i + 1 < end && CODES[i] === 48) {
    radix = 8
    i += 1
  }
  if (i >= end) fail(`invalid integer ${JSON.stringify(src.slice(start, end))}`, start)
  let v = 0
  for (; i < end; i++) {
    const ch = CODES[i]!
    const d = ch >= 48 && ch <= 57 ? ch - 48 : ch >= 97 && ch <= 102 ? ch - 87 : ch >= 65 && ch <= 70 ? ch - 55 : 99
    if (d >= radix) {
      const s = src.slice(start, end)
      if (radix === 8 && d < 10) fail(`invalid octal integer ${s} (a leading 0 means octal)`, start)
      fail(`invalid integer ${JSON.stringify(s)}`, start)
    }
    v = v * radix + d
  }
  if (v > Number.MAX_SAFE_INTEGER) fail(`integer ${src.slice(start, end)} is out of range (at most ±${Number.MAX_SAFE_INTEGER})`, start)
  return negative ? -v : v
}

/**
 * The words of the IPv6 addresses being parsed: a range has two. Reused, because a literal's
 * AST keeps only its text; parsing is not re-entrant, so one pair is enough.
 */
const FROM = new Uint32Array(4)
const TO = new Uint32Array(4)
/** parseAddress's result for an IPv6 address (its words are in the array it was given). */
const V6 = -1

/**
 * `from..to`, the `..` at `dots`; `fromV6`, `toV6`: whether each end has a colon. Both ends are
 * parsed (and their errors reported) before they are compared.
 */
function parseIpRange (src: string, start: number, dots: number, end: number, fromV6: boolean, toV6: boolean): IpRangeLit {
  const from = parseAddress(src, start, dots, fromV6, FROM)
  const to = parseAddress(src, dots + 2, end, toV6, TO)
  if ((from === V6) !== (to === V6)) fail(`IP range ${src.slice(start, end)} mixes IPv4 and IPv6`, start)
  const order = from === V6 ? compare128(FROM, 0, TO, 0) : from - to
  if (order > 0) fail(`IP range ${src.slice(start, end)} starts above its end`, start)
  return { kind: 'ip_range', from: canonical(from, FROM, src, start, dots), to: canonical(to, TO, src, dots + 2, end), pos: start }
}

/** An address, or a CIDR when there is a `slash`; `v6`: whether the address has a colon. */
function parseIpOrCidr (src: string, start: number, end: number, slash: number, v6: boolean): IpLit | CidrLit {
  if (slash === -1) return { kind: 'ip', address: canonical(parseAddress(src, start, end, v6, FROM), FROM, src, start, end), pos: start }
  const ip = parseAddress(src, start, slash, v6, FROM)
  const v4 = ip !== V6
  const max = v4 ? 32 : 128
  const prefix = parsePrefix(slash + 1, end)
  if (prefix < 0 || prefix > max) {
    fail(`invalid prefix length /${src.slice(slash + 1, end)} for IPv${v4 ? 4 : 6} (0–${max})`, slash + 1)
  }
  // wirefilter (the cidr crate) rejects host bits too: 10.0.0.1/8 is more likely a typo than a
  // request for 10.0.0.0/8, so say which network it would be instead of guessing.
  if (v4) {
    const net = prefix === 0 ? 0 : (ip & (0xffffffff << (32 - prefix))) >>> 0
    if (net !== ip) fail(`${src.slice(start, end)} has host bits set; the network is ${formatIpv4(net)}/${prefix}`, start)
  } else if (hasHostBits(FROM, prefix)) {
    const net = networkOf({ version: 6, words: Array.from(FROM) }, prefix)
    fail(`${src.slice(start, end)} has host bits set; the network is ${formatIp(net)}/${prefix}`, start)
  }
  return { kind: 'cidr', address: canonical(ip, FROM, src, start, slash), prefix, pos: start }
}

/** Prefix length digits in CODES[start, end): 1 to 3 decimal digits without a leading zero; -1 otherwise. */
function parsePrefix (start: number, end: number): number {
  const len = end - start
  if (len === 0 || len > 3) return -1
  let prefix = 0
  for (let i = start; i < end; i++) {
    const d = CODES[i]! - 48
    if (d < 0 || d > 9 || (i === start && d === 0 && len > 1)) return -1
    prefix = prefix * 10 + d
  }
  return prefix
}

/**
 * An address in [start, end): IPv4 as an unsigned 32-bit number; IPv6 as V6, its words
 * written to `words`. The family is the caller's finding (`v6`: the text has a colon), so
 * that the message names the family meant.
 */
function parseAddress (src: string, start: number, end: number, v6: boolean, words: Uint32Array): number {
  if (!v6) {
    const n = parseIpv4Bytes(CODES, start, end)
    if (n < 0) fail(`invalid IPv4 address ${src.slice(start, end)}`, start)
    return n
  }
  if (!scanIpv6(src, start, end, words)) fail(`invalid IPv6 address ${src.slice(start, end)}`, start)
  return V6
}

/** The strict IPv4 parser accepts only the canonical dotted quad, so its text is already canonical. */
function canonical (ip: number, v6: Uint32Array, src: string, start: number, end: number): string {
  return ip === V6 ? formatIpv6(v6) : src.slice(start, end)
}
