import t from 'tap'
import { explainInvalid } from '../../src/net/explain.js'

// Single addresses and CIDRs are covered through parseTarget (test/net/target.test.ts); these
// are the range forms the coalesce input adds.
const rangeCases: { description: string, input: string, expected: string }[] = [
  { description: 'reversed', input: '10.0.0.9-10.0.0.5', expected: 'range start is after its end' },
  { description: 'reversed with blanks', input: '10.0.0.9 - 10.0.0.5', expected: 'range start is after its end' },
  { description: 'mixed families', input: '10.0.0.1-::1', expected: 'range ends must be of the same family' },
  { description: 'mapped end and IPv6 end', input: '::ffff:1.2.3.4-2001:db8::', expected: 'range ends must be of the same family' },
  { description: 'CIDR ends', input: '10.0.0.0/24-10.0.1.0/24', expected: 'range ends must be addresses, not CIDRs' },
  { description: 'two dashes', input: '1.1.1.1-1.1.1.2-1.1.1.3', expected: 'a range has exactly one "-"' },
  { description: 'bad end', input: '1.1.1.1-1.1.1.256', expected: 'IPv4 octet 256 is out of range' },
  { description: 'missing end', input: '1.1.1.1-', expected: 'empty address' },
  { description: 'zone id in a range', input: 'fe80::1%1-fe80::2', expected: 'zone ids are not allowed' },
  { description: 'blank inside an end', input: '1.1.1.1 - 1.1. 1.2', expected: 'whitespace and control characters are not allowed' },
]

t.test('explainInvalid names the broken rule of a range', async (t) => {
  for (const c of rangeCases) t.equal(explainInvalid(c.input, { ranges: true }), c.expected, c.description)
})

t.test('ranges are refused where only addresses and CIDRs are accepted', async (t) => {
  t.equal(explainInvalid('10.0.0.1-10.0.0.2'), 'ranges are not allowed here; use an address or a CIDR')
})
