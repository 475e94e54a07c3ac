/**
 * Network text: CIDRs as `addr/len` (hosts too: `/32`, `/128`, DECISIONS §5 `plain`) and the
 * `first-last` form that the `dialect_b` feed writes for anything wider than a host (SPEC 4.5).
 */
import { formatIpv4, formatIpv6 } from './ip.js'
import { lastV4, lastV6 } from './cidr.js'

/**
 * @example
 *   formatCidr4(0x0a000000, 8) // '10.0.0.0/8'
 */
export function formatCidr4 (addr: number, len: number): string {
  return `${formatIpv4(addr)}/${len}`
}

/**
 * @example
 *   formatCidr6([0x20010db8, 0, 0, 0], 0, 32) // '2001:db8::/32'
 */
export function formatCidr6 (words: ArrayLike<number>, offset: number, len: number): string {
  return `${formatIpv6(words, offset)}/${len}`
}

/**
 * First and last address of an IPv4 prefix, as `first-last`.
 *
 * @example
 *   formatRange4(0xc0000200, 24) // '192.0.2.0-192.0.2.255'
 */
export function formatRange4 (addr: number, len: number): string {
  return `${formatIpv4(addr)}-${formatIpv4(lastV4(addr, len))}`
}

const last6 = new Uint32Array(4)

/**
 * First and last address of an IPv6 prefix, as `first-last`.
 *
 * @example
 *   formatRange6([0x20010db8, 0, 0, 0], 0, 64) // '2001:db8::-2001:db8::ffff:ffff:ffff:ffff'
 */
export function formatRange6 (words: ArrayLike<number>, offset: number, len: number): string {
  lastV6(words, offset, len, last6, 0)
  return `${formatIpv6(words, offset)}-${formatIpv6(last6, 0)}`
}
