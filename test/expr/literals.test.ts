/**
 * Bare values — integers, integer ranges, IPv4 addresses, networks and ranges — as the parser
 * reads them in a set: the common shapes are parsed in one pass, everything else the general
 * way, and both must agree, at every boundary of the one-pass shapes (leading zeros, octets
 * above 255, prefixes, host bits, range order, the largest safe integer). The property tests
 * compare with oracles written here from the rules, not from the parser.
 */
import t from 'tap'
import fc from 'fast-check'
import { checkExpression, type RuleKind } from '../../src/expr/check.js'

/** The first item of `<field> in {<token>}`, without its offset, or the message without its position. */
function read (field: string, token: string): unknown {
  const r = checkExpression('smart_firewall_rule' as RuleKind, `${field} in {${token}}`)
  if (!r.ok) return r.error.message.replace(/ at \d+:\d+$/, '')
  if (r.ast.kind !== 'compare' || r.ast.rhs.kind !== 'set') throw new Error(`not a set: ${JSON.stringify(r.ast)}`)
  const { pos: _, ...item } = r.ast.rhs.items[0]!
  return item
}

const ints: ReadonlyArray<[string, unknown]> = [
  ['443', { kind: 'int', value: 443 }],
  ['0', { kind: 'int', value: 0 }],
  ['017', { kind: 'int', value: 15 }],
  ['0x1f', { kind: 'int', value: 31 }],
  ['-5', { kind: 'int', value: -5 }],
  ['9007199254740991', { kind: 'int', value: 9007199254740991 }],
  ['9007199254740992', 'integer 9007199254740992 is out of range (at most ±9007199254740991)'],
  ['99999999999999999999', 'integer 99999999999999999999 is out of range (at most ±9007199254740991)'],
  ['80..90', { kind: 'int_range', from: 80, to: 90 }],
  ['1..1', { kind: 'int_range', from: 1, to: 1 }],
  ['90..80', 'range 90..80 starts above its end'],
  ['80..090', 'invalid octal integer 090 (a leading 0 means octal)'],
  ['80..0x60', { kind: 'int_range', from: 80, to: 96 }],
  ['8..9007199254740992', 'integer 9007199254740992 is out of range (at most ±9007199254740991)'],
  ['12a', 'invalid integer "12a"'],
]

const ips: ReadonlyArray<[string, unknown]> = [
  ['10.0.0.1', { kind: 'ip', address: '10.0.0.1' }],
  ['0.0.0.0', { kind: 'ip', address: '0.0.0.0' }],
  ['255.255.255.255', { kind: 'ip', address: '255.255.255.255' }],
  ['256.1.1.1', 'invalid IPv4 address 256.1.1.1'],
  ['1.2.3.256', 'invalid IPv4 address 1.2.3.256'],
  ['1000.1.1.1', 'invalid IPv4 address 1000.1.1.1'],
  ['1.2.3.04', 'invalid IPv4 address 1.2.3.04'],
  ['01.2.3.4', 'invalid IPv4 address 01.2.3.4'],
  ['1.2.3', 'invalid IPv4 address 1.2.3'],
  ['1.2.3.4.5', 'invalid IPv4 address 1.2.3.4.5'],
  ['1.2.3.4x', 'invalid IPv4 address 1.2.3.4x'],
  ['10.0.0.0/8', { kind: 'cidr', address: '10.0.0.0', prefix: 8 }],
  ['1.2.3.4/32', { kind: 'cidr', address: '1.2.3.4', prefix: 32 }],
  ['0.0.0.0/0', { kind: 'cidr', address: '0.0.0.0', prefix: 0 }],
  ['128.0.0.0/1', { kind: 'cidr', address: '128.0.0.0', prefix: 1 }],
  ['10.0.0.1/8', '10.0.0.1/8 has host bits set; the network is 10.0.0.0/8'],
  ['1.2.3.4/0', '1.2.3.4/0 has host bits set; the network is 0.0.0.0/0'],
  ['255.255.255.255/31', '255.255.255.255/31 has host bits set; the network is 255.255.255.254/31'],
  ['1.2.3.0/33', 'invalid prefix length /33 for IPv4 (0–32)'],
  ['1.2.3.0/024', 'invalid prefix length /024 for IPv4 (0–32)'],
  ['1.2.3.0/', 'invalid prefix length / for IPv4 (0–32)'],
  ['1.2.3.0/8..9', 'invalid IPv4 address 1.2.3.0/8'],
  ['1.2.3.4..1.2.3.9', { kind: 'ip_range', from: '1.2.3.4', to: '1.2.3.9' }],
  ['1.2.3.4..1.2.3.4', { kind: 'ip_range', from: '1.2.3.4', to: '1.2.3.4' }],
  ['1.2.3.9..1.2.3.4', 'IP range 1.2.3.9..1.2.3.4 starts above its end'],
  ['1.2.3.4..1.2.3', 'invalid IPv4 address 1.2.3'],
  ['1.2.3.4..::1', 'IP range 1.2.3.4..::1 mixes IPv4 and IPv6'],
  ['2001:db8::/32', { kind: 'cidr', address: '2001:db8::', prefix: 32 }],
]

