/**
 * What the consumer reads back: a v2 record — the canonical payload of a command — decodes to the
 * very operation the ingest path hands over in memory (StreamConsumer#offer relies on it), and
 * records that cannot be decoded say why.
 */
import t from 'tap'
import { toV2Payload, type Command } from '../../src/ingest/commands.js'
import { decodeRecord, toRuleOp } from '../../src/stream/apply.js'

t.test('a stored v2 record decodes to the operation of its command', async (t) => {
  const cases: Array<{ description: string, command: Command }> = [
    { description: 'access upsert with labels', command: { kind: 'access_rule', op: 'upsert', ruleRef: 'r1', target: { type: 'ip', value: '192.0.2.0/24' }, action: 'block', name: null, reason: 'scan', labels: { confidence: 'high', source: 'ids' }, confidence: 'high', severity: null, expiresIn: 3600 } },
    { description: 'access delete by target', command: { kind: 'access_rule', op: 'delete', ruleRef: null, target: { type: 'country', value: 'FR' } } },
    { description: 'expression upsert', command: { kind: 'waf_rule', op: 'upsert', ruleRef: 'w1', name: 'w1', type: 'custom', expression: 'http.request.uri.path eq "/admin"', action: 'block', phase: null, order: 3, shortDescription: null, config: {}, reason: null, labels: {}, expiresIn: null } },
    { description: 'expression delete', command: { kind: 'smart_firewall_rule', op: 'delete', ruleRef: 's1' } },
  ]
  for (const c of cases) {
    const d = decodeRecord({ seq: 9, workspaceId: 'w', schemaVersion: 2, payload: toV2Payload(c.command), acceptedAt: 1000 })
    t.same(d, { ok: true, op: toRuleOp(c.command, 'w', 9, 1000) }, c.description)
  }
})

t.test('records that cannot be decoded say why', async (t) => {
  const cases = [
    { description: 'an unknown schema_version', record: { schemaVersion: 3, payload: '{}' }, reason: 'unknown schema_version 3' },
    { description: 'a payload that is not JSON', record: { payload: 'not json' }, reason: 'payload is not JSON' },
    { description: 'a v1 payload that fails its schema', record: { payload: '{"type":"access_rules"}' }, reason: 'action: is required' },
  ]
  for (const c of cases) t.same(decodeRecord({ seq: 1, workspaceId: 'w', acceptedAt: 0, ...c.record }), { ok: false, reason: c.reason }, c.description)
})
