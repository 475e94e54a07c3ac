/**
 * Rule writes for use inside an LMDB write transaction, shared by the RuleStore methods (one
 * write each) and by applyRuleBatch (many writes in one transaction).
 *
 * Each rule has up to two index entries that must match it exactly: its expiry bucket (every
 * rule with an expiresAt) and its target (keyed access rules). Every path that changes a rule
 * goes through `reindex*`, which is what the crash test checks: after a SIGKILL at any point
 * the indexes and the primary records agree, because they only change in one transaction.
 */
import { randomUUID } from 'node:crypto'
import type { AccessRule, AccessRuleInput, ExpressionRule, ExpressionRuleInput, RuleKind, Target } from '../types.js'
import { accessRuleKey, accessRuleKeyByRef, expressionRuleKey, targetIndexKey, targetIndexRange } from './key-layout.js'
import { EXPIRY_TABLE, type Databases, type ExpiryKey } from './lmdb-env.js'

type Table = (typeof EXPIRY_TABLE)[keyof typeof EXPIRY_TABLE]

/** One hour: purging is housekeeping (feeds filter expiry at query time), so coarse is fine. */
const EXPIRY_BUCKET_MS = 3_600_000

export function putAccessRule (dbs: Databases, input: AccessRuleInput, now: number): AccessRule {
  const pk = accessRuleKey(input.workspaceId, input.ruleRef, input.target)
  const prev = dbs.accessRules.get(pk)
  // Fields are named one by one: a caller's object is never stored as-is.
  const rule: AccessRule = {
    id: prev?.id ?? randomUUID(),
    workspaceId: input.workspaceId,
    kind: 'access_rule',
    ruleRef: input.ruleRef,
    target: { type: input.target.type, value: input.target.value },
    action: input.action,
    name: input.name,
    confidence: input.confidence,
    severity: input.severity,
    labels: input.labels,
    reason: input.reason,
    expiresAt: input.expiresAt,
    createdAt: prev?.createdAt ?? now,
    updatedAt: now,
    seq: input.seq,
  }
  dbs.accessRules.put(pk, rule)
  reindexAccess(dbs, pk, prev, rule)
  return rule
}

export function putExpressionRule (dbs: Databases, input: ExpressionRuleInput, now: number): ExpressionRule {
  const pk = expressionRuleKey(input.workspaceId, input.kind, input.ruleRef)
  const prev = dbs.expressionRules.get(pk)
  const rule: ExpressionRule = {
    id: prev?.id ?? randomUUID(),
    workspaceId: input.workspaceId,
    kind: input.kind,
    ruleRef: input.ruleRef,
    name: input.name,
    type: input.type,
    expression: input.expression,
    action: input.action,
    order: input.order,
    shortDescription: input.shortDescription,
    config: input.config,
    labels: input.labels,
    reason: input.reason,
    expiresAt: input.expiresAt,
    createdAt: prev?.createdAt ?? now,
    updatedAt: now,
    seq: input.seq,
  }
  dbs.expressionRules.put(pk, rule)
  reindexExpiry(dbs, EXPIRY_TABLE.expression, pk, prev?.expiresAt ?? null, rule.expiresAt)
  return rule
}

export function removeByRef (dbs: Databases, workspaceId: string, kind: RuleKind, ruleRef: string): boolean {
  return kind === 'access_rule'
    ? removeAccessRule(dbs, accessRuleKeyByRef(workspaceId, ruleRef))
    : removeExpressionRule(dbs, expressionRuleKey(workspaceId, kind, ruleRef))
}

/** Removes the unkeyed rule of that target and every keyed one with it; returns how many. */
export function removeAccessByTarget (dbs: Databases, workspaceId: string, target: Target): number {
  let removed = removeAccessRule(dbs, accessRuleKey(workspaceId, null, target)) ? 1 : 0
  // Collected first: removing entries under a live cursor is not something to rely on.
  const keyed = Array.from(dbs.accessByTarget.getRange(targetIndexRange(workspaceId, target)), (e) => e.value)
  for (const pk of keyed) {
    if (removeAccessRule(dbs, pk)) removed++
  }
  return removed
}

