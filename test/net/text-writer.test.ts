import t from 'tap'
import fc from 'fast-check'
import { formatIpv4, formatIpv6 } from '../../src/net/ip.js'
import { TextWriter } from '../../src/net/text-writer.js'

const text = (w: TextWriter): string => Buffer.from(w.finish()).toString('latin1')
const sparseWords = fc.array(fc.oneof(fc.constant(0), fc.constant(0xffff), fc.constant(0x10000), fc.integer({ min: 0, max: 0xffffffff })), { minLength: 4, maxLength: 4 })

t.test('byte output equals the string formatters (growing from a tiny buffer)', async () => {
  fc.assert(fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 32 }), sparseWords, fc.integer({ min: 0, max: 128 })), { maxLength: 50 }), (rows) => {
    const w = new TextWriter(1)
    let want = ''
    for (const [a, len4, words, len6] of rows) {
      w.writeCidr4(a, len4)
      w.writeCidr6(words, 0, len6)
      w.writeIpv4(a)
      w.writeByte(0x20)
      w.writeIpv6(words, 0)
      w.writeAscii('!')
      want += `${formatIpv4(a)}/${len4}\n${formatIpv6(words)}/${len6}\n${formatIpv4(a)} ${formatIpv6(words)}!`
    }
    return w.length === want.length && text(w) === want
  }), { numRuns: 300 })
})

t.test('RFC 5952 cases through the byte writer', async (t) => {
  const cases: [number[], string][] = [
    [[0x20010db8, 0, 0, 1], '2001:db8::1'],
    [[0, 0, 0, 0], '::'],
    [[0, 0, 0, 1], '::1'],
    [[0x20010db8, 0x1, 0x10001, 0x10001], '2001:db8:0:1:1:1:1:1'],
    [[0x20010db8, 0, 0x10000, 1], '2001:db8::1:0:0:1'],
    [[0xfe800000, 0, 0, 0], 'fe80::'],
  ]
  for (const [words, want] of cases) {
    const w = new TextWriter()
    w.writeIpv6(words, 0)
    t.equal(text(w), want)
  }
})
