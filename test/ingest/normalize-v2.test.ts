import t from 'tap'
import { normalizeV2 } from '../../src/ingest/normalize-v2.js'
import fc from 'fast-check'
import { toV2Payload, type AccessUpsert } from '../../src/ingest/commands.js'
import type { EntryChecks } from '../../src/ingest/entry-rules.js'

const checks: EntryChecks = { asnExists: (asn) => asn === 1221, checkExpressions: true }
const fail = (path: string, message: string, value: unknown) => ({ ok: false, failure: { path, message, value } })
const access = (rule: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ kind: 'access_rule', op: 'upsert', rule, ...extra })
const accessCmd = (target: { type: string, value: string }, extra: Record<string, unknown> = {}) => ({
  ok: true,
  command: { kind: 'access_rule', op: 'upsert', ruleRef: null, target, action: 'block', name: null, reason: null, labels: {}, confidence: null, severity: null, expiresIn: 86400, ...extra },
})
const waf = (rule: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ kind: 'waf_rule', op: 'upsert', rule_ref: 'r1', rule: { type: 'custom', expression: 'http.host eq "a.example"', action: 'block', ...rule }, ...extra })
const wafCmd = (extra: Record<string, unknown> = {}) => ({
  ok: true,
  command: {
    kind: 'waf_rule', op: 'upsert', ruleRef: 'r1', name: 'r1', type: 'custom', expression: 'http.host eq "a.example"', action: 'block', phase: null, order: null, shortDescription: null, config: {}, reason: null, labels: {}, expiresIn: null, ...extra,
  },
})
const sfw = (rule: Record<string, unknown>) => ({ kind: 'smart_firewall_rule', op: 'upsert', rule_ref: 's1', rule: { type: 'generated', expression: 'ip.src eq 192.0.2.1', action: 'block', ...rule } })

