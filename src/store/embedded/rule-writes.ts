/**
 * Rule writes for use inside an LMDB write transaction, shared by the RuleStore methods (one
 * write each) and by applyRuleBatch (many writes in one transaction).
 *
 * A keyed access rule has a target index entry that must match it exactly, and every rule with
 * an expiry must be in the expiry log under its current bucket (expiry-log.ts). Every path that
 * changes a rule goes through here, which is what the crash test checks: after a SIGKILL at any
 * point the indexes and the primary records agree, because they only change in one transaction.
 */
import { randomUUID } from 'node:crypto'
import type { Database } from 'lmdb'
import type { EncodedAccessUpsert } from './packed-batch.js'
import type { AccessRule, AccessRuleInput, ExpressionRule, ExpressionRuleInput, RuleKind, Target } from '../types.js'
import type { ArrivalTxn } from './arrival-index.js'
import type { ByteWriter } from './byte-writer.js'
import { logChange, logRemovals, removedIdentity } from './change-log.js'
import { EXPIRY_TABLE, expiryBucket, type ExpiryLogWriter, type ExpiryTable, type LapseTarget } from './expiry-log.js'
import {
  accessRuleKey, accessRuleKeyByRef, arrivalKey, expressionRuleKey, targetIdentity, targetIdentityOfKey, targetIndexKey, targetIndexRange, workspaceOfKey, writeAccessRuleKey,
} from './key-layout.js'
import type { Databases } from './layout.js'
import { accessRuleExpiresAt, decodeAccessRule, encodeAccessRule, setAccessRuleTimes } from './rule-codec.js'
import { tombstoneAppender } from './tombstones.js'

/** What one write transaction works with. */
export interface RuleTxn {
  readonly dbs: Databases
  /** Values are encoded here. */
  readonly scratch: ByteWriter
  /** Keys are built here. */
  readonly keys: ByteWriter
  readonly log: ExpiryLogWriter
  /** Where unkeyed rules stored in arrival order are found (arrival-index.ts). */
  readonly arrivals: ArrivalTxn
  /** The transaction's time, as the change log records it. */
  readonly now: number
  /** Workspaces whose change log this transaction wrote, and how many entries (its trim runs on them). */
  readonly logged: Map<string, number>
}

/** A primary key of the access-rules table: the string, or its UTF-8 bytes. */
type AccessKey = string | Buffer

