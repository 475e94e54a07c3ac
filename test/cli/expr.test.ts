/**
 * `threatfeed expr check` through runCommand: text and JSON output, the caret under the error,
 * stdin input, and exit codes 0 (valid), 1 (invalid), 2 (usage).
 */
import t from 'tap'
import { exprCommand } from '../../src/cli/expr.js'
import { runCommand } from '../helpers/cli.js'
import { documentedRegexExamples } from '../expr/regex-examples.js'

t.test('valid WAF rule: ok, fields and detected phase', async (t) => {
  const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule', 'http.host eq "a" && not ssl'])
  t.equal(r.code, 0)
  t.equal(r.stdout, 'ok\nfields: http.host, ssl\nphase: request\n')
  t.equal(r.stderr, '')
})

t.test('response field: phase detected as response', async (t) => {
  const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule', 'http.response.code ge 500'])
  t.equal(r.stdout, 'ok\nfields: http.response.code\nphase: response\n')
})

t.test('smart firewall rule has no phase', async (t) => {
  const r = await runCommand(exprCommand, ['check', '--kind', 'smart_firewall_rule', 'tcp.flags.syn and tcp.dstport in {22 3389}'])
  t.equal(r.code, 0)
  t.equal(r.stdout, 'ok\nfields: tcp.dstport, tcp.flags.syn\nphase: none (smart firewall rules have no phase)\n')
})

t.test('invalid rule: message, line and caret; exit 1', async (t) => {
  const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule', 'ip.src contains "10."'])
  t.equal(r.code, 1)
  t.equal(r.stdout, 'error: "contains" needs Bytes, ip.src is Ip at 1:8\n  ip.src contains "10."\n         ^\n')
})

t.test('caret on the right line of a multi-line rule, tabs kept', async (t) => {
  const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule', 'ssl and\n\thttp.nope eq "a"'])
  t.equal(r.code, 1)
  t.equal(r.stdout, 'error: unknown field "http.nope" at 2:2\n  \thttp.nope eq "a"\n  \t^\n')
})

t.test('caret under a long line is windowed', async (t) => {
  const rule = `http.host eq "${'a'.repeat(300)}" and nope`
  const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule', rule])
  const [message, shown, caretLine] = r.stdout.split('\n')
  t.equal(message, `error: unknown field "nope" at 1:${rule.length - 3}`)
  t.ok(shown!.startsWith('  …') && shown!.length <= 2 + 1 + 100 + 1, 'line cut to a window')
  t.equal(shown!.slice(2).indexOf('nope'), caretLine!.slice(2).indexOf('^'), 'caret under the field')
})

t.test('smart firewall rule with an http. field', async (t) => {
  const r = await runCommand(exprCommand, ['check', '--kind', 'smart_firewall_rule', 'http.host eq "a"'])
  t.equal(r.code, 1)
  t.match(r.stdout, /^error: layer-7 field "http\.host" is not allowed in smart firewall rules/)
})

t.test('--phase request rejects a response field', async (t) => {
  const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule', '--phase', 'request', 'http.response.code eq 500'])
  t.equal(r.code, 1)
  t.match(r.stdout, /is a response-phase field; a rule with phase "request" cannot use it at 1:1/)
})

t.test('--json, valid: one document with the canonical expression', async (t) => {
  const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule', '--json', 'http.host == "a" || !ssl'])
  t.equal(r.code, 0)
  t.same(JSON.parse(r.stdout), { ok: true, kind: 'waf_rule', fields: ['http.host', 'ssl'], phase: 'request', expression: 'http.host eq "a" or not ssl' })
  t.equal(r.stdout.trim().split('\n').length, 1)
})

t.test('--json, invalid: the error object; exit 1', async (t) => {
  const r = await runCommand(exprCommand, ['check', '--kind', 'smart_firewall_rule', '--json', 'tcp.dstport eq "22"'])
  t.equal(r.code, 1)
  t.same(JSON.parse(r.stdout), { ok: false, kind: 'smart_firewall_rule', error: { message: 'tcp.dstport is Int, but "22" is a string at 1:16', offset: 15, line: 1, column: 16 } })
})