const cases: Array<{ description: string, input: unknown, expected: unknown }> = [
  // --- envelope ---
  { description: 'schema_version defaults to 2', input: access({ target: { ip: '192.0.2.1' } }), expected: accessCmd({ type: 'ip', value: '192.0.2.1/32' }) },
  { description: 'schema_version 2', input: access({ target: { ip: '192.0.2.1' } }, { schema_version: 2 }), expected: accessCmd({ type: 'ip', value: '192.0.2.1/32' }) },
  { description: 'schema_version 1 fails', input: access({ target: { ip: '192.0.2.1' } }, { schema_version: 1 }), expected: fail('schema_version', 'must be 2', 1) },
  { description: 'schema_version "2" fails', input: access({ target: { ip: '192.0.2.1' } }, { schema_version: '2' }), expected: fail('schema_version', 'must be 2', '2') },
  { description: 'unknown kind', input: { kind: 'dns_rule', op: 'upsert' }, expected: fail('kind', 'must be one of access_rule, waf_rule, smart_firewall_rule', 'dns_rule') },
  { description: 'unknown op', input: { kind: 'access_rule', op: 'remove' }, expected: fail('op', 'must be one of upsert, delete', 'remove') },
  { description: 'missing op', input: { kind: 'access_rule' }, expected: fail('op', 'is required', null) },
  { description: 'empty rule_ref', input: access({ target: { ip: '192.0.2.1' } }, { rule_ref: '' }), expected: fail('rule_ref', 'must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$', '') },
  { description: 'rule_ref with a space', input: access({ target: { ip: '192.0.2.1' } }, { rule_ref: 'a b' }), expected: fail('rule_ref', 'must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$', 'a b') },
  { description: 'upsert without rule', input: { kind: 'access_rule', op: 'upsert' }, expected: fail('rule', 'is required when op is upsert', null) },
  // --- access rules ---
  { description: 'keyed access rule', input: access({ target: { country: 'fr' }, action: 'ALLOW' }, { rule_ref: 'ops:fr-1', expires_in: 0 }), expected: accessCmd({ type: 'country', value: 'FR' }, { ruleRef: 'ops:fr-1', action: 'allow', expiresIn: null }) },
  { description: 'allow with expiry floored', input: access({ target: { ip: '10.0.0.0/8' }, action: 'allow' }, { expires_in: 5 }), expected: accessCmd({ type: 'ip', value: '10.0.0.0/8' }, { action: 'allow', expiresIn: 60 }) },
  { description: 'negative expires_in', input: access({ target: { ip: '10.0.0.0/8' } }, { expires_in: -1 }), expected: fail('expires_in', 'must not be negative', -1) },
  { description: 'invalid target', input: access({ target: { ip: '10.0.0.0/4' } }), expected: fail('rule.target.ip', 'IPv4 prefixes shorter than /8 are refused', '10.0.0.0/4') },
  { description: 'target ASN not in database', input: access({ target: { asn: 'AS64512' } }), expected: fail('rule.target.asn', 'AS64512 is not in the ASN database', 'AS64512') },
  { description: 'two targets', input: access({ target: { ip: '10.0.0.1', asn: 'AS1221' } }), expected: fail('rule.target', 'exactly one of ip, asn, country is allowed (got ip, asn)', { ip: '10.0.0.1', asn: 'AS1221' }) },
  { description: 'no target', input: access({}), expected: fail('rule.target', 'is required', null) },
  { description: 'unknown rule field', input: access({ target: { ip: '10.0.0.1' }, name: 'x' }), expected: fail('rule.name', 'is not an allowed field', 'x') },
  { description: 'action other than block/allow', input: access({ target: { ip: '10.0.0.1' }, action: 'challenge' }), expected: fail('rule.action', 'must be one of block, allow', 'challenge') },
  { description: 'reason and labels', input: access({ target: { ip: '10.0.0.1' } }, { reason: 'scanner', labels: { confidence: 'HIGH', severity: 'Low', src: 'ids', n: 3, b: true } }), expected: accessCmd({ type: 'ip', value: '10.0.0.1/32' }, { reason: 'scanner', labels: { confidence: 'high', severity: 'low', src: 'ids', n: 3, b: true }, confidence: 'high', severity: 'low' }) },
  { description: 'labels over 4 KiB', input: access({ target: { ip: '10.0.0.1' } }, { labels: { a: 'x'.repeat(4090) } }), expected: fail('labels', 'must be at most 4096 bytes as JSON (got 4098)', { a: 'x'.repeat(4090) }) },
  { description: 'labels $ key', input: access({ target: { ip: '10.0.0.1' } }, { labels: { $ne: 1 } }), expected: fail('labels.$ne', 'key is not allowed (reserved name or starting with $)', '$ne') },
  { description: 'labels prototype key', input: access({ target: { ip: '10.0.0.1' } }, { labels: { prototype: 'x' } }), expected: fail('labels.prototype', 'key is not allowed (reserved name or starting with $)', 'prototype') },
  { description: 'delete by rule_ref', input: { kind: 'access_rule', op: 'delete', rule_ref: 'x1', expires_in: -4 }, expected: { ok: true, command: { kind: 'access_rule', op: 'delete', ruleRef: 'x1', target: null } } },
  { description: 'delete by target', input: { kind: 'access_rule', op: 'delete', rule: { target: { asn: 'as1221' } } }, expected: { ok: true, command: { kind: 'access_rule', op: 'delete', ruleRef: null, target: { type: 'asn', value: 'AS1221' } } } },
  { description: 'delete with neither', input: { kind: 'access_rule', op: 'delete' }, expected: fail('rule.target', 'is required to delete an access rule without rule_ref', null) },
  { description: 'delete with a bad target', input: { kind: 'access_rule', op: 'delete', rule: { target: { country: 'ZZ' } } }, expected: fail('rule.target.country', 'must be an ISO-3166 alpha-2 code', 'ZZ') },
  // --- expression rules ---
  { description: 'waf rule, values lowercased, phase into config', input: waf({ type: 'Generated', action: 'ChAllenge', phase: 'REQUEST', order: 3, short_description: 'sd', config: { sensitivity: 'high' } }, { expires_in: 30 }), expected: wafCmd({ type: 'generated', action: 'challenge', phase: 'request', order: 3, shortDescription: 'sd', config: { sensitivity: 'high', phase: 'request' }, expiresIn: 30 }) },
  { description: 'name given', input: waf({ name: 'Block host' }), expected: wafCmd({ name: 'Block host' }) },
  { description: 'waf rule_ref required', input: { kind: 'waf_rule', op: 'upsert', rule: { type: 'custom', expression: 'x', action: 'block' } }, expected: fail('rule_ref', 'is required for kind waf_rule', null) },
  { description: 'smart firewall rule_ref required on delete', input: { kind: 'smart_firewall_rule', op: 'delete' }, expected: fail('rule_ref', 'is required for kind smart_firewall_rule', null) },
  { description: 'waf delete ignores rule', input: { kind: 'waf_rule', op: 'delete', rule_ref: 'r1', rule: { nonsense: true } }, expected: { ok: true, command: { kind: 'waf_rule', op: 'delete', ruleRef: 'r1' } } },
  { description: 'expression required', input: waf({ expression: undefined }), expected: fail('rule.expression', 'is required', null) },
  { description: 'action required', input: waf({ action: undefined }), expected: fail('rule.action', 'is required', null) },
  { description: 'unparseable expression', input: waf({ expression: 'http.host eq' }), expected: { ok: false, failure: { path: 'rule.expression', message: String((normalizeV2(waf({ expression: 'http.host eq' }), checks) as { failure: { message: string } }).failure.message), value: 'http.host eq' } } },
  { description: 'waf field in a smart firewall rule', input: sfw({ expression: 'http.host eq "x"' }), expected: fail('rule.expression', 'layer-7 field "http.host" is not allowed in smart firewall rules (they act on layer 3/4 packets, before any HTTP request exists) at 1:1', 'http.host eq "x"') },
  { description: 'smart firewall action challenge', input: sfw({ action: 'challenge' }), expected: fail('rule.action', 'must be one of block, allow for kind smart_firewall_rule', 'challenge') },
  { description: 'smart firewall phase', input: sfw({ phase: 'request' }), expected: fail('rule.phase', 'is not allowed for kind smart_firewall_rule (layer 3/4 rules have no phase)', 'request') },
  { description: 'negative expires_in on expression rule', input: waf({}, { expires_in: -10 }), expected: fail('expires_in', 'must not be negative', -10) },
  { description: 'config with $ key', input: waf({ config: { a: { $set: 1 } } }), expected: fail('rule.config.a.$set', 'key is not allowed (reserved name or starting with $)', '$set') },
  { description: 'config nested too deep', input: waf({ config: JSON.parse('{"a":'.repeat(40) + '1' + '}'.repeat(40)) as unknown }), expected: fail('rule.config' + '.a'.repeat(30), 'is nested deeper than 32 levels', null) },
]

