/**
 * IP literals of the expression language against oracles: node:net decides which texts are
 * addresses, the WHATWG URL parser gives the RFC 5952 form of IPv6 (it compresses and
 * lowercases the same way), and netmask checks IPv4 network boundaries.
 */
import t from 'tap'
import fc from 'fast-check'
import { isIPv4, isIPv6 } from 'node:net'
import { Netmask } from 'netmask'
import { compareIp, formatIp, networkOf, parseIp } from '../../src/expr/ip.js'

const groups = fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 })
/** Random IPv6 text in the forms people write: full, zero-compressed, upper case, mixed. */
const ipv6Text = fc.tuple(groups, fc.nat(3), fc.boolean()).map(([g, form, upper]) => {
  let s = g.map((x) => x.toString(16)).join(':')
  if (form === 1) s = s.replace(/(^|:)0(:0)+(:|$)/, '::')
  if (form === 2) s = g.map((x) => x.toString(16).padStart(4, '0')).join(':')
  if (form === 3) s = `${g.slice(0, 6).map((x) => x.toString(16)).join(':')}:${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`
  return upper ? s.toUpperCase() : s
})

t.test('IPv6: accepts what node:net accepts, formats as RFC 5952', async () => {
  fc.assert(fc.property(ipv6Text, (s) => {
    const ip = parseIp(s)
    if (ip === undefined) throw new Error(`rejected ${s}`)
    const text = formatIp(ip)
    const whatwg = new URL(`http://[${s}]/`).hostname.slice(1, -1)
    const mapped = ip.words[0] === 0 && ip.words[1] === 0 && ip.words[2] === 0xffff
    // WHATWG writes ::ffff:102:304 where RFC 5952 §5 keeps the dotted quad.
    if (!mapped && text !== whatwg) throw new Error(`${s}: ${text} ≠ ${whatwg}`)
    if (formatIp(parseIp(text)!) !== text) throw new Error(`${text} does not round-trip`)
  }), { numRuns: 2000 })
})

t.test('IPv4 and IPv6 validity agree with node:net on random text', async () => {
  const alphabet = fc.constantFrom(...'0123456789abcdefABCDEF:.'.split(''), '00', '255', '256', '::', '1.2.3.4')
  fc.assert(fc.property(fc.array(alphabet, { maxLength: 20 }).map((xs) => xs.join('')), (s) => {
    const ours = parseIp(s) !== undefined
    // node:net accepts IPv4 octets with leading zeros ("01.2.3.4"); Rust and we do not.
    const leadingZeroOctet = (v4: string): boolean => /(^|\.)0\d/.test(v4)
    const tail = s.slice(s.lastIndexOf(':') + 1)
    const theirs = (isIPv4(s) && !leadingZeroOctet(s)) || (isIPv6(s) && !(tail.includes('.') && leadingZeroOctet(tail)))
    if (ours !== theirs) throw new Error(`${JSON.stringify(s)}: ours ${ours}, node:net ${theirs}`)
  }), { numRuns: 5000 })
})

t.test('table of edge cases', async (t) => {
  const cases: Array<[string, string | undefined]> = [
    ['0.0.0.0', '0.0.0.0'], ['255.255.255.255', '255.255.255.255'], ['1.2.3', undefined], ['1.2.3.4.5', undefined],
    ['01.2.3.4', undefined], ['1.2.3.256', undefined], ['1..2.3', undefined], ['', undefined],
    ['::', '::'], ['::1', '::1'], ['1::', '1::'], ['1:0:0:1:0:0:0:1', '1:0:0:1::1'], ['1:0:0:0:1:0:0:1', '1::1:0:0:1'],
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], ['::ffff:1.2.3.4', '::ffff:1.2.3.4'], ['::1.2.3.4', '::102:304'],
    [':::', undefined], ['1:2:3:4:5:6:7:8:9', undefined], ['1::2::3', undefined], ['12345::', undefined], ['fe80::1%eth0', undefined],
    ['1.2.3.4::', undefined], ['::1.2.3', undefined], ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'], ['::2:3:4:5:6:7:8', '0:2:3:4:5:6:7:8'],
  ]
  for (const [input, expected] of cases) {
    const ip = parseIp(input)
    t.equal(ip === undefined ? undefined : formatIp(ip), expected, JSON.stringify(input))
  }
})

t.test('IPv4 networks agree with netmask', async () => {
  fc.assert(fc.property(fc.nat(0xffffffff), fc.integer({ min: 0, max: 32 }), (n, bits) => {
    const text = [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.')
    const net = formatIp(networkOf(parseIp(text)!, bits))
    if (net !== new Netmask(`${text}/${bits}`).base) throw new Error(`${text}/${bits}: ${net}`)
  }), { numRuns: 2000 })
})

t.test('ordering is numeric', async (t) => {
  t.equal(compareIp(parseIp('9.0.0.0')!, parseIp('10.0.0.0')!), -1)
  t.equal(compareIp(parseIp('::2')!, parseIp('::10')!), -1)
  t.equal(compareIp(parseIp('10.0.0.1')!, parseIp('10.0.0.1')!), 0)
  t.equal(compareIp(parseIp('ff::')!, parseIp('f::')!), 1)
})