t.test('the documented regex examples check, and the canonical expression keeps each pattern as written', async (t) => {
  for (const ex of documentedRegexExamples) {
    const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule', '--json', ex.expression])
    t.equal(r.code, 0, `${ex.expression} (${ex.source})`)
    t.same(JSON.parse(r.stdout), { ok: true, kind: 'waf_rule', fields: ex.fields, phase: 'request', expression: ex.canonical ?? ex.expression }, ex.expression)
  }
})

t.test('regex strings: escapes go to the regex as written', async (t) => {
  const valid: ReadonlyArray<[string, string]> = [
    [String.raw`http.host matches "\\"`, 'an escaped backslash'],
    [String.raw`http.host matches "\x5c"`, 'a backslash by its code'],
    [String.raw`http.host matches "a\x2ecom"`, 'an escaped dot, not "a.com"'],
    [String.raw`http.host ~ "["a]\""`, 'quotes in and out of a class'],
  ]
  for (const [expression, what] of valid) {
    const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule', '--json', expression])
    t.equal(r.code, 0, what)
    t.equal(JSON.parse(r.stdout).expression, expression.replace(' ~ ', ' matches '), `${what}: printed as written`)
  }
  const invalid: ReadonlyArray<[string, string]> = [
    [String.raw`http.host matches "\101"`, String.raw`error: backreferences are not supported in Rust regex syntax ("\101") at 1:20` + '\n' + String.raw`  http.host matches "\101"` + '\n' + ' '.repeat(21) + '^\n'],
    [String.raw`http.host matches "a\"b\q"`, String.raw`error: escape "\q" is not valid in Rust regex syntax at 1:24` + '\n' + String.raw`  http.host matches "a\"b\q"` + '\n' + ' '.repeat(25) + '^\n'],
  ]
  for (const [expression, out] of invalid) {
    const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule', expression])
    t.equal(r.code, 1, expression)
    t.equal(r.stdout, out, expression)
  }
})

t.test('expression from stdin, final newline dropped', async (t) => {
  const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule'], { stdin: 'http.host eq "a"\n' })
  t.equal(r.code, 0)
  t.equal(r.stdout, 'ok\nfields: http.host\nphase: request\n')
  const bad = await runCommand(exprCommand, ['check', '--kind', 'waf_rule', '--json'], { stdin: 'http.host eq\r\n' })
  t.equal(bad.code, 1)
  t.equal(JSON.parse(bad.stdout).error.message, 'expected a value after "eq", found the end of the expression at 1:13')
})

t.test('empty stdin is an invalid (empty) expression', async (t) => {
  const r = await runCommand(exprCommand, ['check', '--kind', 'waf_rule'], { stdin: '' })
  t.equal(r.code, 1)
  t.equal(r.stdout, 'error: empty expression at 1:1\n  \n  ^\n')
})

t.test('usage errors exit 2', async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [[], /expr needs a subcommand: check/],
    [['lint'], /unknown expr subcommand "lint"; expected check/],
    [['check', 'ssl'], /--kind is required/],
    [['check', '--kind', 'access_rule', 'ssl'], /--kind must be waf_rule or smart_firewall_rule, not "access_rule"/],
    [['check', '--kind', 'waf_rule', '--phase', 'both', 'ssl'], /--phase must be request or response, not "both"/],
    [['check', '--kind', 'waf_rule', 'ssl', 'and', 'ssl'], /expected one expression, got 3 arguments \(quote the expression\)/],
    [['check', '--kind', 'waf_rule', '--color', 'ssl'], /Unknown option '--color'/],
    [['check', '--kind'], /argument missing/],
  ]
  for (const [args, message] of cases) {
    const r = await runCommand(exprCommand, args)
    t.equal(r.code, 2, args.join(' '))
    t.match(r.stderr, message, args.join(' '))
    t.equal(r.stdout, '', `${args.join(' ')}: nothing on stdout`)
  }
})

t.test('--help', async (t) => {
  for (const args of [['--help'], ['check', '--help'], ['-h']]) {
    const r = await runCommand(exprCommand, args)
    t.equal(r.code, 0)
    t.match(r.stdout, /^Usage: threatfeed expr check --kind waf_rule\|smart_firewall_rule/)
  }
  t.equal(exprCommand.name, 'expr')
})
