import t from 'tap'
import fc from 'fast-check'
import { findZeroRun, formatIpv4, formatIpv6, isIpv4Mapped, parseIpv4, parseIpv6, scanIpv4 } from '../../src/net/ip.js'
import { bigOfWords, formatV4, formatV6, wordsOf } from './oracle.js'

/** What only a whole-string parse refuses; the dotted-quad language itself, through every reader, is ipv4-readers.test.ts's table. */
const ipv4Cases: { description: string, input: string, expected: number }[] = [
  { description: 'single zero octets', input: '10.0.0.0', expected: 0x0a000000 },
  { description: 'empty string', input: '', expected: -1 },
  { description: 'leading space', input: ' 1.2.3.4', expected: -1 },
  { description: 'trailing newline', input: '1.2.3.4\n', expected: -1 },
  { description: 'sign', input: '+1.2.3.4', expected: -1 },
  { description: 'CIDR is not an address', input: '1.2.3.4/32', expected: -1 },
]

t.test('parseIpv4', async (t) => {
  for (const c of ipv4Cases) t.equal(parseIpv4(c.input), c.expected, c.description)
})

t.test('scanIpv4 parses a slice in place', async (t) => {
  t.equal(scanIpv4('x10.0.0.1y', 1, 9), 0x0a000001)
  t.equal(scanIpv4('x10.0.0.1y', 1, 10), -1)
})

t.test('formatIpv4 and parseIpv4 round-trip and agree with the oracle', async () => {
  fc.assert(fc.property(fc.integer({ min: 0, max: 0xffffffff }), (x) => {
    const text = formatIpv4(x)
    return text === formatV4(BigInt(x)) && parseIpv4(text) === x
  }))
})

const ipv6Cases: { description: string, input: string, expected: number[] | null }[] = [
  { description: 'documentation host', input: '2001:db8::1', expected: [0x20010db8, 0, 0, 1] },
  { description: 'unspecified', input: '::', expected: [0, 0, 0, 0] },
  { description: 'loopback', input: '::1', expected: [0, 0, 0, 1] },
  { description: 'trailing gap', input: '2001:db8::', expected: [0x20010db8, 0, 0, 0] },
  { description: 'full form, upper case, leading zeros', input: '2001:0DB8:0000:0000:0000:0000:0000:0001', expected: [0x20010db8, 0, 0, 1] },
  { description: 'gap for one group', input: '1:2:3:4:5:6::8', expected: [0x10002, 0x30004, 0x50006, 8] },
  { description: 'dotted tail', input: '::ffff:192.0.2.1', expected: [0, 0, 0xffff, 0xc0000201] },
  { description: 'dotted tail in full form', input: '1:2:3:4:5:6:1.2.3.4', expected: [0x10002, 0x30004, 0x50006, 0x01020304] },
  { description: 'zone id', input: 'fe80::1%eth0', expected: null },
  { description: 'two gaps', input: '1::2::3', expected: null },
  { description: 'triple colon', input: '1:::2', expected: null },
  { description: 'nine groups', input: '1:2:3:4:5:6:7:8:9', expected: null },
  { description: 'seven groups without gap', input: '1:2:3:4:5:6:7', expected: null },
  { description: 'gap with eight groups', input: '1:2:3:4::5:6:7:8', expected: null },
  { description: 'five hex digits', input: '12345::', expected: null },
  { description: 'lone leading colon', input: ':1::', expected: null },
  { description: 'lone trailing colon', input: '1::2:', expected: null },
  { description: 'dotted tail with leading zero', input: '::ffff:1.2.3.04', expected: null },
  { description: 'dotted tail not last', input: '::1.2.3.4:1', expected: null },
  { description: 'dotted tail with too many groups', input: '1:2:3:4:5:6:7:1.2.3.4', expected: null },
  { description: 'not hex', input: '2001:db8::g', expected: null },
  { description: 'empty', input: '', expected: null },
  { description: 'whitespace', input: '2001:db8:: 1', expected: null },
  { description: 'IPv4 only', input: '1.2.3.4', expected: null },
  { description: 'prefix', input: '::/0', expected: null },
]

