/**
 * MongoDB rule documents: what reaches the server is plain values in named fields, whatever a
 * caller's object held; and documents convert back to exactly the rule that was written.
 */
import t from 'tap'
import type { AccessRuleDoc, ExpressionRuleDoc } from '../../../src/store/mongo/collections.js'
import {
  accessByRefFilter, accessByTargetFilter, expressionByRefFilter, liveAt, toAccessRule, toExpressionRule,
  upsertAccessModel, upsertExpressionModel,
} from '../../../src/store/mongo/rule-docs.js'
import type { AccessRuleInput } from '../../../src/store/types.js'
import { UUID, accessInput, expressionInput } from '../contract-fixtures.js'

const WS = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'

/** Applies an upsert model to nothing, as the server does on insert. */
function inserted<D> (update: Record<string, unknown>): D {
  return { ...(update.$set as object), ...(update.$setOnInsert as object) } as D
}

t.test('identity: keyed by rule_ref, unkeyed by target; one unique index serves both', async (t) => {
  const cases = [
    { description: 'keyed', input: accessInput(WS, { ruleRef: 'edge-1' }), filter: { workspaceId: WS, identity: 'r:edge-1' } },
    { description: 'unkeyed ip', input: accessInput(WS), filter: { workspaceId: WS, identity: 't:ip:192.0.2.1/32' } },
    { description: 'unkeyed asn', input: accessInput(WS, { target: { type: 'asn', value: 'AS64500' } }), filter: { workspaceId: WS, identity: 't:asn:AS64500' } },
    { description: 'a rule_ref that looks like a target stays a rule_ref', input: accessInput(WS, { ruleRef: 't:ip:192.0.2.1/32' }), filter: { workspaceId: WS, identity: 'r:t:ip:192.0.2.1/32' } },
  ]
  for (const c of cases) t.same(upsertAccessModel(c.input, 1).filter, c.filter, c.description)
  t.same(accessByRefFilter(WS, 'edge-1'), { workspaceId: WS, identity: 'r:edge-1' })
  t.same(accessByTargetFilter(WS, { type: 'ip', value: '192.0.2.1/32' }), { workspaceId: WS, targetKey: 'ip:192.0.2.1/32' })
  t.same(expressionByRefFilter(WS, 'waf_rule', 'x'), { workspaceId: WS, kind: 'waf_rule', ruleRef: 'x' })
  t.same(liveAt(5), { $or: [{ expiresAt: null }, { expiresAt: { $gt: 5 } }] })
})

t.test('an object smuggled where a value belongs never reaches a query', async (t) => {
  const operator = { $ne: '' } as unknown as string
  const cases: Array<{ description: string, input: AccessRuleInput }> = [
    { description: 'workspaceId', input: accessInput(operator) },
    { description: 'ruleRef', input: accessInput(WS, { ruleRef: operator }) },
    { description: 'target.value', input: accessInput(WS, { target: { type: 'ip', value: operator } }) },
    { description: 'target.type', input: accessInput(WS, { target: { type: operator as 'ip', value: '192.0.2.1/32' } }) },
    { description: 'action', input: accessInput(WS, { action: operator as 'block' }) },
    { description: 'label value', input: accessInput(WS, { labels: { a: operator } }) },
    { description: 'expiresAt', input: accessInput(WS, { expiresAt: operator as unknown as number }) },
    { description: 'seq', input: accessInput(WS, { seq: Number.NaN }) },
  ]
  for (const c of cases) {
    t.throws(() => upsertAccessModel(c.input, 1), { code: 'TF_ERR_INTERNAL' }, c.description)
  }
  t.throws(() => accessByRefFilter(WS, operator), { code: 'TF_ERR_INTERNAL' }, 'delete by ref')
  t.throws(() => accessByTargetFilter(operator, { type: 'ip', value: '1.2.3.4/32' }), { code: 'TF_ERR_INTERNAL' }, 'delete by target')
  t.throws(() => liveAt(operator as unknown as number), { code: 'TF_ERR_INTERNAL' }, 'now')
})

t.test('labels and config are stored as data: $ and dotted keys are values, not field names', async (t) => {
  // JSON.parse, as ingest does: `__proto__` becomes an own key, not the prototype.
  const labels = JSON.parse('{"$where":"sleep(1)","a.b":2,"__proto__":"p","ok":true}') as AccessRuleInput['labels']
  const model = upsertAccessModel(accessInput(WS, { labels }), 1)
  const set = model.update.$set as AccessRuleDoc
  t.same(set.labels.map((p) => p.k), ['$where', 'a.b', '__proto__', 'ok'], 'every key became a value')
  for (const pair of set.labels) t.same(Object.keys(pair), ['k', 'v'], `pair ${pair.k}`)
  const back = toAccessRule(inserted<AccessRuleDoc>(model.update)).labels
  t.same(Object.entries(back), Object.entries(labels), 'and they come back as they went in')
  t.equal(Object.getPrototypeOf(back), Object.prototype, 'no prototype was set from data')
  const config = { $gt: 1, 'x.y': { $in: [1] } }
  const expr = upsertExpressionModel(expressionInput(WS, { config }), 1)
  t.type((expr.update.$set as ExpressionRuleDoc).config, 'string', 'config is JSON text')
  t.same(toExpressionRule(inserted<ExpressionRuleDoc>(expr.update)).config, config)
})

t.test('a document converts back to exactly the rule written', async (t) => {
  const input = accessInput(WS, {
    ruleRef: 'r1', target: { type: 'country', value: 'DE' }, action: 'allow', name: 'n', confidence: 'low',
    severity: 'critical', labels: { team: 'red', score: 3, on: false }, reason: 'why', expiresAt: 99, seq: 7,
  })
  const doc = inserted<AccessRuleDoc>(upsertAccessModel(input, 42).update)
  const rule = toAccessRule(doc)
  t.match(rule.id, UUID)
  t.same(rule, { ...input, id: rule.id, createdAt: 42, updatedAt: 42 })

  const expr = expressionInput(WS, { kind: 'smart_firewall_rule', order: 2, shortDescription: 's', config: { sensitivity: 'high' }, expiresAt: null })
  const back = toExpressionRule(inserted<ExpressionRuleDoc>(upsertExpressionModel(expr, 43).update))
  t.same(back, { ...expr, id: back.id, createdAt: 43, updatedAt: 43 })
})
