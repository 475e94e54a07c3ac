/**
 * The string after `matches` / `~` is lexed by wirefilter's regex rule (engine/src/rhs_types/
 * regex/mod.rs): every backslash escape reaches the regex check as written, only `\"` outside a
 * character class becomes `"`, and a `"` inside `[…]` does not end the string. Raw strings are
 * raw, as everywhere. Every other string keeps the string escapes (\" \\ \xHH \OOO). The
 * canonical text keeps the pattern as written, so it keeps the regex's meaning.
 */
import t from 'tap'
import type { Call, Compare, Expr, StringLit } from '../../src/expr/ast.js'
import { checkExpression, printExpression } from '../../src/expr/check.js'
import { Cursor } from '../../src/expr/lexer.js'
import { parseExpression } from '../../src/expr/parser.js'
import { documentedRegexExamples } from './regex-examples.js'

/** The byte string of a literal as text (the AST keeps UTF-8 bytes, one char per byte). */
const text = (bytes: string): string => Buffer.from(bytes, 'latin1').toString('utf8')

/** The comparisons of a tree, in order. */
function compares (e: Expr): Compare[] {
  switch (e.kind) {
    case 'compare': return [e]
    case 'logical': return e.items.flatMap(compares)
    case 'not': return compares(e.arg)
    case 'group': return compares(e.expr)
    case 'bare': return []
  }
}

/** The pattern of the first `matches` in a tree. */
function patternOf (e: Expr): string {
  const m = compares(e).find((c) => c.op === 'matches')
  if (m === undefined) throw new Error('no matches in the expression')
  return text((m.rhs as StringLit).value)
}

t.test('the documented examples check, with the pattern as written, and print back to it', async (t) => {
  for (const ex of documentedRegexExamples) {
    const r = checkExpression('waf_rule', ex.expression)
    if (!r.ok) {
      t.fail(`${ex.expression} (${ex.source}): ${r.error.message}`)
      continue
    }
    t.same(r.fields, ex.fields, `${ex.expression}: fields`)
    t.equal(patternOf(r.ast), ex.pattern, `${ex.expression}: the pattern the regex check gets`)
    const canonical = printExpression(r.ast)
    t.equal(canonical, ex.canonical ?? ex.expression, `${ex.expression}: canonical text`)
    const again = checkExpression('waf_rule', canonical)
    t.ok(again.ok && patternOf(again.ast) === ex.pattern, `${ex.expression}: the canonical text has the same pattern`)
  }
})

/** [the string after `http.host matches `, the pattern the regex check gets] */
const lexed: ReadonlyArray<[string, string]> = [
  [String.raw`"\\"`, String.raw`\\`],
  [String.raw`"\x5c"`, String.raw`\x5c`],
  [String.raw`"a\x2ecom"`, String.raw`a\x2ecom`],
  [String.raw`"\d\.\w\s\pL\p{Greek}\x{41}\u0041\t\A\z\b"`, String.raw`\d\.\w\s\pL\p{Greek}\x{41}\u0041\t\A\z\b`],
  [String.raw`"a\"b"`, 'a"b'],
  [String.raw`"[\"]"`, String.raw`[\"]`],
  [String.raw`"["]"`, '["]'],
  [String.raw`"[a\]"]"`, String.raw`[a\]"]`],
  [String.raw`"\["`, String.raw`\[`],
  [String.raw`"[a]\""`, '[a]"'],
  [String.raw`"é\d😀"`, String.raw`é\d😀`],
  [String.raw`"a\é"`, String.raw`a\é`],
  [String.raw`r"\d+\.php"`, String.raw`\d+\.php`],
  [String.raw`r#"a\"b"#`, String.raw`a\"b`],
  ['"a\u0000b"', 'a\u0000b'],
]

t.test('quoted regex strings: escapes kept, \\" outside a class unescaped, a quote in a class kept', async (t) => {
  for (const [literal, pattern] of lexed) {
    const e = parseExpression(`http.host matches ${literal} and ssl`)
    t.equal(patternOf(e), pattern, literal)
    t.equal(patternOf(parseExpression(`http.host ~ ${literal}`)), pattern, `${literal} after ~`)
  }
})

