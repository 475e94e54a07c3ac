/**
 * Wildcard patterns (Cloudflare's rules: `*` is the only metacharacter, `\*` and `\\` the only
 * escapes, no `**`, at most MAX_WILDCARD_STARS stars), checked from the string or from its
 * bytes in place, as the checker does: both must give the same verdict.
 */
import t from 'tap'
import fc from 'fast-check'
import { codesOf } from '../../src/expr/text.js'
import { checkWildcard, MAX_WILDCARD_STARS } from '../../src/expr/wildcard.js'

/** [pattern, expected problem or undefined] */
const cases: ReadonlyArray<[string, { message: string, index: number } | undefined]> = [
  ['', undefined],
  ['/admin/*', undefined],
  ['*.example.com/*', undefined],
  ['a\\*b\\\\c*', undefined],
  ['é*😀', undefined],
  ['*'.repeat(1), undefined],
  ['a*'.repeat(MAX_WILDCARD_STARS), undefined],
  ['a*'.repeat(MAX_WILDCARD_STARS + 1), { message: `wildcard pattern has more than ${MAX_WILDCARD_STARS} stars`, index: 2 * MAX_WILDCARD_STARS + 1 }],
  ['/a/**', { message: 'wildcard pattern has "**"; one * already matches any run of characters', index: 3 }],
  ['\\**', undefined],
  ['a\\', { message: 'wildcard pattern ends with a lone backslash; write \\\\ for a literal one', index: 1 }],
  ['a\\b', { message: 'invalid escape "\\b" in a wildcard pattern; only \\* and \\\\ are escapes', index: 1 }],
  ['a\\é', { message: 'invalid escape "\\é" in a wildcard pattern; only \\* and \\\\ are escapes', index: 1 }],
]

t.test('patterns', async (t) => {
  for (const [pattern, expected] of cases) {
    t.same(checkWildcard(pattern), expected, JSON.stringify(pattern))
    const codes = codesOf(`http.host wildcard "${pattern}"`)
    t.same(checkWildcard(pattern, codes, 20), expected, `${JSON.stringify(pattern)}, read in place`)
  }
})

t.test('reading the bytes in place agrees with reading the string', async () => {
  const parts = fc.constantFrom('a', '*', '\\', '\\*', '\\\\', 'é', '"', ' ')
  fc.assert(fc.property(fc.array(parts, { maxLength: 20 }), fc.nat(10), (ps, at) => {
    const pattern = ps.join('')
    const inPlace = JSON.stringify(checkWildcard(pattern, codesOf('x'.repeat(at) + pattern), at))
    const own = JSON.stringify(checkWildcard(pattern))
    if (inPlace !== own) throw new Error(`${JSON.stringify(pattern)}: ${inPlace} in place, ${own} from the string`)
  }), { numRuns: 2000 })
})
