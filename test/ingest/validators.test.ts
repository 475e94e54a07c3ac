import t from 'tap'
import { readFileSync } from 'node:fs'
import { buildValidatorSource, GENERATED_PATH } from '../../scripts/generate-validators.js'
import { checkSchema, joinPath } from '../../src/ingest/validators.js'
import type { SchemaName } from '../../src/ingest/schemas.js'

t.test('the committed validators are exactly what the schemas compile to', async (t) => {
  // If this fails: node --import=tsx scripts/generate-validators.ts, and commit the result.
  t.equal(readFileSync(GENERATED_PATH, 'utf8'), buildValidatorSource())
})

t.test('schema failures: path, message and offending value', async (t) => {
  const cases: Array<{ description: string, schema: SchemaName, input: unknown, prefix?: string, expected: unknown }> = [
    { description: 'valid v1', schema: 'SignalEventV1', input: { type: 'access_rules', action: 'block', ip: '1.2.3.4' }, expected: null },
    { description: 'missing field', schema: 'SignalEventV1', input: { type: 'access_rules' }, expected: { path: 'action', message: 'is required', value: null } },
    { description: 'unknown field', schema: 'SignalEventV1', input: { type: 'access_rules', action: 'block', ipp: 'x' }, expected: { path: 'ipp', message: 'is not an allowed field', value: 'x' } },
    { description: 'const', schema: 'SignalEventV1', input: { type: 'access_rule', action: 'block' }, expected: { path: 'type', message: 'must be "access_rules"', value: 'access_rule' } },
    { description: 'enum', schema: 'SignalEventV1', input: { type: 'access_rules', action: 'ban' }, expected: { path: 'action', message: 'must be one of block, unblock', value: 'ban' } },
    { description: 'string type', schema: 'SignalEventV1', input: { type: 'access_rules', action: 'block', ip: 3 }, expected: { path: 'ip', message: 'must be a string', value: 3 } },
    { description: 'integer type', schema: 'SignalEventV1', input: { type: 'access_rules', action: 'block', expiration: 1.5 }, expected: { path: 'expiration', message: 'must be an integer', value: 1.5 } },
    { description: 'integer as string', schema: 'SignalEventV1', input: { type: 'access_rules', action: 'block', expiration: '60' }, expected: { path: 'expiration', message: 'must be an integer', value: '60' } },
    { description: 'maximum', schema: 'SignalEventV1', input: { type: 'access_rules', action: 'block', expiration: 2 ** 31 }, expected: { path: 'expiration', message: 'must be at most 2147483647', value: 2 ** 31 } },
    { description: 'maxLength counts code points', schema: 'SignalEventV1', input: { type: 'access_rules', action: 'block', name: '😀'.repeat(1024) }, expected: null },
    { description: 'maxLength', schema: 'SignalEventV1', input: { type: 'access_rules', action: 'block', name: 'x'.repeat(1025) }, expected: { path: 'name', message: 'must be at most 1024 characters', value: 'x'.repeat(1025) } },
    { description: 'schema_version const', schema: 'SignalEnvelopeV2', input: { schema_version: 1, kind: 'waf_rule', op: 'upsert' }, expected: { path: 'schema_version', message: 'must be 2', value: 1 } },
    { description: 'rule_ref pattern', schema: 'SignalEnvelopeV2', input: { kind: 'waf_rule', op: 'upsert', rule_ref: '' }, expected: { path: 'rule_ref', message: 'must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$', value: '' } },
    { description: 'rule_ref too long', schema: 'SignalEnvelopeV2', input: { kind: 'waf_rule', op: 'upsert', rule_ref: 'a'.repeat(129) }, expected: { path: 'rule_ref', message: 'must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$', value: 'a'.repeat(129) } },
    { description: 'labels value type', schema: 'SignalEnvelopeV2', input: { kind: 'waf_rule', op: 'upsert', labels: { a: { b: 1 } } }, expected: { path: 'labels.a', message: 'must be a string, a number or a boolean', value: { b: 1 } } },
    { description: 'labels null value', schema: 'SignalEnvelopeV2', input: { kind: 'waf_rule', op: 'upsert', labels: { a: null } }, expected: { path: 'labels.a', message: 'must be a string, a number or a boolean', value: null } },
    { description: 'labels confidence', schema: 'SignalEnvelopeV2', input: { kind: 'waf_rule', op: 'upsert', labels: { confidence: 'sure' } }, expected: { path: 'labels.confidence', message: 'must be one of low, medium, high', value: 'sure' } },
    { description: 'labels severity any case', schema: 'SignalEnvelopeV2', input: { kind: 'waf_rule', op: 'upsert', labels: { severity: 'CriTical' } }, expected: null },
    { description: 'labels key with a slash', schema: 'SignalEnvelopeV2', input: { kind: 'waf_rule', op: 'upsert', labels: { 'a/b~c': [] } }, expected: { path: 'labels.a/b~c', message: 'must be a string, a number or a boolean', value: [] } },
    { description: 'labels over 64 keys', schema: 'SignalEnvelopeV2', input: { kind: 'waf_rule', op: 'upsert', labels: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i])) }, expected: { path: 'labels', message: 'must have at most 64 keys', value: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i])) } },
    { description: 'rule body prefix', schema: 'AccessRuleBody', prefix: 'rule', input: { target: { ip: 1 } }, expected: { path: 'rule.target.ip', message: 'must be a string', value: 1 } },
    { description: 'rule body action', schema: 'AccessRuleBody', prefix: 'rule', input: { target: {}, action: 'deny' }, expected: { path: 'rule.action', message: 'must be one of block, allow', value: 'deny' } },
    { description: 'expression type', schema: 'ExpressionRuleBody', prefix: 'rule', input: { expression: 'x', action: 'block', type: 'auto' }, expected: { path: 'rule.type', message: 'must be one of custom, generated', value: 'auto' } },
    { description: 'expression phase', schema: 'ExpressionRuleBody', prefix: 'rule', input: { expression: 'x', action: 'block', phase: 'body' }, expected: { path: 'rule.phase', message: 'must be one of request, response', value: 'body' } },
    { description: 'object type', schema: 'ExpressionRuleBody', prefix: 'rule', input: { expression: 'x', action: 'block', config: [] }, expected: { path: 'rule.config', message: 'must be an object', value: [] } },
    { description: 'entry not an object', schema: 'SignalEnvelopeV2', input: 'x', expected: { path: '', message: 'must be an object', value: 'x' } },
  ]
  for (const c of cases) t.same(checkSchema(c.schema, c.input, c.prefix ?? ''), c.expected, c.description)
})

t.test('joinPath', async (t) => {
  t.equal(joinPath('', []), '')
  t.equal(joinPath('', ['a', 'b']), 'a.b')
  t.equal(joinPath('rule', ['target']), 'rule.target')
})
