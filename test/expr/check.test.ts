/**
 * checkExpression never throws, even on a bug of ours: an exception that is not an
 * ExpressionError becomes an "internal error" diagnostic — unless the text has a syntax
 * error, which the syntax-only parse finds and reports instead. The parser is replaced by
 * one that fails, since the real one has no such bug to trigger.
 */
import t, { type Test } from 'tap'
import type * as Check from '../../src/expr/check.js'
import * as parser from '../../src/expr/parser.js'

async function checkWith (t: Test, parseAndCheck: () => never, parseExpression = parser.parseExpression): Promise<typeof Check.checkExpression> {
  const mod = await t.mockImport<typeof Check>('../../src/expr/check.js', {
    '../../src/expr/parser.js': { ...parser, parseAndCheck, parseExpression },
  })
  return mod.checkExpression
}

const cases: ReadonlyArray<{ description: string, input: string, check: () => never, parse?: (src: string) => never, message: string }> = [
  { description: 'a TypeError on valid text', input: 'ssl', check: () => { throw new TypeError('boom') }, message: 'internal error while checking the expression: boom at 1:1' },
  { description: 'something thrown that is not an Error', input: 'ssl', check: () => { throw 'oops' as unknown as Error }, message: 'internal error while checking the expression: oops at 1:1' },
  { description: 'a bug, but the text has a syntax error', input: 'ssl and', check: () => { throw new TypeError('boom') }, message: 'expected a field, a function or "(", found the end of the expression at 1:8' },
  {
    description: 'the syntax-only parse fails by a bug too',
    input: 'ssl',
    check: () => { throw new TypeError('boom') },
    parse: () => { throw new RangeError('again') },
    message: 'internal error while checking the expression: again at 1:1',
  },
]

for (const c of cases) {
  t.test(c.description, async (t) => {
    const checkExpression = await checkWith(t, c.check, c.parse)
    const r = checkExpression('waf_rule', c.input)
    t.same(r.ok ? r : r.error.message, c.message)
  })
}