t.test('v2 entries', async (t) => {
  for (const c of cases) t.same(normalizeV2(c.input, checks), c.expected, c.description)
})

t.test('the unparseable-expression message carries a position', async (t) => {
  const r = normalizeV2(waf({ expression: 'http.host eq' }), checks)
  t.match(r, { ok: false, failure: { message: / at 1:\d+$/ } })
})

t.test('the canonical payload normalizes back to the same command (fixed point)', async (t) => {
  for (const c of cases) {
    const r = normalizeV2(c.input, checks)
    if (!r.ok) continue
    const again = normalizeV2(JSON.parse(toV2Payload(r.command)), checks)
    t.same(again, r, c.description)
  }
})

t.test('labels at the 4 KiB cap, with escapes counted as sent', async (t) => {
  // {"a":"…"} is 8 bytes of JSON around the value.
  const at = (value: string) => normalizeV2(access({ target: { ip: '10.0.0.1' } }, { labels: { a: value } }), checks)
  t.equal(at('x'.repeat(4088)).ok, true, 'exactly 4096 bytes')
  t.same(at('x'.repeat(4089)), fail('labels', 'must be at most 4096 bytes as JSON (got 4097)', { a: 'x'.repeat(4089) }))
  t.same(at('"'.repeat(2045)), fail('labels', 'must be at most 4096 bytes as JSON (got 4098)', { a: '"'.repeat(2045) }), 'escaped quotes count twice')
  t.equal(at('é'.repeat(2044)).ok, true, '2-byte characters: 4096 bytes')
  t.equal(at('é'.repeat(2045)).ok, false)
})

t.test('the payload of an access upsert, written as text, is JSON.stringify of its envelope byte for byte', async (t) => {
  const text = fc.string({ unit: 'binary', maxLength: 40 })
  const command = fc.record({
    ruleRef: fc.option(text, { nil: null }),
    target: fc.oneof(
      fc.record({ type: fc.constant('ip' as const), value: fc.constantFrom('192.0.2.0/24', '2001:db8::/32') }),
      fc.record({ type: fc.constant('asn' as const), value: fc.constant('AS1221') }),
      fc.record({ type: fc.constant('country' as const), value: fc.constant('NZ') }),
    ),
    action: fc.constantFrom('block' as const, 'allow' as const),
    reason: fc.option(text, { nil: null }),
    labels: fc.dictionary(text, fc.oneof(text, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean()), { maxKeys: 4 }),
    expiresIn: fc.option(fc.oneof(fc.integer({ min: 1, max: 2 ** 31 }), fc.double({ min: 0.001, max: 1e9, noNaN: true })), { nil: null }),
  })
  fc.assert(fc.property(command, (c) => {
    const full: AccessUpsert = { kind: 'access_rule', op: 'upsert', name: null, confidence: null, severity: null, ...c }
    // The envelope as an object, in the order of SPEC 2.2's fields.
    const env: Record<string, unknown> = { schema_version: 2, kind: 'access_rule', op: 'upsert' }
    if (c.ruleRef !== null) env.rule_ref = c.ruleRef
    env.expires_in = c.expiresIn ?? 0
    if (c.reason !== null) env.reason = c.reason
    if (Object.keys(c.labels).length > 0) env.labels = c.labels
    env.rule = { target: { [c.target.type]: c.target.value }, action: c.action }
    t.equal(toV2Payload(full), JSON.stringify(env))
    return true
  }), { numRuns: 500 })
})
