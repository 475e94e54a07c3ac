/**
 * Why a network text was refused, in a short human sentence. The scanners in cidr.ts only say
 * yes or no — they run per line of a million-line input — so this cold path re-reads a text
 * that is already known to be invalid and names the first rule it breaks (DECISIONS §3).
 * Splits and regexes are fine here: it runs once per refused entry.
 */
import { parseIpv4, parseIpv6 } from './ip.js'

// C0 and C1 controls, DEL, and the Unicode spaces (incl. NBSP and the BOM).
// eslint-disable-next-line no-control-regex
const WHITESPACE_OR_CONTROL = /[\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/

/**
 * @param opts.ranges  whether `first-last` is an accepted form (the coalesce input; not targets),
 *                     with blanks allowed around the dash
 * @example
 *   explainInvalid('10.0.0.0/33') // 'prefix length 33 is out of range for IPv4'
 *   explainInvalid('fe80::1%eth0') // 'zone ids are not allowed'
 */
export function explainInvalid (text: string, opts: { ranges?: boolean } = {}): string {
  if (text.length === 0) return 'empty string'
  const ranges = opts.ranges === true
  const compact = ranges ? text.replace(/[ \t]*-[ \t]*/, '-') : text
  if (WHITESPACE_OR_CONTROL.test(compact)) return 'whitespace and control characters are not allowed'
  if (compact.includes('%')) return 'zone ids are not allowed'
  if (compact.includes('-')) {
    if (!ranges) return 'ranges are not allowed here; use an address or a CIDR'
    return explainRange(compact)
  }
  const slash = compact.indexOf('/')
  if (slash < 0) return explainAddress(compact) ?? 'not an IP address'
  const addr = compact.slice(0, slash)
  const why = explainAddress(addr)
  if (why !== null) return why
  return explainPrefixLength(compact.slice(slash + 1), addr.includes(':') ? 6 : 4) ?? 'not a CIDR'
}

function explainRange (text: string): string {
  const parts = text.split('-')
  if (parts.length !== 2) return 'a range has exactly one "-"'
  const [a = '', b = ''] = parts
  if (a.includes('/') || b.includes('/')) return 'range ends must be addresses, not CIDRs'
  const why = explainAddress(a) ?? explainAddress(b)
  if (why !== null) return why
  const fa = familyOf(a)
  const fb = familyOf(b)
  if (fa !== fb) return 'range ends must be of the same family'
  return 'range start is after its end'
}

/** 4 or 6 after IPv4-mapped normalization, for a valid address. */
function familyOf (addr: string): 4 | 6 {
  if (!addr.includes(':')) return 4
  const w = new Uint32Array(4)
  parseIpv6(addr, w)
  return w[0] === 0 && w[1] === 0 && w[2] === 0xffff ? 4 : 6
}

/** The reason an address is invalid, or null when it is valid. */
function explainAddress (addr: string): string | null {
  if (addr.length === 0) return 'empty address'
  if (addr.includes(':')) {
    if (parseIpv6(addr, new Uint32Array(4))) return null
    const lastColon = addr.lastIndexOf(':')
    const tail = addr.slice(lastColon + 1)
    if (tail.includes('.')) {
      const why = explainIpv4(tail)
      if (why !== null) return why
    }
    return 'invalid IPv6 address'
  }
  return explainIpv4(addr)
}

function explainIpv4 (addr: string): string | null {
  if (parseIpv4(addr) >= 0) return null
  if (/^[0-9]+$/.test(addr)) return 'IPv4 addresses in integer form are not allowed'
  if (/(^|\.)0x/i.test(addr)) return 'IPv4 addresses in hex form are not allowed'
  if (/[^0-9.]/.test(addr)) return 'not an IP address'
  const octets = addr.split('.')
  if (octets.length !== 4 || octets.includes('')) return 'an IPv4 address has four dotted octets'
  for (const o of octets) {
    if (o.length > 1 && o.startsWith('0')) return 'IPv4 octets with leading zeros are not allowed'
  }
  for (const o of octets) {
    if (Number(o) > 255) return `IPv4 octet ${o} is out of range`
  }
  return 'not an IP address'
}

function explainPrefixLength (p: string, family: 4 | 6): string | null {
  if (p.length === 0) return 'missing prefix length after "/"'
  if (!/^[0-9]+$/.test(p)) return `invalid prefix length "${p}"`
  if (p.length > 1 && p.startsWith('0')) return 'prefix lengths with leading zeros are not allowed'
  const max = family === 4 ? 32 : 128
  if (Number(p) > max) return `prefix length ${p} is out of range for IPv${family}`
  return null
}
