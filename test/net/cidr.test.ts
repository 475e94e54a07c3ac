import t from 'tap'
import fc from 'fast-check'
import {
  FIRST, INTERVAL_WORDS, LAST, PREFIX_LENGTH, lastV4, lastV6, maskV4, maskV6, scanAddress, scanCidr, scanRange,
} from '../../src/net/cidr.js'
import { bigOfWords, prefixNet, wordsOf } from './oracle.js'

/** What a scanner left: family, then first/last as text-friendly numbers or BigInts. */
function scan (fn: 'cidr' | 'range', text: string, blanks = false): unknown {
  const out = new Uint32Array(INTERVAL_WORDS)
  const family = fn === 'cidr' ? scanCidr(text, 0, text.length, out) : scanRange(text, 0, text.length, out, blanks)
  if (family === 0) return null
  const len = out[PREFIX_LENGTH] === 0xffffffff ? undefined : out[PREFIX_LENGTH]
  if (family === 4) return { family, first: out[FIRST], last: out[LAST], len }
  return { family, first: bigOfWords(out, FIRST).toString(16), last: bigOfWords(out, LAST).toString(16), len }
}

const cidrCases: { description: string, input: string, expected: unknown }[] = [
  { description: 'address', input: '192.0.2.1', expected: { family: 4, first: 0xc0000201, last: 0xc0000201, len: 32 } },
  { description: 'CIDR', input: '10.0.0.0/8', expected: { family: 4, first: 0x0a000000, last: 0x0affffff, len: 8 } },
  { description: 'host bits cleared', input: '10.1.2.3/8', expected: { family: 4, first: 0x0a000000, last: 0x0affffff, len: 8 } },
  { description: '/0', input: '1.2.3.4/0', expected: { family: 4, first: 0, last: 0xffffffff, len: 0 } },
  { description: 'IPv6 /64', input: '2001:db8::1/64', expected: { family: 6, first: '20010db8000000000000000000000000', last: '20010db800000000ffffffffffffffff', len: 64 } },
  { description: 'IPv6 /0', input: '::/0', expected: { family: 6, first: '0', last: 'f'.repeat(32), len: 0 } },
  { description: 'mapped host', input: '::ffff:1.2.3.4', expected: { family: 4, first: 0x01020304, last: 0x01020304, len: 32 } },
  { description: 'mapped /96 → 0.0.0.0/0', input: '::ffff:9.9.9.9/96', expected: { family: 4, first: 0, last: 0xffffffff, len: 0 } },
  { description: 'mapped address in a /95 stays IPv6', input: '::ffff:1.2.3.4/95', expected: { family: 6, first: 'fffe00000000', last: 'ffffffffffff', len: 95 } },
  { description: 'prefix 33', input: '1.2.3.4/33', expected: null },
  { description: 'prefix 129', input: '::/129', expected: null },
  { description: 'prefix leading zero', input: '1.2.3.4/032', expected: null },
  { description: 'prefix four digits', input: '::/0128', expected: null },
  { description: 'empty prefix', input: '1.2.3.4/', expected: null },
  { description: 'two slashes', input: '1.2.3.4/8/8', expected: null },
  { description: 'range is not a CIDR', input: '1.2.3.4-1.2.3.5', expected: null },
]

t.test('scanCidr', async (t) => {
  for (const c of cidrCases) t.same(scan('cidr', c.input), c.expected, `${c.description}: ${c.input}`)
})

const rangeCases: { description: string, input: string, blanks?: boolean, expected: unknown }[] = [
  { description: 'IPv4 range', input: '10.0.0.5-10.0.0.9', expected: { family: 4, first: 0x0a000005, last: 0x0a000009 } },
  { description: 'one address', input: '10.0.0.5-10.0.0.5', expected: { family: 4, first: 0x0a000005, last: 0x0a000005 } },
  { description: 'reversed', input: '10.0.0.9-10.0.0.5', expected: null },
  { description: 'IPv6 range', input: '2001:db8::-2001:db8::ff', expected: { family: 6, first: '20010db8000000000000000000000000', last: '20010db80000000000000000000000ff' } },
  { description: 'reversed IPv6', input: '2001:db8::ff-2001:db8::', expected: null },
  { description: 'mapped ends become IPv4', input: '::ffff:1.2.3.4-::ffff:1.2.3.9', expected: { family: 4, first: 0x01020304, last: 0x01020309 } },
  { description: 'mapped end with an IPv4 end', input: '::ffff:1.2.3.4-1.2.3.9', expected: { family: 4, first: 0x01020304, last: 0x01020309 } },
  { description: 'mixed families', input: '1.2.3.4-::1', expected: null },
  { description: 'blanks refused by default', input: '1.2.3.4 - 1.2.3.5', expected: null },
  { description: 'blanks around the dash when allowed', input: '1.2.3.4 \t- 1.2.3.5', blanks: true, expected: { family: 4, first: 0x01020304, last: 0x01020305 } },
  { description: 'CIDR ends refused', input: '1.2.3.0/24-1.2.4.0/24', expected: null },
  { description: 'missing end', input: '1.2.3.4-', expected: null },
  { description: 'missing start', input: '-1.2.3.4', expected: null },
  { description: 'two dashes', input: '1.2.3.4-1.2.3.5-1.2.3.6', expected: null },
  { description: 'no dash', input: '1.2.3.4', expected: null },
]

t.test('scanRange', async (t) => {
  for (const c of rangeCases) t.same(scan('range', c.input, c.blanks === true), c.expected, `${c.description}: ${c.input}`)
})

t.test('scanAddress', async (t) => {
  const out = new Uint32Array(4)
  t.equal(scanAddress('1.2.3.4', 0, 7, out, 0), 4)
  t.equal(out[0], 0x01020304)
  t.equal(scanAddress('::ffff:1.2.3.4', 0, 14, out, 0), 4)
  t.equal(out[0], 0x01020304)
  t.equal(scanAddress('2001:db8::', 0, 10, out, 0), 6)
  t.equal(scanAddress('2001:db8::%1', 0, 12, out, 0), 0)
  t.equal(scanAddress('12345', 0, 5, out, 0), 0)
})

t.test('IPv4 masks agree with BigInt', async () => {
  fc.assert(fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 32 }), (a, len) => {
    const n = prefixNet(4, BigInt(a), len)
    return BigInt((a & maskV4(len)) >>> 0) === n.first && BigInt(lastV4(a, len)) === n.last
  }))
})

t.test('IPv6 masks agree with BigInt', async () => {
  fc.assert(fc.property(fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }), fc.integer({ min: 0, max: 128 }), (a, len) => {
    const n = prefixNet(6, a, len)
    const w = Uint32Array.from(wordsOf(a))
    const last = new Uint32Array(4)
    lastV6(w, 0, len, last, 0)
    maskV6(w, 0, len)
    return bigOfWords(w) === n.first && bigOfWords(last) === n.last
  }))
})