t.test('parseIpv6', async (t) => {
  const w = new Uint32Array(4)
  for (const c of ipv6Cases) {
    const ok = parseIpv6(c.input, w)
    if (c.expected === null) t.notOk(ok, c.description)
    else t.same([ok, [...w]], [true, c.expected], c.description)
  }
})

const rfc5952Cases: { description: string, words: number[], expected: string }[] = [
  { description: 'documentation host', words: [0x20010db8, 0, 0, 1], expected: '2001:db8::1' },
  { description: 'unspecified', words: [0, 0, 0, 0], expected: '::' },
  { description: 'loopback', words: [0, 0, 0, 1], expected: '::1' },
  { description: 'single zero group is not compressed (§4.2.2)', words: [0x20010db8, 0x1, 0x10001, 0x10001], expected: '2001:db8:0:1:1:1:1:1' },
  { description: 'longest run wins (§4.2.3)', words: [0x20010000, 0x1, 0, 1], expected: '2001:0:0:1::1' },
  { description: 'first of equal runs (§4.2.3)', words: [0x20010db8, 0, 0x10000, 1], expected: '2001:db8::1:0:0:1' },
  { description: 'lowercase, no leading zeros (§4.1, §4.3)', words: [0x20010db8, 0x00ab00cd, 0, 0xabcd], expected: '2001:db8:ab:cd::abcd' },
  { description: 'run at the end', words: [0xfe800000, 0, 0, 0], expected: 'fe80::' },
  { description: 'no zero at all', words: [0x10002, 0x30004, 0x50006, 0x70008], expected: '1:2:3:4:5:6:7:8' },
  { description: 'mapped space is written in hex (it only appears inside wider IPv6 ranges)', words: [0, 0, 0xffff, 0], expected: '::ffff:0:0' },
]

t.test('formatIpv6 writes RFC 5952 text', async (t) => {
  for (const c of rfc5952Cases) t.equal(formatIpv6(c.words), c.expected, c.description)
  t.equal(formatIpv6([9, 0x20010db8, 0, 0, 1], 1), '2001:db8::1', 'offset')
})

/** Words biased towards zero groups, where the RFC 5952 rules matter. */
const sparseWords = fc.array(fc.oneof(fc.constant(0), fc.constant(0xffff), fc.constant(0x10000), fc.integer({ min: 0, max: 0xffffffff })), { minLength: 4, maxLength: 4 })

t.test('formatIpv6 agrees with the regex oracle and round-trips through parseIpv6', async () => {
  const w = new Uint32Array(4)
  fc.assert(fc.property(sparseWords, (words) => {
    const text = formatIpv6(words)
    return text === formatV6(bigOfWords(words)) && parseIpv6(text, w) && [...w].every((x, i) => x === words[i])
  }), { numRuns: 2000 })
})

t.test('parseIpv6 reads every spelling of an address: full, padded, upper case', async () => {
  const w = new Uint32Array(4)
  fc.assert(fc.property(fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }), fc.boolean(), fc.boolean(), (x, pad, upper) => {
    const groups = wordsOf(x).flatMap((v) => [v >>> 16, v & 0xffff]).map((g) => g.toString(16).padStart(pad ? 4 : 1, '0'))
    let text = groups.join(':')
    if (upper) text = text.toUpperCase()
    return parseIpv6(text, w) && bigOfWords(w) === x
  }))
})

t.test('isIpv4Mapped and findZeroRun', async (t) => {
  t.ok(isIpv4Mapped([0, 0, 0xffff, 1]))
  t.notOk(isIpv4Mapped([0, 0, 0xfffe, 1]))
  t.notOk(isIpv4Mapped([0, 1, 0xffff, 1]))
  t.same(findZeroRun(new Uint16Array([1, 0, 2, 0, 3, 0, 4, 0])), [-1, 0], 'single zeros are not a run')
  t.same(findZeroRun(new Uint16Array([0, 0, 1, 0, 0, 0, 1, 1])), [3, 3])
})
