/**
 * Letter case is folded as ASCII only (DECISIONS §3): Unicode case mapping turned `ıt` (dotless
 * i) into IT and `ſe` (long s) into SE, so non-ASCII input became a valid code. Every
 * case-insensitive field of both versions, through HTTP: ASCII in any case passes and is stored
 * folded; anything that only Unicode mapping would fold fails the entry.
 */
import t from 'tap'
import { post, startTestServer } from '../helpers/server.js'
import type { AccessRule } from '../../src/store/types.js'

const srv = await startTestServer({ frontThreads: true })
t.teardown(() => srv.close())

const ISO = 'must be an ISO-3166 alpha-2 code'
const ASN = 'must be AS<digits> with a number from 1 to 4294967295'
const targets: Array<{ description: string, target: Record<string, string>, field: string, message: string }> = [
  { description: 'dotless i (U+0131), upper-cases to I', target: { country: 'ıt' }, field: 'country', message: ISO },
  { description: 'long s (U+017F), upper-cases to S', target: { country: 'ſe' }, field: 'country', message: ISO },
  { description: 'dotted capital I (U+0130)', target: { country: 'İT' }, field: 'country', message: ISO },
  { description: 'Kelvin sign (U+212A), which lower-cases to k', target: { country: '\u212AE' }, field: 'country', message: ISO },
  { description: 'fullwidth letters', target: { country: 'ＤＥ' }, field: 'country', message: ISO },
  { description: 'Cyrillic es and ie', target: { country: 'сн' }, field: 'country', message: ISO },
  { description: 'a combining mark after a letter', target: { country: 'D\u0301E' }, field: 'country', message: ISO },
  { description: 'ASN with long s for s', target: { asn: 'Aſ15169' }, field: 'asn', message: ASN },
  { description: 'ASN with fullwidth digits', target: { asn: 'AS１５１６９' }, field: 'asn', message: ASN },
  { description: 'ASN with small capital A (U+1D00)', target: { asn: '\u1D00S15169' }, field: 'asn', message: ASN },
]

t.test('non-ASCII letters in a target fail the entry, on v1 and v2', async (t) => {
  for (const c of targets) {
    const v1 = await post(srv, 'v1', [{ type: 'access_rules', action: 'block', ...c.target }])
    const value = Object.values(c.target)[0]
    t.same([v1.status, v1.body], [400, { error: 'ValidationError', message: 'Validation failed', code: 400, details: [{ field: `[0].${c.field}`, message: c.message, value }] }], `v1 ${c.description}`)
    const v2 = await post(srv, 'v2', [{ kind: 'access_rule', op: 'upsert', rule: { target: c.target } }])
    t.same([v2.status, v2.body], [400, { error: 'ValidationError', message: 'Validation failed', code: 400, details: [{ field: `[0].rule.target.${c.field}`, message: c.message, value }] }], `v2 ${c.description}`)
  }
})

t.test('non-ASCII letters in the case-insensitive enumerations fail the entry', async (t) => {
  const waf = (rule: Record<string, unknown>) => ({ kind: 'waf_rule', op: 'upsert', rule_ref: 'r1', rule: { type: 'custom', expression: 'ip.src eq 192.0.2.1', action: 'block', ...rule } })
  const cases: Array<{ description: string, entry: unknown, field: string }> = [
    { description: 'access action with a Kelvin sign', entry: { kind: 'access_rule', op: 'upsert', rule: { target: { ip: '192.0.2.1' }, action: 'bloc\u212A' } }, field: '[0].rule.action' },
    { description: 'waf action with a Kelvin sign', entry: waf({ action: 'bloc\u212A' }), field: '[0].rule.action' },
    { description: 'rule type with a long s', entry: waf({ type: 'cuſtom' }), field: '[0].rule.type' },
    { description: 'phase with a long s', entry: waf({ phase: 'reque\u017Ft' }), field: '[0].rule.phase' },
    { description: 'severity with a dotless i', entry: { ...waf({}), labels: { severity: 'hıgh' } }, field: '[0].labels.severity' },
  ]
  for (const c of cases) {
    const r = await post(srv, 'v2', [c.entry])
    const details = (r.body as { details?: Array<{ field: string }> }).details
    t.equal(r.status, 400, c.description)
    t.same(details?.map((d) => d.field), [c.field], `${c.description}: the field named`)
  }
})

t.test('ASCII in any case passes and is stored folded', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [[{ country: 'it' }, 'IT'], [{ country: 'sE' }, 'SE'], [{ asn: 'as15169' }, 'AS15169'], [{ asn: 'aS1221' }, 'AS1221']]
  const r1 = await post(srv, 'v1', cases.slice(0, 2).map(([target]) => ({ type: 'access_rules', action: 'block', ...target })))
  t.equal(r1.status, 200)
  const r2 = await post(srv, 'v2', cases.slice(2).map(([target]) => ({ kind: 'access_rule', op: 'upsert', rule: { target } })))
  t.equal(r2.status, 200)
  let stored = new Set<string>()
  for (let i = 0; i < 50 && stored.size < cases.length; i++) {
    stored = new Set(((await srv.store.rules.list(srv.workspace.id, 'access_rule', Date.now())) as AccessRule[]).map((x) => x.target.value))
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  for (const [target, value] of cases) t.ok(stored.has(value), `${JSON.stringify(target)} → ${value}`)
})
