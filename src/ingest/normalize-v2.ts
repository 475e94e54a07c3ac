/**
 * A v2 envelope (SPEC 2.2–2.4) → a command, with DECISIONS §3: rule_ref is required for
 * expression kinds; an access-rule delete needs rule_ref or rule.target (rule_ref wins when both
 * are given: it is the identity); `expires_in` and `rule` are ignored on delete, except an access
 * rule's target; values matched case-insensitively are stored lowercase; `rule.phase` only on
 * waf_rule, carried into `config.phase`; `rule.name` defaults to rule_ref.
 *
 * A missing or empty `rule.type` on an expression rule rejects the whole batch (see
 * findMissingRuleType in batch.ts); when this function meets one anyway (the consumer re-reading
 * a record, a unit test) it fails the entry with the same text.
 */
import { checkExpression } from '../expr/check.js'
import type { ExpressionKind } from './commands.js'
import {
  accessExpiry, expressionExpiry, failure, isPlainObject, normalizeLabels,
  type EntryChecks, type NormalizeResult,
} from './entry-rules.js'
import { findForbiddenKey, isShallow } from './forbidden-keys.js'
import { normalizeTarget } from './targets.js'
import { checkSchema } from './validators.js'

interface V2Envelope {
  schema_version?: 2
  kind: 'access_rule' | ExpressionKind
  op: 'upsert' | 'delete'
  rule_ref?: string
  expires_in?: number
  reason?: string
  labels?: Record<string, string | number | boolean>
  rule?: Record<string, unknown>
}

interface AccessBody { target: { ip?: string, asn?: string, country?: string }, action?: string }

interface ExpressionBody {
  name?: string
  type?: string
  expression: string
  action: string
  phase?: string
  order?: number
  short_description?: string
  config?: Record<string, unknown>
}

/** Allowed `rule.action` per expression kind (SPEC 2.4). */
const ACTIONS: Record<ExpressionKind, readonly string[]> = {
  waf_rule: ['block', 'challenge', 'ratelimit', 'allow'],
  smart_firewall_rule: ['block', 'allow'],
}

export const RULE_TYPE_MESSAGE = 'is required and must be one of custom, generated'

/**
 * @example
 *   normalizeV2({ kind: 'waf_rule', op: 'delete', rule_ref: 'sqli-1' }, checks)
 *   // { ok: true, command: { kind: 'waf_rule', op: 'delete', ruleRef: 'sqli-1' } }
 */
export function normalizeV2 (entry: unknown, checks: EntryChecks): NormalizeResult {
  // The entry itself is the offending value, unless echoing it could overflow the serializer.
  if (!isPlainObject(entry)) return failure('', 'must be an object', isShallow(entry) ? entry : null)
  const forbidden = findForbiddenKey(entry)
  if (forbidden !== null) return { ok: false, failure: forbidden }
  const schemaFailure = checkSchema('SignalEnvelopeV2', entry, '')
  if (schemaFailure !== null) return { ok: false, failure: schemaFailure }
  const e = entry as unknown as V2Envelope
  const ruleRef = e.rule_ref ?? null

  if (e.kind !== 'access_rule') {
    if (ruleRef === null) return failure('rule_ref', `is required for kind ${e.kind}`, null)
    if (e.op === 'delete') return { ok: true, command: { kind: e.kind, op: 'delete', ruleRef } }
    return normalizeExpressionUpsert(e, e.kind, ruleRef, checks)
  }

  if (e.op === 'delete') {
    if (ruleRef !== null) return { ok: true, command: { kind: 'access_rule', op: 'delete', ruleRef, target: null } }
    if (e.rule === undefined) return failure('rule.target', 'is required to delete an access rule without rule_ref', null)
    const bodyFailure = checkSchema('AccessRuleBody', e.rule, 'rule')
    if (bodyFailure !== null) return { ok: false, failure: bodyFailure }
    const t = normalizeTarget((e.rule as unknown as AccessBody).target, 'rule.target', checks)
    return t.ok ? { ok: true, command: { kind: 'access_rule', op: 'delete', ruleRef: null, target: t.target } } : t
  }

  if (e.rule === undefined) return failure('rule', 'is required when op is upsert', null)
  const bodyFailure = checkSchema('AccessRuleBody', e.rule, 'rule')
  if (bodyFailure !== null) return { ok: false, failure: bodyFailure }
  const body = e.rule as unknown as AccessBody
  const t = normalizeTarget(body.target, 'rule.target', checks)
  if (!t.ok) return t
  // SPEC 2.3 names `block` as the blocking verb and leaves the default open: a signal is a block
  // unless it says otherwise, as in v1.
  const action = body.action === undefined ? 'block' : body.action.toLowerCase() as 'block' | 'allow'
  const expiry = accessExpiry(e.expires_in, action, 'expires_in')
  if (!expiry.ok) return expiry.result
  const labels = normalizeLabels(e.labels)
  if (!labels.ok) return labels.result
  return {
    ok: true,
    command: {
      kind: 'access_rule',
      op: 'upsert',
      ruleRef,
      target: t.target,
      action,
      name: null,
      reason: e.reason ?? null,
      labels: labels.labels,
      confidence: labels.confidence,
      severity: labels.severity,
      expiresIn: expiry.seconds,
    },
  }
}

function normalizeExpressionUpsert (e: V2Envelope, kind: ExpressionKind, ruleRef: string, checks: EntryChecks): NormalizeResult {
  if (e.rule === undefined) return failure('rule', 'is required when op is upsert', null)
  const bodyFailure = checkSchema('ExpressionRuleBody', e.rule, 'rule')
  if (bodyFailure !== null) return { ok: false, failure: bodyFailure }
  const body = e.rule as unknown as ExpressionBody
  if (body.type === undefined || body.type === '') return failure('rule.type', RULE_TYPE_MESSAGE, body.type ?? null)
  const action = body.action.toLowerCase()
  if (!ACTIONS[kind].includes(action)) {
    return failure('rule.action', `must be one of ${ACTIONS[kind].join(', ')} for kind ${kind}`, body.action)
  }
  if (body.phase !== undefined && kind === 'smart_firewall_rule') {
    return failure('rule.phase', 'is not allowed for kind smart_firewall_rule (layer 3/4 rules have no phase)', body.phase)
  }
  const phase = body.phase === undefined ? null : body.phase.toLowerCase() as 'request' | 'response'
  if (checks.checkExpressions) {
    const checked = checkExpression(kind, body.expression, phase ?? undefined)
    if (!checked.ok) return failure('rule.expression', checked.error.message, body.expression)
  }
  const expiry = expressionExpiry(e.expires_in, 'expires_in')
  if (!expiry.ok) return expiry.result
  const labels = normalizeLabels(e.labels)
  if (!labels.ok) return labels.result
  const config: Record<string, unknown> = {}
  if (body.config !== undefined) for (const key of Object.keys(body.config)) config[key] = body.config[key]
  if (phase !== null) config.phase = phase
  return {
    ok: true,
    command: {
      kind,
      op: 'upsert',
      ruleRef,
      name: body.name === undefined || body.name === '' ? ruleRef : body.name,
      type: body.type.toLowerCase() as 'custom' | 'generated',
      expression: body.expression,
      action,
      phase,
      order: body.order ?? null,
      shortDescription: body.short_description ?? null,
      config,
      reason: e.reason ?? null,
      labels: labels.labels,
      expiresIn: expiry.seconds,
    },
  }
}
