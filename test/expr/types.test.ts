/**
 * Field lookup as the parser does it (a word id from the vocabulary, then the scheme's table
 * by id) must agree with the scheme's Map on every name and alias, and find nothing for the
 * other scheme's fields. And the type helpers, whose results are memoised and interned.
 */
import t from 'tap'
import { smartFirewallScheme } from '../../src/expr/schemes/smart-firewall.js'
import { wafScheme } from '../../src/expr/schemes/waf.js'
import { arrayOf, elementType, findField, internType, isArrayType, isMapType, resolveField, type Type } from '../../src/expr/types.js'
import { fieldsById, vocabulary } from '../../src/expr/words.js'

for (const [scheme, other] of [[wafScheme, smartFirewallScheme], [smartFirewallScheme, wafScheme]] as const) {
  t.test(`${scheme.kind}: every name and alias is found by its word id, as the Map finds it`, async (t) => {
    const byId = fieldsById(scheme)
    for (const [name, entry] of scheme.lookup) {
      t.equal(byId[vocabulary.idOf(name)], entry, name)
      t.equal(findField(scheme, name), entry, `${name}: findField`)
      t.equal(resolveField(scheme, name), entry.name, `${name} → ${entry.name}`)
    }
  })
  t.test(`${scheme.kind}: the other scheme's fields are not found`, async (t) => {
    const byId = fieldsById(scheme)
    for (const name of other.lookup.keys()) {
      if (!scheme.lookup.has(name)) t.equal(byId[vocabulary.idOf(name)], undefined, name)
    }
    t.equal(byId[0], undefined, 'id 0 (not a known word) is no field')
    t.equal(byId[vocabulary.idOf('lower')], undefined, 'a function name is no field')
  })
}

t.test('a scheme outside the vocabulary is refused', async (t) => {
  t.throws(() => fieldsById({ ...wafScheme }), /not in the vocabulary/)
})

t.test('element and array types', async (t) => {
  const cases: ReadonlyArray<[Type, Type]> = [
    ['Array<Bytes>', 'Bytes'],
    ['Map<Array<Bytes>>', 'Array<Bytes>'],
    ['Array<Array<Int>>', 'Array<Int>'],
    ['Array<Bool>', 'Bool'],
  ]
  for (const [t0, element] of cases) {
    t.equal(elementType(t0), element, `element of ${t0}`)
    t.equal(elementType(t0), element, `element of ${t0}, memoised`)
  }
  for (const scalar of ['Bool', 'Int', 'Bytes', 'Ip', 'Array<Ip>'] as const) {
    t.equal(arrayOf(scalar), `Array<${scalar}>`)
    t.equal(elementType(arrayOf(scalar)), scalar, `${scalar} round trip`)
  }
  t.ok(isArrayType('Array<Bytes>'))
  t.notOk(isArrayType('Map<Array<Bytes>>'))
  t.ok(isMapType('Map<Array<Bytes>>'))
  t.notOk(isMapType('Bytes'))
})

t.test('the interned types stay bounded and correct when the cap is reached', async (t) => {
  for (let i = 0; i < 1100; i++) internType(`Array<T${i}>`)
  t.equal(elementType('Array<Bytes>'), 'Bytes')
  t.equal(arrayOf('Int'), 'Array<Int>')
  t.equal(internType('Bytes'), 'Bytes')
})
