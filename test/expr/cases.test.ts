/**
 * Drives the case tables (cases.ts: valid, cases-invalid.ts: invalid): every case is checked
 * with checkExpression and compared field by field; valid ones also print canonically and
 * re-check to the same result.
 */
import t from 'tap'
import { checkExpression, printExpression } from '../../src/expr/check.js'
import { validCases } from './cases.js'
import { invalidCases } from './cases-invalid.js'

/** Line and column (code points) of an offset, computed independently of src/expr. */
function position (text: string, offset: number): string {
  const before = text.slice(0, offset).split('\n')
  return `${before.length}:${[...before[before.length - 1]!].length + 1}`
}

t.ok(validCases.length + invalidCases.length >= 200, `${validCases.length} valid + ${invalidCases.length} invalid cases`)

t.test('valid expressions', async (t) => {
  for (const c of validCases) {
    const r = checkExpression(c.kind, c.input, c.phase)
    if (!r.ok) {
      t.fail(`${c.description}: ${r.error.message}`)
      continue
    }
    t.same({ fields: r.fields, phase: r.phase }, { fields: c.expected.fields, phase: c.expected.phase }, c.description)
    const canonical = printExpression(r.ast)
    if (c.expected.canonical !== undefined) t.equal(canonical, c.expected.canonical, `${c.description}: canonical text`)
    const again = checkExpression(c.kind, canonical, c.phase)
    t.ok(again.ok && printExpression(again.ast) === canonical, `${c.description}: canonical text re-checks to itself`)
  }
})

t.test('invalid expressions', async (t) => {
  for (const c of invalidCases) {
    const r = checkExpression(c.kind, c.input, c.phase)
    if (r.ok) {
      t.fail(`${c.description}: accepted`)
      continue
    }
    const at = position(c.input, c.expected.offset)
    t.same(r.error, {
      message: `${c.expected.message} at ${at}`,
      offset: c.expected.offset,
      line: Number(at.split(':')[0]),
      column: Number(at.split(':')[1]),
    }, c.description)
  }
})