t.test('the issue\'s cases: \\\\ and \\x5c are valid, \\101 is a back-reference, \\x2e keeps its meaning', async (t) => {
  for (const valid of [String.raw`http.host matches "\\"`, String.raw`http.host matches "\x5c"`]) {
    const r = checkExpression('waf_rule', valid)
    t.ok(r.ok, valid)
    if (r.ok) t.equal(printExpression(r.ast), valid, `${valid}: printed as written`)
  }
  const backref = checkExpression('waf_rule', String.raw`http.host matches "\101"`)
  t.same(backref.ok ? undefined : backref.error, { message: 'backreferences are not supported in Rust regex syntax ("\\101") at 1:20', offset: 19, line: 1, column: 20 })
  const dot = checkExpression('waf_rule', String.raw`http.host matches "a\x2ecom"`)
  t.equal(dot.ok && printExpression(dot.ast), String.raw`http.host matches "a\x2ecom"`, 'not "a.com", which matches "abcom" too')
})

t.test('a quoted regex with an unpaired surrogate is refused where it is', async (t) => {
  const r = checkExpression('waf_rule', 'http.host matches "[é]\ud800"')
  t.same(r.ok ? undefined : r.error, { message: 'string contains an unpaired UTF-16 surrogate at 1:23', offset: 22, line: 1, column: 23 })
})

t.test('other strings keep the string escapes', async (t) => {
  const values: ReadonlyArray<[string, string]> = [
    [String.raw`http.host eq "\x41\101\"\\"`, 'AA"\\'],
    [String.raw`http.host contains "\x2e"`, '.'],
    [String.raw`http.host wildcard "\\*"`, String.raw`\*`],
    [String.raw`starts_with(http.host, "\x2e")`, '.'],
    [String.raw`http.host in {"\x41" "a\"b"}`, 'A'],
  ]
  for (const [expression, value] of values) {
    const e = parseExpression(expression)
    const lit = e.kind === 'compare'
      ? (e.rhs.kind === 'set' ? e.rhs.items[0]! : e.rhs) as StringLit
      : e.kind === 'bare' ? (e.operand as Call).args[1] as StringLit : undefined
    t.equal(text(lit!.value), value, expression)
  }
  const r = checkExpression('waf_rule', String.raw`http.host contains "\d"`)
  t.match(r.ok ? '' : r.error.message, /^invalid escape "\\d" in a string/, 'a regex escape is no string escape')
})

t.test('the canonical text of a pattern the quoted form cannot carry is a raw string', async (t) => {
  const matches = (value: string, raw = false): Expr => ({ kind: 'compare', lhs: { kind: 'field', name: 'http.host', pos: 0 }, op: 'matches', rhs: { kind: 'string', value, raw, pos: 0 }, pos: 0, opPos: 0 })
  const cases: ReadonlyArray<[string, string]> = [
    [String.raw`a\"b`, String.raw`http.host matches r#"a\"b"#`],
    ['a\\', String.raw`http.host matches r"a\"`],
    ['a"b[x"]', String.raw`http.host matches "a\"b[x"]"`],
    ['\xc3\xa9\\d', String.raw`http.host matches "é\d"`],
  ]
  for (const [value, printed] of cases) {
    t.equal(printExpression(matches(value)), printed, printed)
    t.equal(patternOf(parseExpression(printed)), text(value), `${printed}: reads back to the same pattern`)
  }
  t.equal(printExpression(matches('\xff')), String.raw`http.host matches "\xff"`, 'bytes that are not UTF-8 (hand-built) as \\xHH')
  t.equal(printExpression(matches('a"b', true)), 'http.host matches r#"a"b"#', 'a raw string stays raw')
})

t.test('valueAt: a quoted regex with no \\" to drop and only ASCII is its own text', async (t) => {
  const cases: ReadonlyArray<[string, number]> = [
    [String.raw`"a\d+\."`, 1],
    [String.raw`"[\"]"`, 1],
    [String.raw`"a\"b"`, -1],
    ['"é"', -1],
  ]
  for (const [literal, at] of cases) {
    const c = new Cursor(`x ${literal} y`)
    c.pos = 2
    const value = c.readRegex().value
    t.equal(c.valueAt, at === -1 ? -1 : at + 2, `${literal}: valueAt`)
    if (at !== -1) t.equal(value, literal.slice(1, -1), `${literal}: the value is the text there`)
    t.equal(c.pos, 2 + literal.length, `${literal}: the cursor is past the closing quote`)
  }
})
