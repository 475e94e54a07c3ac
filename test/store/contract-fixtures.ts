/** Inputs for the store contract suite: valid records with overridable fields. */
import { randomUUID } from 'node:crypto'
import type { AccessRuleInput, ExpressionRuleInput, Target } from '../../src/store/types.js'

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

export function ip (value: string): Target {
  return { type: 'ip', value }
}

export function accessInput (workspaceId: string, over: Partial<AccessRuleInput> = {}): AccessRuleInput {
  return {
    workspaceId,
    kind: 'access_rule',
    ruleRef: null,
    target: ip('192.0.2.1/32'),
    action: 'block',
    name: null,
    confidence: null,
    severity: null,
    labels: {},
    reason: null,
    expiresAt: null,
    seq: 1,
    ...over,
  }
}

export function expressionInput (workspaceId: string, over: Partial<ExpressionRuleInput> = {}): ExpressionRuleInput {
  return {
    workspaceId,
    kind: 'waf_rule',
    ruleRef: 'rule-1',
    name: 'rule-1',
    type: 'custom',
    expression: 'http.request.uri.path eq "/admin"',
    action: 'block',
    order: null,
    shortDescription: null,
    config: {},
    labels: {},
    reason: null,
    expiresAt: null,
    seq: 1,
    ...over,
  }
}

/** A workspace id no store has seen: rules need no workspace record, so tests stay independent. */
export function freshWorkspaceId (): string {
  return randomUUID()
}

/** Sorts by id so that tests never depend on the (unspecified) order of rule listings. */
export function sortById<T extends { id: string }> (items: T[]): T[] {
  return [...items].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}
