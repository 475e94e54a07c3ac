/**
 * The printer on trees the parser never builds (made by hand, e.g. by a rule generator): it
 * adds the parentheses that keep their meaning. And canonical text for every literal form.
 */
import t from 'tap'
import type { Expr, Literal } from '../../src/expr/ast.js'
import { checkExpression, printExpression } from '../../src/expr/check.js'

const field = (name: string): Expr => ({ kind: 'bare', operand: { kind: 'field', name, pos: 0 }, pos: 0 })
const a = field('ssl')
const b = field('http.request.body.truncated')

t.test('hand-built trees get the parentheses their meaning needs', async (t) => {
  const cases: Array<[string, Expr, string]> = [
    ['or inside and', { kind: 'logical', op: 'and', items: [{ kind: 'logical', op: 'or', items: [a, b], pos: 0 }, a], pos: 0 }, '(ssl or http.request.body.truncated) and ssl'],
    ['xor inside and', { kind: 'logical', op: 'and', items: [a, { kind: 'logical', op: 'xor', items: [a, b], pos: 0 }], pos: 0 }, 'ssl and (ssl xor http.request.body.truncated)'],
    ['and inside or needs none', { kind: 'logical', op: 'or', items: [{ kind: 'logical', op: 'and', items: [a, b], pos: 0 }, a], pos: 0 }, 'ssl and http.request.body.truncated or ssl'],
    ['same operator nested', { kind: 'logical', op: 'or', items: [{ kind: 'logical', op: 'or', items: [a, b], pos: 0 }, a], pos: 0 }, '(ssl or http.request.body.truncated) or ssl'],
    ['not of a logical', { kind: 'not', arg: { kind: 'logical', op: 'and', items: [a, b], pos: 0 }, pos: 0 }, 'not (ssl and http.request.body.truncated)'],
  ]
  for (const [description, tree, text] of cases) {
    t.equal(printExpression(tree), text, description)
    t.ok(checkExpression('waf_rule', text).ok, `${description}: the text checks`)
  }
})

t.test('canonical literal text', async (t) => {
  const lit = (l: Literal): string => printExpression({ kind: 'compare', lhs: { kind: 'field', name: 'x', pos: 0 }, op: 'eq', rhs: l, pos: 0, opPos: 0 }).slice(5)
  const cases: Array<[Literal, string]> = [
    [{ kind: 'string', value: 'a"b\\c', raw: false, pos: 0 }, '"a\\"b\\\\c"'],
    [{ kind: 'string', value: '\x00\x1f\x7f\xff', raw: false, pos: 0 }, '"\\x00\\x1f\\x7f\\xff"'],
    [{ kind: 'string', value: '\xc3\xa9', raw: false, pos: 0 }, '"é"'],
    [{ kind: 'string', value: '\xc2\xa0', raw: false, pos: 0 }, '"\\xc2\\xa0"'],
    [{ kind: 'string', value: '\xe2\x80', raw: false, pos: 0 }, '"\\xe2\\x80"'],
    [{ kind: 'string', value: 'a"#b', raw: true, pos: 0 }, 'r##"a"#b"##'],
    [{ kind: 'string', value: '"', raw: true, pos: 0 }, 'r#"""#'],
    [{ kind: 'string', value: '\\d+', raw: true, pos: 0 }, 'r"\\d+"'],
    [{ kind: 'int', value: -42, pos: 0 }, '-42'],
    [{ kind: 'int_range', from: 80, to: 90, pos: 0 }, '80..90'],
    [{ kind: 'ip', address: '2001:db8::1', pos: 0 }, '2001:db8::1'],
    [{ kind: 'cidr', address: '10.0.0.0', prefix: 8, pos: 0 }, '10.0.0.0/8'],
    [{ kind: 'ip_range', from: '10.0.0.1', to: '10.0.0.9', pos: 0 }, '10.0.0.1..10.0.0.9'],
  ]
  for (const [l, text] of cases) t.equal(lit(l), text, text)
})
