/**
 * Every place that reads IPv4 text — single addresses (net/ip.ts), coalesce input lines
 * (scan-lines.ts), a feed's targets (compute-networks.ts) and expression literals (expr) — goes
 * through the one parser in net/ip.ts. Before it did, each had its own; they accepted the same
 * language (strict dotted quad, no leading zeros, no hex or integer forms), and this table holds
 * every entry point to that language, with the address each one reads.
 */
import t from 'tap'
import { parseIpv4, parseIpv4Bytes, readIpv4, readPrefixLength, scanIpv4, scanIpv6 } from '../../src/net/ip.js'
import { NetworkSetBuilder } from '../../src/net/network-set.js'
import { scanLines } from '../../src/net/scan-lines.js'
import { computeNetworks } from '../../src/feed/render/compute-networks.js'
import { checkExpression } from '../../src/expr/check.js'
import { parseIp } from '../../src/expr/ip.js'
import type { TargetGroup } from '../../src/pool/protocol.js'

const cases: { description: string, input: string, expected: number }[] = [
  { description: 'plain', input: '192.0.2.1', expected: 0xc0000201 },
  { description: 'zero', input: '0.0.0.0', expected: 0 },
  { description: 'broadcast', input: '255.255.255.255', expected: 0xffffffff },
  { description: 'three-digit octets', input: '100.200.250.199', expected: 0x64c8fac7 },
  { description: 'leading zero (octal to inet_aton)', input: '010.1.1.1', expected: -1 },
  { description: 'leading zero in the last octet', input: '1.1.1.01', expected: -1 },
  { description: 'double zero', input: '1.00.1.1', expected: -1 },
  { description: 'octet over 255', input: '1.1.1.256', expected: -1 },
  { description: 'first octet over 255', input: '300.1.1.1', expected: -1 },
  { description: 'four-digit octet', input: '1.1.1.1000', expected: -1 },
  { description: 'four digits with leading zero', input: '1.1.1.0255', expected: -1 },
  { description: 'hex form', input: '0x0a000001', expected: -1 },
  { description: 'hex octet', input: '0xa.0.0.1', expected: -1 },
  { description: 'integer form', input: '167772161', expected: -1 },
  { description: 'three octets', input: '10.0.1', expected: -1 },
  { description: 'five octets', input: '1.2.3.4.5', expected: -1 },
  { description: 'trailing dot', input: '1.2.3.4.', expected: -1 },
  { description: 'leading dot', input: '.1.2.3.4', expected: -1 },
  { description: 'empty octet', input: '1..3.4', expected: -1 },
  { description: 'letter in an octet', input: '1.2.3.a', expected: -1 },
  { description: 'fullwidth digit', input: '１.2.3.4', expected: -1 },
  { description: 'dotless i after a digit', input: '1.2.3.4ı', expected: -1 },
]

const out = new Uint32Array(2)

t.test('the string and byte entry points of net/ip.ts', async (t) => {
  for (const c of cases) {
    const bytes = Buffer.from(c.input)
    t.equal(parseIpv4(c.input), c.expected, `parseIpv4: ${c.description}`)
    t.equal(scanIpv4(`[${c.input}]`, 1, c.input.length + 1), c.expected, `scanIpv4 in place: ${c.description}`)
    t.equal(parseIpv4Bytes(bytes, 0, bytes.length), c.expected, `parseIpv4Bytes: ${c.description}`)
    // readIpv4 stops after the fourth octet; a valid quad is read to its end.
    const end = readIpv4(bytes, 0, bytes.length, out)
    if (c.expected >= 0) t.same([end, out[0]], [bytes.length, c.expected], `readIpv4: ${c.description}`)
    const cidr = Buffer.from(`${c.input}/24`)
    const quadEnd = readIpv4(cidr, 0, cidr.length, out)
    const cidrEnd = quadEnd < 0 ? -1 : readPrefixLength(cidr, quadEnd, cidr.length, 32, out)
    t.equal(cidrEnd === cidr.length && out[0] === c.expected && out[1] === 24, c.expected >= 0, `readIpv4 with a prefix length: ${c.description}`)
    // The dotted tail of IPv6 text is the same parser.
    const w = new Uint32Array(4)
    const v6 = scanIpv6(`::ffff:${c.input}`, 0, c.input.length + 7, w)
    t.equal(v6 ? w[3] : -1, c.expected, `IPv6 dotted tail: ${c.description}`)
  }
})

t.test('coalesce input lines (scan-lines.ts, fast and general paths)', async (t) => {
  for (const c of cases) {
    // Bare (fast path), then with a comment (general path).
    for (const line of [c.input, `${c.input} # note`]) {
      const b = new NetworkSetBuilder()
      const r = scanLines(Buffer.from(`${line}\n`), b, () => {})
      const text = b.build().toLines()
      t.same({ invalid: r.invalid, text }, c.expected >= 0 ? { invalid: 0, text: `${c.input}/32\n` } : { invalid: 1, text: '' }, `${JSON.stringify(line)}: ${c.description}`)
    }
  }
})

t.test('feed targets (compute-networks.ts)', async (t) => {
  for (const c of cases) {
    const group: TargetGroup = { confidence: 'high', severity: 'high', ips: `${c.input}\n${c.input}/24\n`, asns: [], countries: [] }
    const r = computeNetworks({ geo: { version: 1 }, block: [group], allow: [], carve: { ...group, ips: '' }, meta: '' }, null)
    const v4 = [...r.block.total.v4]
    t.same({ invalid: r.invalid, v4 }, c.expected >= 0 ? { invalid: 0, v4: [(c.expected & 0xffffff00) >>> 0, 24] } : { invalid: 2, v4: [] }, c.description)
  }
})

t.test('expression literals (expr)', async (t) => {
  for (const c of cases) {
    t.equal(parseIp(c.input)?.words[0] ?? -1, c.expected, `parseIp: ${c.description}`)
    // An address, a set member, a range end: all three literal forms reach the parser.
    for (const text of [`ip.src eq ${c.input}`, `ip.src in {${c.input} 192.0.2.0/24}`, `ip.src in {0.0.0.0..${c.input}}`]) {
      t.equal(checkExpression('waf_rule', text).ok, c.expected >= 0, `${JSON.stringify(text)}: ${c.description}`)
    }
  }
})
