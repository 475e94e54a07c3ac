/**
 * Fuzzing the checker with fast-check: random text, token soup and mutations of valid rules
 * never make checkExpression throw, always answer with a well-formed result, and answer in
 * bounded time. Round trip: for generated valid rules, printing the AST and checking the text
 * again gives the same AST (source offsets aside) and the same canonical text.
 */
import t from 'tap'
import fc from 'fast-check'
import { checkExpression, printExpression, type CheckResult, type RuleKind } from '../../src/expr/check.js'
import { validCases } from './cases.js'
import { invalidCases } from './cases-invalid.js'

/**
 * Generous: a check takes microseconds; this only catches runaway work. CPU time, not wall
 * time, so that a busy machine (the test machine is shared) cannot make it flaky.
 */
const BOUND_MS = 250
const RUNS = 400

function checkBounded (kind: RuleKind, text: string): CheckResult {
  const c0 = process.cpuUsage()
  const r = checkExpression(kind, text)
  const c = process.cpuUsage(c0)
  const ms = (c.user + c.system) / 1000
  if (ms > BOUND_MS) throw new Error(`took ${ms.toFixed(1)} ms on ${JSON.stringify(text.slice(0, 80))}`)
  if (r.ok) {
    if (!Array.isArray(r.fields)) throw new Error('fields is not an array')
  } else {
    const e = r.error
    if (!(e.offset >= 0 && e.offset <= Math.max(text.length, 4096))) throw new Error(`offset ${e.offset} out of range`)
    if (!e.message.endsWith(` at ${e.line}:${e.column}`)) throw new Error(`message without its position: ${e.message}`)
    if (e.message.startsWith('internal error')) throw new Error(e.message)
  }
  return r
}

/** Offsets are where the source said things; the round trip compares everything else. */
function withoutOffsets (ast: unknown): unknown {
  return JSON.parse(JSON.stringify(ast, (k, v: unknown) => (k === 'pos' || k === 'opPos' ? undefined : v)))
}

const kind = fc.constantFrom<RuleKind>('waf_rule', 'smart_firewall_rule')

const TOKENS = [
  'http.host', 'ip.src', 'ssl', 'tcp.flags', 'tcp.flags.syn', 'http.request.headers', 'http.request.headers.names', 'http.response.code',
  'lower', 'any', 'all', 'len', 'concat', 'cidr', 'url_decode', 'lookup_json_string',
  'eq', '==', 'ne', '!=', '<', '<=', '>', 'ge', 'contains', 'matches', '~', 'wildcard', 'strict', 'in', '&', 'bitwise_and',
  'and', '&&', 'or', '||', 'xor', '^^', 'not', '!', '(', ')', '{', '}', '[', ']', '[*]', '[0]', '["a"]', ',', ' ', '\n',
  '"a"', '"\\x41"', '"\\"', '"', 'r"', 'r#"x"#', '#', '1', '-1', '0x1f', '017', '80..90', '10.0.0.0/8', '1.2.3.4', '::1', '2001:db8::/32', '1.2.3.4..1.2.3.9',
  '"(?=a)"', '"(a|b)*"', '"\\\\p{L}"', '"[a-"', '"*.com"', '"**"', '$list', 'AND', 'EQ', '\u0000', '😀', '\ud800',
]
const tokenSoup = fc.array(fc.constantFrom(...TOKENS), { maxLength: 40 }).map((xs) => xs.join(' '))
const tokenGlue = fc.array(fc.constantFrom(...TOKENS), { maxLength: 40 }).map((xs) => xs.join(''))

const seeds = [...validCases, ...invalidCases].map((c) => c.input).filter((s) => s.length < 600)
/** One random edit: insert a token or a character, delete a slice, duplicate a slice. */
const mutation = fc.tuple(fc.constantFrom(...seeds), fc.nat(), fc.nat(8), fc.oneof(fc.constantFrom(...TOKENS), fc.string({ maxLength: 3, unit: 'binary' })), fc.nat(3))
  .map(([s, at, len, insert, how]) => {
    const i = at % (s.length + 1)
    if (how === 0) return s.slice(0, i) + insert + s.slice(i)
    if (how === 1) return s.slice(0, i) + s.slice(i + len)
    if (how === 2) return s.slice(0, i) + s.slice(i, i + len) + s.slice(i)
    return s.slice(0, i) + insert + s.slice(i + len)
  })