/**
 * Removes rules whose expiresAt is before `before`, looking at up to `limit` expiry entries
 * after `after` (the `last` of the previous call). `scanned` below `limit` means the end.
 */
export function removeLapsed (dbs: Databases, before: number, after: ExpiryKey | undefined, limit: number): { removed: number, scanned: number, last: ExpiryKey | undefined } {
  // Every bucket up to the one holding `before`; only that last bucket may hold rules that have
  // not lapsed yet, and they are skipped (and stay indexed).
  const range = after === undefined
    ? { end: [expiryBucket(before) + 1], limit }
    : { start: after, exclusiveStart: true, end: [expiryBucket(before) + 1], limit }
  const entries = Array.from(dbs.expiry.getKeys(range))
  let removed = 0
  for (const key of entries) {
    const [bucket, table, pk] = key
    const rule = table === EXPIRY_TABLE.access ? dbs.accessRules.get(pk) : dbs.expressionRules.get(pk)
    if (rule === undefined || rule.expiresAt === null || expiryBucket(rule.expiresAt) !== bucket) {
      dbs.expiry.remove(key) // cannot happen while writes go through reindex; heal rather than loop
    } else if (rule.expiresAt < before) {
      if (table === EXPIRY_TABLE.access) removeAccessRule(dbs, pk)
      else removeExpressionRule(dbs, pk)
      removed++
    }
  }
  return { removed, scanned: entries.length, last: entries.at(-1) }
}

function removeAccessRule (dbs: Databases, pk: string): boolean {
  const prev = dbs.accessRules.get(pk)
  if (prev === undefined) return false
  dbs.accessRules.remove(pk)
  reindexAccess(dbs, pk, prev, undefined)
  return true
}

function removeExpressionRule (dbs: Databases, pk: string): boolean {
  const prev = dbs.expressionRules.get(pk)
  if (prev === undefined) return false
  dbs.expressionRules.remove(pk)
  reindexExpiry(dbs, EXPIRY_TABLE.expression, pk, prev.expiresAt, null)
  return true
}

function reindexAccess (dbs: Databases, pk: string, prev: AccessRule | undefined, next: AccessRule | undefined): void {
  const prevTarget = prev?.ruleRef != null ? targetIndexKey(prev.workspaceId, prev.target, prev.ruleRef) : null
  const nextTarget = next?.ruleRef != null ? targetIndexKey(next.workspaceId, next.target, next.ruleRef) : null
  if (prevTarget !== null && prevTarget !== nextTarget) dbs.accessByTarget.remove(prevTarget)
  if (nextTarget !== null && nextTarget !== prevTarget) dbs.accessByTarget.put(nextTarget, pk)
  reindexExpiry(dbs, EXPIRY_TABLE.access, pk, prev?.expiresAt ?? null, next?.expiresAt ?? null)
}

/**
 * The expiry index holds a rule under its expiry's BUCKET, not its exact expiresAt: a block
 * re-sent every few minutes moves its expiry each time (DECISIONS §3 resets it), and with exact
 * times that was an index delete and insert per upsert — about 40 % of the cost of applying
 * one (measured). Within one bucket the entry stays put.
 */
export function expiryBucket (expiresAt: number): number {
  return Math.floor(expiresAt / EXPIRY_BUCKET_MS)
}

function reindexExpiry (dbs: Databases, table: Table, pk: string, prevExpiry: number | null, nextExpiry: number | null): void {
  const prev = prevExpiry === null ? null : expiryBucket(prevExpiry)
  const next = nextExpiry === null ? null : expiryBucket(nextExpiry)
  if (prev === next) return
  if (prev !== null) dbs.expiry.remove([prev, table, pk] satisfies ExpiryKey)
  if (next !== null) dbs.expiry.put([next, table, pk] satisfies ExpiryKey, '')
}
