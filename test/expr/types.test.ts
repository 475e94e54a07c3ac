/**
 * The field lookup by name or alias: findField must agree with the scheme's Map on every name
 * and alias, and reject near misses that share the length and last character it buckets by.
 */
import t from 'tap'
import { smartFirewallScheme } from '../../src/expr/schemes/smart-firewall.js'
import { wafScheme } from '../../src/expr/schemes/waf.js'
import { findField, resolveField } from '../../src/expr/types.js'

for (const scheme of [wafScheme, smartFirewallScheme]) {
  t.test(`${scheme.kind}: every name and alias resolves as the Map does`, async (t) => {
    for (const [name, entry] of scheme.lookup) {
      // A slice of a longer text, as the parser hands names over (V8 keeps it a sliced string).
      const sliced = `(${name} eq 1)`.slice(1, name.length + 1)
      t.equal(findField(scheme, sliced), entry, name)
      t.equal(resolveField(scheme, sliced), entry.name, `${name} → ${entry.name}`)
    }
  })
}

const misses: ReadonlyArray<[string, string]> = [
  ['empty name', ''],
  ['same length and last character as http.host', 'Http.host'],
  ['one character changed in the middle', 'http.request.uri.psth'],
  ['a prefix of a field', 'http.request.uri.pat'],
  ['a field plus one character', 'http.request.uri.paths'],
  ['longer than any field', 'x'.repeat(200)],
  ['non-ASCII lookalike', 'ip.src\u0430'],
]
t.test('near misses are not found', async (t) => {
  for (const [label, name] of misses) {
    t.equal(findField(wafScheme, name), undefined, label)
    t.equal(wafScheme.lookup.get(name), undefined, `${label}: the Map agrees`)
  }
})