t.test('random text never throws and answers in bounded time', async () => {
  fc.assert(fc.property(kind, fc.string({ maxLength: 300, unit: 'binary' }), (k, s) => { checkBounded(k, s) }), { numRuns: RUNS })
  fc.assert(fc.property(kind, fc.string({ maxLength: 300, unit: 'grapheme-ascii' }), (k, s) => { checkBounded(k, s) }), { numRuns: RUNS })
})

t.test('token soup never throws', async () => {
  fc.assert(fc.property(kind, fc.oneof(tokenSoup, tokenGlue), (k, s) => { checkBounded(k, s) }), { numRuns: RUNS * 2 })
})

t.test('mutations of the case table never throw', async () => {
  fc.assert(fc.property(kind, mutation, (k, s) => { checkBounded(k, s) }), { numRuns: RUNS * 3 })
})

t.test('long hostile input stays bounded', async (t) => {
  const hostile = [
    '('.repeat(4096), 'not '.repeat(1024), '!'.repeat(4096), 'ssl and '.repeat(511) + 'ssl', `ip.src in {${'1.2.3.4 '.repeat(510)}}`,
    `http.host matches "${'(a|'.repeat(1300)}"`, `http.host wildcard "${'*a'.repeat(2000)}"`, `${'any('.repeat(1000)}`, '"'.repeat(4096), 'r' + '#'.repeat(4000),
    `lower(${'lower('.repeat(800)}`, `http.request.headers${'[*]'.repeat(1300)}`, `ip.src in {${'::1 '.repeat(1000)}}`,
  ]
  for (const s of hostile) t.doesNotThrow(() => checkBounded('waf_rule', s), s.slice(0, 30))
})

// --- round trip over generated valid rules ---

const str = fc.oneof(
  fc.string({ maxLength: 12, unit: 'grapheme' }).map((s) => JSON.stringify(s).replace(/\\u00([0-9a-f]{2})/g, '\\x$1').replace(/\\[nrtbf]/g, '\\x20')),
  fc.string({ maxLength: 12, unit: 'grapheme-ascii' }).filter((s) => !s.includes('"')).map((s) => `r"${s}"`),
  fc.string({ maxLength: 12, unit: 'grapheme-ascii' }).map((s) => `r##"${s.replace(/"#/g, '')}"##`),
  fc.integer({ min: 0, max: 255 }).map((b) => `"\\x${b.toString(16).padStart(2, '0')}\\${(b & 0o377).toString(8).padStart(3, '0')}"`),
)
const int = fc.oneof(fc.integer({ min: -1e6, max: 1e9 }).map(String), fc.nat(0xffffff).map((n) => `0x${n.toString(16)}`), fc.nat(0o7777).map((n) => `0${n.toString(8)}`))
const ipv4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join('.'))
const ipv6 = fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 }).map((g) => g.map((x) => x.toString(16)).join(':').replace(/(^|:)0(:0)+(:|$)/, '::'))
const net = fc.tuple(fc.oneof(ipv4, ipv6), fc.nat(128)).map(([ip, bits]) => {
  const max = ip.includes(':') ? 128 : 32
  return `${ip.includes(':') ? '::' : '0.0.0.0'}/${bits % (max + 1)}`
})
const ipValue = fc.oneof(ipv4, ipv6, net, ipv4.map((a) => `${a}..255.255.255.255`))
const intValue = fc.oneof(int, fc.tuple(fc.nat(1000), fc.nat(1000)).map(([a, b]) => `${Math.min(a, b)}..${Math.max(a, b)}`))