t.test('integers and integer ranges', async (t) => {
  for (const [token, expected] of ints) t.same(read('tcp.dstport', token), expected, token)
})

t.test('IPv4 addresses, networks and ranges', async (t) => {
  for (const [token, expected] of ips) t.same(read('ip.src', token), expected, token)
})

/** An octet as written: a number up to 300, sometimes with leading zeros. */
const octetText = fc.tuple(fc.nat(300), fc.nat(6)).map(([n, zeros]) => (zeros === 0 ? '0' : zeros === 1 ? '00' : '') + String(n))
const quadText = fc.array(octetText, { minLength: 4, maxLength: 4 }).map((o) => o.join('.'))

/** The oracle: the value of a strict dotted quad (no leading zeros, octets ≤ 255), or -1. */
function quadValue (text: string): number {
  const octets = text.split('.')
  if (octets.length !== 4 || !octets.every((o) => /^(0|[1-9][0-9]{0,2})$/.test(o) && Number(o) <= 255)) return -1
  return octets.reduce((acc, o) => acc * 256 + Number(o), 0)
}

t.test('dotted quads, networks and ranges agree with an oracle', async () => {
  fc.assert(fc.property(quadText, (text) => {
    const want = quadValue(text) < 0 ? `invalid IPv4 address ${text}` : { kind: 'ip', address: text }
    if (JSON.stringify(read('ip.src', text)) !== JSON.stringify(want)) throw new Error(text)
  }), { numRuns: 1000 })
  fc.assert(fc.property(quadText, fc.nat(34), (text, prefix) => {
    const ip = quadValue(text)
    const size = 2 ** (32 - Math.min(prefix, 32))
    const network = ip - (ip % size)
    const want = ip < 0
      ? `invalid IPv4 address ${text}`
      : prefix > 32
        ? `invalid prefix length /${prefix} for IPv4 (0–32)`
        : network !== ip
          ? `${text}/${prefix} has host bits set; the network is ${[24, 16, 8, 0].map((s) => Math.floor(network / 2 ** s) % 256).join('.')}/${prefix}`
          : { kind: 'cidr', address: text, prefix }
    if (JSON.stringify(read('ip.src', `${text}/${prefix}`)) !== JSON.stringify(want)) throw new Error(`${text}/${prefix}`)
  }), { numRuns: 1000 })
  fc.assert(fc.property(quadText, quadText, (from, to) => {
    const a = quadValue(from)
    const b = quadValue(to)
    const want = a < 0
      ? `invalid IPv4 address ${from}`
      : b < 0
        ? `invalid IPv4 address ${to}`
        : a > b ? `IP range ${from}..${to} starts above its end` : { kind: 'ip_range', from, to }
    if (JSON.stringify(read('ip.src', `${from}..${to}`)) !== JSON.stringify(want)) throw new Error(`${from}..${to}`)
  }), { numRuns: 1000 })
})

t.test('decimal integers and ranges agree with an oracle', async () => {
  const decimal = fc.oneof(fc.nat(100_000), fc.constant(Number.MAX_SAFE_INTEGER), fc.constant(Number.MAX_SAFE_INTEGER + 1)).map(String)
  fc.assert(fc.property(decimal, decimal, (a, b) => {
    const tooLarge = [a, b].find((x) => Number(x) > Number.MAX_SAFE_INTEGER)
    const want = tooLarge !== undefined
      ? `integer ${tooLarge} is out of range (at most ±${Number.MAX_SAFE_INTEGER})`
      : Number(a) > Number(b) ? `range ${a}..${b} starts above its end` : { kind: 'int_range', from: Number(a), to: Number(b) }
    if (JSON.stringify(read('tcp.dstport', `${a}..${b}`)) !== JSON.stringify(want)) throw new Error(`${a}..${b}`)
    const single = Number(a) > Number.MAX_SAFE_INTEGER ? `integer ${a} is out of range (at most ±${Number.MAX_SAFE_INTEGER})` : { kind: 'int', value: Number(a) }
    if (JSON.stringify(read('tcp.dstport', a)) !== JSON.stringify(single)) throw new Error(a)
  }), { numRuns: 1000 })
})
