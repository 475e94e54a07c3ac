/**
 * Signal targets (SPEC 2.1 `ip`, 2.3 `rule.target.ip`): an address or a CIDR, normalized and
 * refused as DECISIONS §3 says. On top of the general notation rules of cidr.ts, a target may not
 * be wider than an IPv4 /8 or an IPv6 /12 — the floor of Cloudflare's IP lists — so that one
 * signal cannot block the Internet. Ranges are not targets.
 */
import { FIRST, INTERVAL_WORDS, PREFIX_LENGTH, scanCidr } from './cidr.js'
import { explainInvalid } from './explain.js'
import { formatCidr4, formatCidr6 } from './format.js'

export const MIN_TARGET_PREFIX_V4 = 8
export const MIN_TARGET_PREFIX_V6 = 12

export type TargetResult =
  | { ok: true, cidr: string, family: 4 | 6 }
  | { ok: false, reason: string }

const interval = new Uint32Array(INTERVAL_WORDS)

/**
 * Normalizes a signal target to CIDR text, or says why it is refused.
 *
 * @example
 *   parseTarget('10.0.0.1/8')      // { ok: true, cidr: '10.0.0.0/8', family: 4 }
 *   parseTarget('::ffff:192.0.2.1') // { ok: true, cidr: '192.0.2.1/32', family: 4 }
 *   parseTarget('2001:DB8::1')     // { ok: true, cidr: '2001:db8::1/128', family: 6 }
 *   parseTarget('0.0.0.0/0')       // { ok: false, reason: 'IPv4 prefixes shorter than /8 are refused' }
 */
export function parseTarget (text: string): TargetResult {
  if (typeof text !== 'string') return { ok: false, reason: 'must be a string' }
  const family = scanCidr(text, 0, text.length, interval)
  if (family === 0) return { ok: false, reason: explainInvalid(text) }
  const len = interval[PREFIX_LENGTH]!
  if (family === 4) {
    if (len < MIN_TARGET_PREFIX_V4) return { ok: false, reason: `IPv4 prefixes shorter than /${MIN_TARGET_PREFIX_V4} are refused` }
    return { ok: true, cidr: formatCidr4(interval[FIRST]!, len), family: 4 }
  }
  if (len < MIN_TARGET_PREFIX_V6) return { ok: false, reason: `IPv6 prefixes shorter than /${MIN_TARGET_PREFIX_V6} are refused` }
  return { ok: true, cidr: formatCidr6(interval, FIRST, len), family: 6 }
}
