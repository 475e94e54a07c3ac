/**
 * One stream record → one rule-store operation, dispatching on the `schema_version` header
 * (SPEC §6): absent or 1 → the legacy path (the payload is a v1 event), 2 → the typed path (the
 * payload is a canonical v2 envelope). Both paths re-read the payload with the very normalizers
 * that accepted it, minus the checks against data that may have changed since (the ASN database)
 * or that cost and cannot change the outcome (the expression checker): an accepted entry stays
 * accepted.
 *
 * Expiry is computed from the record's `acceptedAt`, never from the time of application, so
 * applying a record twice writes the same rule twice.
 */
import type { Command } from '../ingest/commands.js'
import type { EntryChecks, NormalizeResult } from '../ingest/entry-rules.js'
import { normalizeV1 } from '../ingest/normalize-v1.js'
import { normalizeV2 } from '../ingest/normalize-v2.js'
import type { RuleOp } from '../store/batch-types.js'
import type { StreamRecord } from '../store/types.js'

const TRUSTED: EntryChecks = Object.freeze({ asnExists: null, checkExpressions: false })

export type DecodedRecord =
  | { readonly ok: true, readonly op: RuleOp }
  | { readonly ok: false, readonly reason: string }

/**
 * @example
 *   decodeRecord({ seq: 7, workspaceId: 'w', acceptedAt: 0, payload: '{"type":"access_rules","action":"unblock","asn":"as13335"}' })
 *   // { ok: true, op: { op: 'deleteAccessByTarget', workspaceId: 'w', target: { type: 'asn', value: 'AS13335' } } }
 */
export function decodeRecord (record: StreamRecord): DecodedRecord {
  const version = record.schemaVersion
  let normalize: (entry: unknown, checks: EntryChecks) => NormalizeResult
  if (version === undefined || version === 1) normalize = normalizeV1
  else if (version === 2) normalize = normalizeV2
  else return { ok: false, reason: `unknown schema_version ${version}` }
  let entry: unknown
  try {
    entry = JSON.parse(record.payload)
  } catch {
    return { ok: false, reason: 'payload is not JSON' }
  }
  const r = normalize(entry, TRUSTED)
  if (!r.ok) return { ok: false, reason: `${r.failure.path === '' ? '' : r.failure.path + ': '}${r.failure.message}` }
  return { ok: true, op: toRuleOp(r.command, record.workspaceId, record.seq, record.acceptedAt) }
}

/** A command as the store operation that carries it out. */
export function toRuleOp (c: Command, workspaceId: string, seq: number, acceptedAt: number): RuleOp {
  if (c.op === 'delete') {
    if (c.kind === 'access_rule' && c.ruleRef === null) {
      // normalizeV2 never yields a delete with neither rule_ref nor target.
      return { op: 'deleteAccessByTarget', workspaceId, target: c.target! }
    }
    return { op: 'deleteByRef', workspaceId, kind: c.kind, ruleRef: c.ruleRef! }
  }
  const expiresAt = c.expiresIn === null ? null : acceptedAt + c.expiresIn * 1000
  if (c.kind === 'access_rule') {
    return {
      op: 'upsertAccessRule',
      input: {
        workspaceId,
        kind: 'access_rule',
        ruleRef: c.ruleRef,
        target: c.target,
        action: c.action,
        name: c.name,
        confidence: c.confidence,
        severity: c.severity,
        labels: c.labels,
        reason: c.reason,
        expiresAt,
        seq,
      },
    }
  }
  return {
    op: 'upsertExpressionRule',
    input: {
      workspaceId,
      kind: c.kind,
      ruleRef: c.ruleRef,
      name: c.name,
      type: c.type,
      expression: c.expression,
      action: c.action,
      order: c.order,
      shortDescription: c.shortDescription,
      config: c.config,
      labels: c.labels,
      reason: c.reason,
      expiresAt,
      seq,
    },
  }
}
