/**
 * Rules ↔ MongoDB documents, and the write models (filter + update) that upsert and delete them.
 * Shared by the single-rule methods and by applyRuleBatch, which sends the same models through
 * one bulkWrite per collection.
 *
 * Every update names its fields one by one, with checked plain values: no caller object is ever
 * spread into a filter or an update.
 */
import { randomUUID } from 'node:crypto'
import type { AnyBulkWriteOperation, Filter } from 'mongodb'
import type { AccessRule, AccessRuleInput, ExpressionRule, ExpressionRuleInput, LabelValue, RuleKind, Target } from '../types.js'
import type { AccessRuleDoc, ExpressionRuleDoc, Pair } from './collections.js'
import { fromPairs, num, text } from './values.js'

export function accessIdentity (ruleRef: string | null, target: Target): string {
  return ruleRef === null ? `t:${targetKey(target)}` : `r:${ruleRef}`
}

export function targetKey (target: Target): string {
  return `${text(target.type)}:${text(target.value)}`
}

function labelPairs (labels: Record<string, LabelValue>): Array<Pair<LabelValue>> {
  return Object.entries(labels).map(([k, v]) => {
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') text(v)
    return { k, v }
  })
}

function nullable<T> (v: T | null, check: (v: unknown) => T): T | null {
  return v === null ? null : check(v)
}

export function upsertAccessModel (input: AccessRuleInput, now: number): { filter: Filter<AccessRuleDoc>, update: Record<string, unknown> } {
  const workspaceId = text(input.workspaceId)
  const ruleRef = nullable(input.ruleRef, text)
  const identity = accessIdentity(ruleRef, input.target)
  return {
    filter: { workspaceId, identity },
    update: {
      $set: {
        workspaceId,
        identity,
        targetKey: targetKey(input.target),
        ruleRef,
        target: { type: text(input.target.type), value: text(input.target.value) },
        action: text(input.action),
        name: nullable(input.name, text),
        confidence: nullable(input.confidence, text),
        severity: nullable(input.severity, text),
        labels: labelPairs(input.labels),
        reason: nullable(input.reason, text),
        expiresAt: nullable(input.expiresAt, num),
        updatedAt: now,
        seq: num(input.seq),
      },
      $setOnInsert: { _id: randomUUID(), createdAt: now },
    },
  }
}

export function upsertExpressionModel (input: ExpressionRuleInput, now: number): { filter: Filter<ExpressionRuleDoc>, update: Record<string, unknown> } {
  const workspaceId = text(input.workspaceId)
  const kind = text(input.kind)
  const ruleRef = text(input.ruleRef)
  return {
    filter: { workspaceId, kind: kind as ExpressionRuleDoc['kind'], ruleRef },
    update: {
      $set: {
        workspaceId,
        kind,
        ruleRef,
        name: text(input.name),
        type: text(input.type),
        expression: text(input.expression),
        action: text(input.action),
        order: nullable(input.order, num),
        shortDescription: nullable(input.shortDescription, text),
        // JSON text: free-form keys never become field names (collections.ts).
        config: JSON.stringify(input.config),
        labels: labelPairs(input.labels),
        reason: nullable(input.reason, text),
        expiresAt: nullable(input.expiresAt, num),
        updatedAt: now,
        seq: num(input.seq),
      },
      $setOnInsert: { _id: randomUUID(), createdAt: now },
    },
  }
}

export function accessByRefFilter (workspaceId: string, ruleRef: string): Filter<AccessRuleDoc> {
  return { workspaceId: text(workspaceId), identity: `r:${text(ruleRef)}` }
}

export function expressionByRefFilter (workspaceId: string, kind: Exclude<RuleKind, 'access_rule'>, ruleRef: string): Filter<ExpressionRuleDoc> {
  return { workspaceId: text(workspaceId), kind: text(kind) as ExpressionRuleDoc['kind'], ruleRef: text(ruleRef) }
}

export function accessByTargetFilter (workspaceId: string, target: Target): Filter<AccessRuleDoc> {
  return { workspaceId: text(workspaceId), targetKey: targetKey(target) }
}

/** Lapsed at `now` means expiresAt <= now; a null expiresAt never lapses. */
export function liveAt (now: number): { $or: [{ expiresAt: null }, { expiresAt: { $gt: number } }] } {
  return { $or: [{ expiresAt: null }, { expiresAt: { $gt: num(now) } }] }
}

export function toAccessRule (d: AccessRuleDoc): AccessRule {
  return {
    id: d._id,
    workspaceId: d.workspaceId,
    kind: 'access_rule',
    ruleRef: d.ruleRef,
    target: { type: d.target.type, value: d.target.value },
    action: d.action,
    name: d.name,
    confidence: d.confidence,
    severity: d.severity,
    labels: fromPairs(d.labels),
    reason: d.reason,
    expiresAt: d.expiresAt,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    seq: d.seq,
  }
}

export function toExpressionRule (d: ExpressionRuleDoc): ExpressionRule {
  return {
    id: d._id,
    workspaceId: d.workspaceId,
    kind: d.kind,
    ruleRef: d.ruleRef,
    name: d.name,
    type: d.type,
    expression: d.expression,
    action: d.action,
    order: d.order,
    shortDescription: d.shortDescription,
    config: JSON.parse(d.config) as Record<string, unknown>,
    labels: fromPairs(d.labels),
    reason: d.reason,
    expiresAt: d.expiresAt,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    seq: d.seq,
  }
}

export type AccessWrite = AnyBulkWriteOperation<AccessRuleDoc>
export type ExpressionWrite = AnyBulkWriteOperation<ExpressionRuleDoc>