/** Upserts an access rule and returns it as stored. */
export function putAccessRule (txn: RuleTxn, input: AccessRuleInput, now: number): AccessRule {
  const id = randomUUID()
  const prev = upsertAccessRule(txn, input, now, id)
  // Fields are named one by one: a caller's object is never handed back as-is.
  return {
    id: prev?.id ?? id,
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
}

/**
 * Upserts an access rule without building it as an object (the batch path); `id` is used when
 * the rule is new (null: a random UUID). Returns the previous version, undefined when it was
 * inserted.
 */
export function upsertAccessRule (txn: RuleTxn, input: AccessRuleInput, now: number, id: string | null): AccessRule | undefined {
  const { dbs, scratch, keys } = txn
  keys.reset()
  writeAccessRuleKey(keys, input.workspaceId, input.ruleRef, input.target)
  let pk: AccessKey = keys.view()
  scratch.reset()
  encodeAccessRule(scratch, input, id, now, now)
  if (input.ruleRef === null) {
    const identity = targetIdentity(input.target)
    const found = findUnkeyed(txn, input.workspaceId, pk, identity)
    if (found === undefined) {
      insertUnkeyed(txn, input.workspaceId, identity, scratch.lmdbValue(), input.expiresAt)
      return undefined
    }
    pk = found
  }
  // Most keyed upserts insert: try that first (measured: a third less time per insert than
  // reading first). Not one B-tree descent for two, though:
  // lmdb-js 3.5 looks the key up before a noOverwrite put (writer.cpp tests IF_NO_EXISTS together
  // with a flag bit every keyed instruction carries); the saving is its JS read path.
  if (input.ruleRef !== null && insertIfAbsent(dbs, pk, scratch.lmdbValue())) {
    reindexAccess(txn, pk, undefined, input)
    logPut(txn, input.workspaceId, pk)
    return undefined
  }
  const prev = readAccessRule(dbs, pk, input.workspaceId)!
  scratch.reset()
  encodeAccessRule(scratch, input, prev.id, prev.createdAt, now)
  accessTable(dbs).put(pk, scratch.lmdbValue())
  reindexAccess(txn, pk, prev, input)
  logPut(txn, input.workspaceId, pk)
  return prev
}

/** Logs a rule written in place (change-log.ts); a new unkeyed rule's arrival key logs itself. */
function logPut (txn: RuleTxn, workspaceId: string, pk: AccessKey): void {
  logChange(txn.dbs, workspaceId, txn.arrivals.next(), txn.now, 'put', typeof pk === 'string' ? pk : pk.toString('utf8'))
  txn.logged.set(workspaceId, (txn.logged.get(workspaceId) ?? 0) + 1)
}

/** Logs the removal of a rule of that identity (change-log.ts). */
function logGone (txn: RuleTxn, workspaceId: string, ruleRef: string | null, target: Target): void {
  logChange(txn.dbs, workspaceId, txn.arrivals.next(), txn.now, 'gone', removedIdentity(ruleRef, target))
  txn.logged.set(workspaceId, (txn.logged.get(workspaceId) ?? 0) + 1)
}

/**
 * upsertAccessRule for a rule already encoded (EncodedAccessUpsert): a new rule is written as it
 * is, with `now` as its times; one that exists is read back from the encoded form and updated as
 * upsertAccessRule updates it (its id and creation time kept). Unkeyed rules only: they have no
 * target index entry.
 */
export function putEncodedAccessRule (txn: RuleTxn, op: EncodedAccessUpsert, now: number): void {
  setAccessRuleTimes(op.value, now, now)
  const identity = targetIdentityOfKey(op.key, op.workspaceId)
  if (findUnkeyed(txn, op.workspaceId, op.key, identity) === undefined) {
    insertUnkeyed(txn, op.workspaceId, identity, op.value, op.expiresAt)
    return
  }
  const rule = decodeAccessRule(op.value, op.workspaceId)
  if (rule.ruleRef !== null) throw new TypeError('an encoded access rule must not have a rule_ref')
  upsertAccessRule(txn, { ...rule, kind: 'access_rule' }, now, null)
}

/**
 * Where the workspace's unkeyed rule of that target is stored: its arrival key, or `targetKey`
 * (the form before format 5); undefined when there is none.
 */
function findUnkeyed (txn: RuleTxn, workspaceId: string, targetKey: AccessKey, identity: string): AccessKey | undefined {
  const arrival = txn.arrivals.find(workspaceId, identity)
  if (arrival !== undefined) return arrival
  return txn.arrivals.targetKeyed(workspaceId) && accessTable(txn.dbs).doesExist(targetKey) ? targetKey : undefined
}

/** Stores a new unkeyed rule, in arrival order. */
function insertUnkeyed (txn: RuleTxn, workspaceId: string, identity: string, value: Buffer, expiresAt: number | null): void {
  const n = txn.arrivals.next()
  const key = arrivalKey(workspaceId, n)
  accessTable(txn.dbs).putSync(key, value)
  txn.arrivals.added(workspaceId, identity, n)
  logExpiry(txn, EXPIRY_TABLE.access, key, null, expiresAt)
}

export function putExpressionRule (txn: RuleTxn, input: ExpressionRuleInput, now: number): ExpressionRule {
  const pk = expressionRuleKey(input.workspaceId, input.kind, input.ruleRef)
  const prev = txn.dbs.expressionRules.get(pk)
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
  txn.dbs.expressionRules.put(pk, rule)
  logExpiry(txn, EXPIRY_TABLE.expression, pk, prev?.expiresAt ?? null, rule.expiresAt)
  return rule
}

/**
 * The access-rules table, taking keys as strings or as their bytes: its key encoder
 * (lmdb-env.ts) writes either as the same bytes.
 */
function accessTable (dbs: Databases): Database<Buffer, AccessKey> {
  return dbs.accessRules as unknown as Database<Buffer, AccessKey>
}

/**
 * MDB_NOOVERWRITE: puts `value` unless `pk` exists; true when it did. Inside a transaction
 * lmdb-js's putSync returns that outcome (write.js), though its types say void.
 */
function insertIfAbsent (dbs: Databases, pk: AccessKey, value: Buffer): boolean {
  const table = accessTable(dbs)
  const put = table.putSync as unknown as (key: AccessKey, value: Buffer, options: { noOverwrite: true }) => boolean
  return put.call(table, pk, value, { noOverwrite: true })
}

/** The access rule stored under `pk`, or undefined. */
export function readAccessRule (dbs: Databases, pk: AccessKey, workspaceId = workspaceOfKey(typeof pk === 'string' ? pk : pk.toString('utf8'))): AccessRule | undefined {
  const buf = accessTable(dbs).getBinaryFast(pk)
  return buf === undefined ? undefined : decodeAccessRule(buf, workspaceId)
}

export function removeByRef (txn: RuleTxn, workspaceId: string, kind: RuleKind, ruleRef: string): boolean {
  return kind === 'access_rule'
    ? removeAccessRule(txn, accessRuleKeyByRef(workspaceId, ruleRef))
    : removeExpressionRule(txn, expressionRuleKey(workspaceId, kind, ruleRef))
}

/** Removes the unkeyed rule of that target and every keyed one with it; returns how many. */
export function removeAccessByTarget (txn: RuleTxn, workspaceId: string, target: Target): number {
  // An unkeyed rule has no target index entry (it is found by its target key or the arrival
  // index) and the expiry log is lazy, so removing it needs no read.
  let removed = txn.dbs.accessRules.removeSync(accessRuleKey(workspaceId, null, target)) ? 1 : 0
  const identity = targetIdentity(target)
  const arrival = txn.arrivals.find(workspaceId, identity)
  if (arrival !== undefined && txn.dbs.accessRules.removeSync(arrival)) {
    txn.arrivals.removed(workspaceId, identity)
    removed++
  }
  if (removed > 0) logGone(txn, workspaceId, null, target)
  // Collected first: removing entries under a live cursor is not something to rely on.
  const keyed = Array.from(txn.dbs.accessByTarget.getRange(targetIndexRange(workspaceId, target)), (e) => e.value)
  for (const pk of keyed) {
    if (removeAccessRule(txn, pk)) removed++
  }
  return removed
}

function removeAccessRule (txn: RuleTxn, pk: string): boolean {
  const prev = readAccessRule(txn.dbs, pk)
  if (prev === undefined) return false
  txn.dbs.accessRules.remove(pk)
  reindexAccess(txn, pk, prev, undefined)
  logGone(txn, prev.workspaceId, prev.ruleRef, prev.target)
  return true
}

function removeExpressionRule (txn: RuleTxn, pk: string): boolean {
  return txn.dbs.expressionRules.removeSync(pk)
}

/**
 * The rule tables as the expiry-log sweep sees them: each rule removed leaves a tombstone
 * (tombstones.ts) and `onRemove` hears of it. An access rule is read once, its expiry checked on
 * the bytes and the rest decoded only when it goes. `finish` stores the tombstone counters once
 * for the whole pass.
 */
export function lapseTarget (txn: RuleTxn, onRemove: (workspaceId: string) => void): LapseTarget & { finish (): void } {
  const { dbs } = txn
  const tombs = tombstoneAppender(dbs)
  // Access rules removed, by workspace: logged as one change entry each at the end.
  const removed = new Map<string, string[]>()
  return {
    expiresAt: (table: ExpiryTable, pk: string) => {
      if (table === EXPIRY_TABLE.expression) return dbs.expressionRules.get(pk)?.expiresAt
      const buf = accessTable(dbs).getBinaryFast(pk)
      return buf === undefined ? undefined : accessRuleExpiresAt(buf)
    },
    lapse: (table: ExpiryTable, pk: string, bucket: number, before: number) => {
      if (table === EXPIRY_TABLE.expression) {
        const rule = dbs.expressionRules.get(pk)
        if (rule === undefined || rule.expiresAt === null || expiryBucket(rule.expiresAt) !== bucket) return 'stale'
        if (rule.expiresAt >= before) return 'kept'
        removeExpressionRule(txn, pk)
        tombs.append({ workspaceId: rule.workspaceId, kind: rule.kind, target: null, ruleRef: rule.ruleRef, lapsedAt: rule.expiresAt })
        onRemove(rule.workspaceId)
        return 'removed'
      }
      const buf = accessTable(dbs).getBinaryFast(pk)
      if (buf === undefined) return 'stale'
      const expiresAt = accessRuleExpiresAt(buf)
      if (expiresAt === null || expiryBucket(expiresAt) !== bucket) return 'stale'
      if (expiresAt >= before) return 'kept'
      // Decoded before the delete: getBinaryFast's bytes are only good until the next write.
      const rule = decodeAccessRule(buf, workspaceOfKey(pk))
      dbs.accessRules.remove(pk)
      reindexAccess(txn, pk, rule, undefined)
      const gone = removed.get(rule.workspaceId)
      if (gone === undefined) removed.set(rule.workspaceId, [removedIdentity(rule.ruleRef, rule.target)])
      else gone.push(removedIdentity(rule.ruleRef, rule.target))
      tombs.append({ workspaceId: rule.workspaceId, kind: 'access_rule', target: rule.target, ruleRef: rule.ruleRef, lapsedAt: expiresAt, action: rule.action })
      onRemove(rule.workspaceId)
      return 'removed'
    },
    finish: () => {
      tombs.finish()
      for (const [workspaceId, identities] of removed) {
        logRemovals(dbs, workspaceId, txn.arrivals.next(), txn.now, identities)
        txn.logged.set(workspaceId, (txn.logged.get(workspaceId) ?? 0) + 1)
      }
      removed.clear()
    },
  }
}

function reindexAccess (txn: RuleTxn, pk: AccessKey, prev: AccessRule | undefined, next: AccessRuleInput | undefined): void {
  const prevTarget = prev?.ruleRef != null ? targetIndexKey(prev.workspaceId, prev.target, prev.ruleRef) : null
  const nextTarget = next?.ruleRef != null ? targetIndexKey(next.workspaceId, next.target, next.ruleRef) : null
  if (prevTarget !== null && prevTarget !== nextTarget) txn.dbs.accessByTarget.remove(prevTarget)
  if (nextTarget !== null && nextTarget !== prevTarget) txn.dbs.accessByTarget.put(nextTarget, typeof pk === 'string' ? pk : pk.toString('utf8'))
  if (next !== undefined) logExpiry(txn, EXPIRY_TABLE.access, pk, prev?.expiresAt ?? null, next.expiresAt)
}

/** Logs a rule under its new expiry bucket when it did not have that bucket before. */
function logExpiry (txn: RuleTxn, table: ExpiryTable, pk: AccessKey, prevExpiry: number | null, nextExpiry: number | null): void {
  if (nextExpiry === null) return
  if (prevExpiry !== null && expiryBucket(prevExpiry) === expiryBucket(nextExpiry)) return
  txn.log.add(table, pk, nextExpiry)
}
