/**
 * Bare value tokens → literals: integers (decimal, `0x` hex, leading-`0` octal, as wirefilter
 * lexes them), integer ranges `80..90`, IPv4/IPv6 addresses, CIDRs and IP ranges.
 *
 * Integers are limited to JS safe integers (±2^53−1) where wirefilter allows i64: every Int
 * field of both schemes (ports, ASNs, sizes, codes, flags) lies far inside that range, and it
 * keeps the AST plain JSON for the stores and worker threads that carry it.
 */
import type { CidrLit, IntLit, IntRangeLit, IpLit, IpRangeLit } from './ast.js'
import { fail } from './diagnostic.js'
import { compareIp, formatIp, maxPrefix, networkOf, parseIp, type ParsedIp } from './ip.js'

export type BareLiteral = IntLit | IntRangeLit | IpLit | CidrLit | IpRangeLit

/** Classifies and parses a bare token read at `pos`; fails with a message naming the token. */
export function parseBareValue (token: string, pos: number): BareLiteral {
  const c = token.charCodeAt(0)
  const startsWithLetter = (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95
  if (startsWithLetter && token.indexOf(':') === -1) {
    if (token === 'true' || token === 'false') {
      fail(`${token} is not a value: test a Bool field by itself ("ssl", "not ssl")`, pos)
    }
    fail(`expected a value, found ${token}: strings are quoted ("${token}")`, pos)
  }
  // One pass for the shape: where `..` is, and whether what precedes it looks like an address.
  let dots = -1
  let address = false
  for (let i = 0; i < token.length; i++) {
    const ch = token.charCodeAt(i)
    if (ch === 46 /* . */) {
      if (token.charCodeAt(i + 1) === 46) { dots = i; break }
      address = true
    } else if (ch === 58 /* : */) {
      address = true
    }
  }
  if (address) return parseIpValue(token, dots, pos)
  if (dots === -1) return { kind: 'int', value: parseInteger(token, pos), pos }
  const from = parseInteger(token.slice(0, dots), pos)
  const to = parseInteger(token.slice(dots + 2), pos + dots + 2)
  if (from > to) fail(`range ${token} starts above its end`, pos)
  return { kind: 'int_range', from, to, pos }
}

/** `123`, `-5`, `0x1f`, `017` (octal: a leading zero means base 8, as in wirefilter). */
export function parseInteger (s: string, pos: number): number {
  let i = 0
  const negative = s.charCodeAt(0) === 45 /* - */
  if (negative) i = 1
  let radix = 10
  if (s.charCodeAt(i) === 48 /* 0 */ && s.charCodeAt(i + 1) === 120 /* x */) {
    radix = 16
    i += 2
  } else if (s.charCodeAt(i) === 48 && s.length > i + 1) {
    radix = 8
    i += 1
  }
  if (i >= s.length) fail(`invalid integer ${JSON.stringify(s)}`, pos)
  let v = 0
  for (; i < s.length; i++) {
    const ch = s.charCodeAt(i)
    const d = ch >= 48 && ch <= 57 ? ch - 48 : ch >= 97 && ch <= 102 ? ch - 87 : ch >= 65 && ch <= 70 ? ch - 55 : 99
    if (d >= radix) {
      if (radix === 8 && d < 10) fail(`invalid octal integer ${s} (a leading 0 means octal)`, pos)
      fail(`invalid integer ${JSON.stringify(s)}`, pos)
    }
    v = v * radix + d
  }
  if (v > Number.MAX_SAFE_INTEGER) fail(`integer ${s} is out of range (at most ±${Number.MAX_SAFE_INTEGER})`, pos)
  return negative ? -v : v
}

function parseIpValue (token: string, dots: number, pos: number): IpLit | CidrLit | IpRangeLit {
  if (dots !== -1) {
    const from = parseAddress(token.slice(0, dots), pos)
    const to = parseAddress(token.slice(dots + 2), pos + dots + 2)
    if (from.version !== to.version) fail(`IP range ${token} mixes IPv4 and IPv6`, pos)
    if (compareIp(from, to) > 0) fail(`IP range ${token} starts above its end`, pos)
    return { kind: 'ip_range', from: canonical(from, token.slice(0, dots)), to: canonical(to, token.slice(dots + 2)), pos }
  }
  const slash = token.indexOf('/')
  if (slash === -1) return { kind: 'ip', address: canonical(parseAddress(token, pos), token), pos }
  const ip = parseAddress(token.slice(0, slash), pos)
  const bits = token.slice(slash + 1)
  const max = maxPrefix(ip)
  let prefix = bits.length === 0 || bits.length > 3 ? -1 : 0
  for (let i = 0; i < bits.length && prefix >= 0; i++) {
    const d = bits.charCodeAt(i) - 48
    prefix = d >= 0 && d <= 9 && !(i === 0 && d === 0 && bits.length > 1) ? prefix * 10 + d : -1
  }
  if (prefix < 0 || prefix > max) {
    fail(`invalid prefix length /${bits} for IPv${ip.version} (0–${max})`, pos + slash + 1)
  }
  const net = networkOf(ip, prefix)
  if (compareIp(net, ip) !== 0) {
    // wirefilter (the cidr crate) rejects host bits too: 10.0.0.1/8 is more likely a typo
    // than a request for 10.0.0.0/8, so say which network it would be instead of guessing.
    fail(`${token} has host bits set; the network is ${formatIp(net)}/${prefix}`, pos)
  }
  return { kind: 'cidr', address: canonical(ip, token.slice(0, slash)), prefix, pos }
}

/** The strict IPv4 parser accepts only the canonical dotted quad, so its text is already canonical. */
function canonical (ip: ParsedIp, text: string): string {
  return ip.version === 4 ? text : formatIp(ip)
}

function parseAddress (s: string, pos: number): ParsedIp {
  const ip = parseIp(s)
  if (ip === undefined) fail(`invalid ${s.indexOf(':') === -1 ? 'IPv4' : 'IPv6'} address ${s}`, pos)
  return ip
}
