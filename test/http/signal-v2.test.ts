/**
 * POST /v2/signal end to end: outcomes, the whole-batch rule.type rejection, identity by
 * rule_ref, storage per kind, expiry and labels (SPEC 2.2–2.5, 4.2, §3; DECISIONS §3).
 */
import t from 'tap'
import { post, startTestServer, withoutReceipt } from '../helpers/server.js'
import type { AccessRule, ExpressionRule, RuleKind } from '../../src/store/types.js'

const srv = await startTestServer({ frontThreads: true })
t.teardown(() => srv.close())
const ws = srv.workspace.id
const list = async (kind: RuleKind) => srv.store.rules.list(ws, kind, Date.now())
const settle = async () => { await srv.consumer.waitFor(await srv.store.stream.head(), 1000) }
const waf = (ref: string, rule: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
  kind: 'waf_rule', op: 'upsert', rule_ref: ref, rule: { type: 'custom', expression: 'http.request.uri.path contains "/admin"', action: 'block', ...rule }, ...extra,
})
const sfw = (ref: string, rule: Record<string, unknown> = {}) => ({
  kind: 'smart_firewall_rule', op: 'upsert', rule_ref: ref, rule: { type: 'generated', expression: 'ip.src in {192.0.2.0/24}', action: 'block', ...rule },
})

t.test('outcomes and exact bodies', async (t) => {
  const cases: Array<{ description: string, body: string | unknown[], status: number, expected: unknown }> = [
    { description: 'all succeed: errors is always there', body: [waf('ok-1'), sfw('ok-2')], status: 200, expected: { success: true, message: 'Processed 2 entries, 0 failed', errors: [] } },
    {
      description: 'entry failures of SPEC 4.2',
      body: [
        waf('p-1', { expression: 'http.host eq' }),
        sfw('p-2', { expression: 'http.host eq "a"' }),
        { kind: 'waf_rule', op: 'upsert', rule: { type: 'custom', expression: 'http.host eq "a"', action: 'block' } },
        { kind: 'access_rule', op: 'upsert', rule: { target: { ip: '300.1.1.1' } } },
        { kind: 'access_rule', op: 'upsert', rule: { target: { ip: '192.0.2.1' } } },
      ],
      status: 206,
      expected: {
        success: false,
        message: 'Processed 5 entries, 4 failed',
        errors: [
          'Entry 0: rule.expression: expected a value after "eq", found the end of the expression at 1:13',
          'Entry 1: rule.expression: layer-7 field "http.host" is not allowed in smart firewall rules (they act on layer 3/4 packets, before any HTTP request exists) at 1:1',
          'Entry 2: rule_ref: is required for kind waf_rule',
          'Entry 3: rule.target.ip: IPv4 octet 300 is out of range',
        ],
      },
    },
    {
      description: 'missing rule.type rejects the whole batch',
      body: [waf('t-1'), { kind: 'smart_firewall_rule', op: 'upsert', rule_ref: 't-2', rule: { expression: 'ip.src eq 192.0.2.1', action: 'block' } }],
      status: 400,
      expected: {
        error: 'ValidationError',
        message: 'rule.type is required and must be one of custom, generated',
        code: 400,
        details: [{ field: '[1].rule.type', message: 'is required and must be one of custom, generated', value: null }],
      },
    },
    {
      description: 'empty rule.type rejects the whole batch',
      body: [waf('t-3', { type: '' })],
      status: 400,
      expected: {
        error: 'ValidationError',
        message: 'rule.type is required and must be one of custom, generated',
        code: 400,
        details: [{ field: '[0].rule.type', message: 'is required and must be one of custom, generated', value: '' }],
      },
    },
    {
      description: 'every entry fails',
      body: [
        { schema_version: 3, kind: 'access_rule', op: 'delete', rule_ref: 'x' },
        { kind: 'access_rule', op: 'upsert', rule_ref: '', rule: { target: { ip: '192.0.2.1' } } },
        { kind: 'access_rule', op: 'upsert', rule: { target: { ip: '192.0.2.1' } }, labels: { confidence: 'sure' } },
        { kind: 'access_rule', op: 'upsert', rule: { target: { ip: '192.0.2.1' } }, labels: { severity: 'urgent' } },
        sfw('ph-1', { phase: 'request' }),
        { kind: 'access_rule', op: 'delete' },
        waf('ex-1', {}, { expires_in: -1 }),
      ],
      status: 400,
      expected: {
        error: 'ValidationError',
        message: 'Validation failed',
        code: 400,
        details: [
          { field: '[0].schema_version', message: 'must be 2', value: 3 },
          { field: '[1].rule_ref', message: 'must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$', value: '' },
          { field: '[2].labels.confidence', message: 'must be one of low, medium, high', value: 'sure' },
          { field: '[3].labels.severity', message: 'must be one of low, medium, high, critical', value: 'urgent' },
          { field: '[4].rule.phase', message: 'is not allowed for kind smart_firewall_rule (layer 3/4 rules have no phase)', value: 'request' },
          { field: '[5].rule.target', message: 'is required to delete an access rule without rule_ref', value: null },
          { field: '[6].expires_in', message: 'must not be negative', value: -1 },
        ],
      },
    },
    { description: 'batch size', body: [], status: 400, expected: { error: 'BadRequestError', message: 'batch must contain 1 to 1000 entries (got 0)', code: 400 } },
  ]
  for (const c of cases) {
    const r = await post(srv, 'v2', c.body)
    t.equal(r.status, c.status, c.description)
    t.same(withoutReceipt(r.body), c.expected, c.description)
  }
  await settle()
  t.notOk((await list('waf_rule')).some((r) => r.ruleRef === 't-1'), 'nothing of a rejected batch is applied')
})

