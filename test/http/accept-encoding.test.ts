/**
 * gzip negotiation (RFC 9110 §12.5.3, DECISIONS §5): q-values, `x-gzip`, any case, `*`.
 */
import t from 'tap'
import fc from 'fast-check'
import { prefersGzip } from '../../src/http/accept-encoding.js'

const cases: Array<{ description: string, input: string, expected: boolean }> = [
  { description: 'absent header: identity', input: '', expected: false },
  { description: 'plain gzip', input: 'gzip', expected: true },
  { description: 'browser list', input: 'gzip, deflate, br, zstd', expected: true },
  { description: 'upper case', input: 'GZIP', expected: true },
  { description: 'mixed case', input: 'GzIp', expected: true },
  { description: 'x-gzip', input: 'x-gzip', expected: true },
  { description: 'X-GZIP', input: 'X-GZIP', expected: true },
  { description: 'gzip;q=0 refuses gzip', input: 'gzip;q=0', expected: false },
  { description: 'gzip;q=0.000 refuses gzip', input: 'gzip;q=0.000', expected: false },
  { description: 'x-gzip;q=0 refuses gzip', input: 'x-gzip;q=0', expected: false },
  { description: 'Q in capitals', input: 'gzip;Q=0', expected: false },
  { description: 'smallest positive weight', input: 'gzip;q=0.001', expected: true },
  { description: 'weight 1.000', input: 'gzip;q=1.000', expected: true },
  { description: 'OWS around ;', input: 'gzip ; q=0.5', expected: true },
  { description: 'OWS around ; refusing', input: 'gzip ;  q=0 ', expected: false },
  { description: 'gzip later in the list', input: 'deflate, br;q=1.0, gzip;q=0.8', expected: true },
  { description: 'no gzip listed', input: 'deflate, br', expected: false },
  { description: 'identity only', input: 'identity', expected: false },
  { description: '* covers gzip', input: '*', expected: true },
  { description: '*;q=0 refuses everything listed or not', input: '*;q=0', expected: false },
  { description: '* with gzip;q=0: gzip stays refused', input: '*, gzip;q=0', expected: false },
  { description: 'gzip;q=0 before *', input: 'gzip;q=0, *', expected: false },
  { description: 'gzip explicit wins over *;q=0', input: '*;q=0, gzip', expected: true },
  { description: 'identity preferred over gzip', input: 'gzip;q=0.5, identity;q=1', expected: false },
  { description: 'identity listed without weight beats gzip;q=0.5', input: 'gzip;q=0.5, identity', expected: false },
  { description: 'equal weights: gzip', input: 'gzip;q=1, identity;q=1', expected: true },
  { description: 'gzip above identity', input: 'identity;q=0.2, gzip;q=0.9', expected: true },
  { description: 'unlisted identity is only a fallback', input: 'gzip;q=0.5', expected: true },
  { description: 'identity;q=0 alone: still no gzip offered', input: 'identity;q=0', expected: false },
  { description: '* weight applies to identity when unlisted', input: '*;q=0.5, gzip;q=0.1', expected: false },
  { description: 'malformed weight 1.5: element ignored', input: 'gzip;q=1.5', expected: false },
  { description: 'malformed weight text: element ignored', input: 'gzip;q=abc', expected: false },
  { description: 'malformed weight 0.0001: element ignored', input: 'gzip;q=0.0001', expected: false },
  { description: 'malformed weight with empty value', input: 'gzip;q=', expected: false },
  { description: 'unknown parameter: element ignored', input: 'gzip;level=9', expected: false },
  { description: 'malformed element does not spoil the next', input: 'gzip;q=2, x-gzip', expected: true },
  { description: 'prefix of gzip is not gzip', input: 'gzi', expected: false },
  { description: 'longer token is not gzip', input: 'gzipx', expected: false },
  { description: 'junk after the coding', input: 'gzip x', expected: false },
  { description: 'surrounding spaces and empty members', input: ' ,  gzip , ', expected: true },
  { description: 'first mention decides', input: 'gzip;q=0, gzip', expected: false },
  { description: 'first mention decides (positive)', input: 'gzip, gzip;q=0', expected: true },
  { description: 'tabs as OWS', input: '\tgzip\t;\tq=0.3', expected: true },
]

t.test('Accept-Encoding table', async (t) => {
  for (const c of cases) t.equal(prefersGzip(c.input), c.expected, `${c.description}: ${JSON.stringify(c.input)}`)
})

t.test('any header naming gzip with a positive weight and no identity gets gzip, in any order', async (t) => {
  const other = fc.constantFrom('deflate', 'br', 'zstd', 'compress', 'deflate;q=0.5', 'br;q=0')
  t.doesNotThrow(() => fc.assert(fc.property(fc.array(other, { maxLength: 4 }), fc.array(other, { maxLength: 4 }), fc.integer({ min: 1, max: 1000 }), fc.constantFrom('gzip', 'GZIP', 'x-gzip'),
    (before, after, q, name) => {
      const weight = q === 1000 ? '1' : `0.${String(q).padStart(3, '0')}`
      return prefersGzip([...before, `${name};q=${weight}`, ...after].join(', '))
    })))
})

t.test('never throws on arbitrary input', async (t) => {
  t.doesNotThrow(() => fc.assert(fc.property(fc.string({ maxLength: 80 }), (s) => typeof prefersGzip(s) === 'boolean')))
})