const wafClause = fc.oneof(
  fc.tuple(fc.constantFrom('eq', '==', 'ne', '!=', 'lt', '<=', 'contains', 'matches', '~'), str).map(([op, v]) => `http.host ${op} ${/matches|~/.test(op) ? '"a.b"' : v}`),
  fc.tuple(fc.constantFrom('wildcard', 'strict wildcard'), fc.constantFrom('"*.example.com"', 'r"/a/\\*"', '""')).map(([op, v]) => `http.request.uri.path ${op} ${v}`),
  fc.array(str, { minLength: 1, maxLength: 4 }).map((vs) => `http.request.method in {${vs.join(' ')}}`),
  fc.array(ipValue, { minLength: 1, maxLength: 4 }).map((vs) => `ip.src in {${vs.join(' ')}}`),
  ipv4.map((a) => `ip.src eq ${a}`),
  fc.array(intValue, { minLength: 1, maxLength: 4 }).map((vs) => `ip.src.asnum in {${vs.join(' ')}}`),
  fc.tuple(fc.constantFrom('<', 'gt', '>=', 'le'), int).map(([op, v]) => `http.request.body.size ${op} ${v}`),
  fc.constantFrom('ssl', 'http.request.body.truncated', 'any(http.request.headers.names[*] eq "x")', 'all(lower(http.request.headers["a"][*])[*] contains "b")',
    'len(http.request.uri.query) gt 10', 'cidr(ip.src, 24, 64) eq 10.0.0.0', 'lookup_json_integer(http.request.body.raw, "a", 0) eq 1', 'http.request.cookies["s"][0] eq "x"'),
)
const sfClause = fc.oneof(
  fc.array(intValue, { minLength: 1, maxLength: 5 }).map((vs) => `tcp.dstport in {${vs.join(' ')}}`),
  fc.tuple(fc.constantFrom('&', 'bitwise_and'), fc.nat(255)).map(([op, v]) => `tcp.flags ${op} ${v}`),
  fc.constantFrom('tcp.flags.syn', 'tcp.flags.ack', 'ip.proto eq "udp"', 'tls.ja4 eq "t13d"', 'icmp.type eq 8'),
  fc.array(ipValue, { minLength: 1, maxLength: 4 }).map((vs) => `ip.dst in {${vs.join(' ')}}`),
)

function expression (clause: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const { e } = fc.letrec<{ e: string }>((tie) => ({
    e: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      clause,
      tie('e').map((x) => `not ${x.startsWith('not') ? `(${x})` : x}`),
      tie('e').map((x) => `!(${x})`),
      tie('e').map((x) => `(${x})`),
      fc.tuple(tie('e'), fc.constantFrom('and', '&&', 'or', '||', 'xor', '^^'), tie('e')).map(([a, op, b]) => `${a} ${op} ${b}`),
    ),
  }))
  return e
}

t.test('round trip: print, re-check, same AST and same text', async () => {
  const rules = fc.oneof(
    expression(wafClause).map((text) => ({ kind: 'waf_rule' as const, text })),
    expression(sfClause).map((text) => ({ kind: 'smart_firewall_rule' as const, text })),
  ).filter(({ text }) => text.length <= 4096)
  fc.assert(fc.property(rules, ({ kind, text }) => {
    const first = checkBounded(kind, text)
    if (!first.ok) throw new Error(`generated rule rejected: ${first.error.message}\n${text}`)
    const printed = printExpression(first.ast)
    const second = checkBounded(kind, printed)
    if (!second.ok) throw new Error(`printed rule rejected: ${second.error.message}\n${printed}`)
    if (JSON.stringify(withoutOffsets(second.ast)) !== JSON.stringify(withoutOffsets(first.ast))) throw new Error(`AST changed:\n${text}\n${printed}`)
    if (printExpression(second.ast) !== printed) throw new Error('printing is not idempotent')
    if (JSON.stringify(second.fields) !== JSON.stringify(first.fields) || second.phase !== first.phase) throw new Error('fields or phase changed')
  }), { numRuns: RUNS * 2 })
})