t.test('rule_ref identity: upsert updates in place, per kind store, lowercase values, phase in config', async (t) => {
  t.equal((await post(srv, 'v2', [waf('sqli-1', { name: 'SQLi', type: 'Custom', action: 'CHALLENGE', phase: 'Request', order: 5, short_description: 'sd', config: { sensitivity: 'high' } }, { reason: 'r', labels: { team: 'sec' } })])).status, 200)
  await settle()
  const [first] = (await list('waf_rule')).filter((r) => r.ruleRef === 'sqli-1') as ExpressionRule[]
  t.match(first, { kind: 'waf_rule', name: 'SQLi', type: 'custom', action: 'challenge', order: 5, shortDescription: 'sd', config: { sensitivity: 'high', phase: 'request' }, reason: 'r', labels: { team: 'sec' }, expiresAt: null })
  t.equal((await post(srv, 'v2', [waf('sqli-1', { type: 'generated', action: 'block' }, { expires_in: 30 })])).status, 200)
  await settle()
  const again = (await list('waf_rule')).filter((r) => r.ruleRef === 'sqli-1') as ExpressionRule[]
  t.equal(again.length, 1, 'no duplicate')
  t.equal(again[0]!.id, first!.id)
  t.match(again[0], { type: 'generated', action: 'block', name: 'sqli-1', config: {} })
  t.ok(again[0]!.expiresAt! - Date.now() <= 30_000, 'expression rules keep positive expiry as sent (no 60 s floor)')

  await post(srv, 'v2', [sfw('l4-1', { action: 'Allow' })])
  await settle()
  t.match((await list('smart_firewall_rule')).filter((r) => r.ruleRef === 'l4-1'), [{ kind: 'smart_firewall_rule', action: 'allow', type: 'generated' }])
  t.notOk((await list('waf_rule')).some((r) => r.ruleRef === 'l4-1'), 'stored with its own kind only')
  t.notOk((await list('access_rule')).some((r) => r.ruleRef === 'l4-1'))
})

t.test('delete by rule_ref and by target; idempotent', async (t) => {
  await post(srv, 'v2', [
    { kind: 'access_rule', op: 'upsert', rule_ref: 'a-1', rule: { target: { ip: '198.18.0.0/15' } }, labels: { confidence: 'Medium', severity: 'CRITICAL' } },
    { kind: 'access_rule', op: 'upsert', rule: { target: { country: 'nl' }, action: 'allow' } },
  ])
  await settle()
  const access = (await list('access_rule')) as AccessRule[]
  t.match(access.find((r) => r.ruleRef === 'a-1'), { confidence: 'medium', severity: 'critical', labels: { confidence: 'medium', severity: 'critical' }, action: 'block' })
  t.match(access.find((r) => r.target.value === 'NL'), { action: 'allow', expiresAt: null, ruleRef: null })
  const del = await post(srv, 'v2', [
    { kind: 'access_rule', op: 'delete', rule_ref: 'a-1' },
    { kind: 'access_rule', op: 'delete', rule: { target: { country: 'NL' } } },
    { kind: 'waf_rule', op: 'delete', rule_ref: 'sqli-1' },
    { kind: 'waf_rule', op: 'delete', rule_ref: 'never-existed' },
  ])
  t.same(withoutReceipt(del.body), { success: true, message: 'Processed 4 entries, 0 failed', errors: [] })
  await settle()
  t.notOk((await list('access_rule')).some((r) => r.ruleRef === 'a-1' || (r as AccessRule).target.value === 'NL'))
  t.notOk((await list('waf_rule')).some((r) => r.ruleRef === 'sqli-1'))
})

t.test('a v2 stream record has schema_version 2', async (t) => {
  const head = await srv.store.stream.head()
  await post(srv, 'v2', [{ schema_version: 2, kind: 'access_rule', op: 'delete', rule_ref: 'zz' }])
  const [record] = await srv.store.stream.read(head + 1, 1)
  t.equal(record!.schemaVersion, 2)
  t.equal(record!.payload, '{"schema_version":2,"kind":"access_rule","op":"delete","rule_ref":"zz"}')
})
