/**
 * The address space `--reject-special` keeps out of a feed (issue 21): the rows of the IANA
 * special-purpose address registries (RFC 6890 and its updates) that are not globally reachable,
 * less the more specific rows inside them that are (192.0.0.9/32 inside 192.0.0.0/24, say), plus
 * multicast (224.0.0.0/4, ff00::/8), which has registries of its own.
 *
 * Transcribed from the registries' CSV files as of 2026-07-18:
 * @see https://www.iana.org/assignments/iana-ipv4-special-registry/iana-ipv4-special-registry-1.csv
 * @see https://www.iana.org/assignments/iana-ipv6-special-registry/iana-ipv6-special-registry-1.csv
 * test/fixtures/iana/ holds those files; test/http/feed-guards.test.ts checks specialSpace() against the set derived from them.
 * Rows whose Globally Reachable is N/A (6to4, Teredo) or blank (terminated rows) are not here, nor
 * is ::ffff:0:0/96: a feed never holds IPv4-mapped addresses (targets are stored as IPv4, DECISIONS
 * §3), and address parsing reads that block as IPv4 itself, 0.0.0.0/0.
 */
import { NetworkSet } from '../../net/network-set.js'

/** Globally Reachable = False (with or without a footnote). */
export const NOT_GLOBALLY_REACHABLE: readonly string[] = [
  '0.0.0.0/8', '0.0.0.0/32', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12',
  '192.0.0.0/24', '192.0.0.0/29', '192.0.0.8/32', '192.0.0.170/32', '192.0.0.171/32', '192.0.2.0/24', '192.88.99.2/32',
  '192.168.0.0/16', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '240.0.0.0/4', '255.255.255.255/32',
  '::1/128', '::/128', '64:ff9b:1::/48', '100::/64', '100:0:0:1::/64', '2001::/23', '2001:2::/48',
  '2001:db8::/32', '3fff::/20', '5f00::/16', 'fc00::/7', 'fe80::/10',
]

/** Globally Reachable = True: carved back out of the rows above that hold them. */
export const GLOBALLY_REACHABLE: readonly string[] = [
  '192.0.0.9/32', '192.0.0.10/32', '192.31.196.0/24', '192.52.193.0/24', '192.175.48.0/24',
  '64:ff9b::/96', '2001:1::1/128', '2001:1::2/128', '2001:1::3/128', '2001:3::/32', '2001:4:112::/48',
  '2001:20::/28', '2001:30::/28', '2620:4f:8000::/48',
]

/** Multicast: RFC 5771 (IPv4) and RFC 4291 §2.7 (IPv6). */
export const MULTICAST: readonly string[] = ['224.0.0.0/4', 'ff00::/8']

let special: NetworkSet | null = null

/**
 * The special space as one set (built once per thread).
 *
 * @example
 *   specialSpace().has('10.1.2.3') // true
 */
export function specialSpace (): NetworkSet {
  special ??= NetworkSet.parse(NOT_GLOBALLY_REACHABLE).subtract(NetworkSet.parse(GLOBALLY_REACHABLE)).union(NetworkSet.parse(MULTICAST))
  return special
}
