/**
 * Rules on LMDB. Writes live in rule-writes.ts so that applyRuleBatch can run many of them in
 * one transaction; every write that changes something raises the rules revision with it.
 */
import type { RuleBatch, RuleBatchResult } from '../batch-types.js'
import type { AccessRule, AccessRuleInput, ExpressionRule, ExpressionRuleInput, Rule, RuleKind, RuleStore, Target } from '../types.js'
import { expressionRuleRange, workspaceRange } from './key-layout.js'
import { META, type ExpiryKey, type LmdbEnv } from './lmdb-env.js'
import { putAccessRule, putExpressionRule, removeAccessByTarget, removeByRef, removeLapsed } from './rule-writes.js'

/** Lapsed rules removed per transaction: bounded, so a purge after a long outage never holds
 *  the (cross-process) write lock for long. */
const PURGE_CHUNK = 5000

export class EmbeddedRuleStore implements RuleStore {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  upsertAccessRule (input: AccessRuleInput): Promise<AccessRule> {
    return this.#env.write((dbs) => {
      const rule = putAccessRule(dbs, input, Date.now())
      this.#env.bump(META.rulesRevision)
      return rule
    })
  }

  upsertExpressionRule (input: ExpressionRuleInput): Promise<ExpressionRule> {
    return this.#env.write((dbs) => {
      const rule = putExpressionRule(dbs, input, Date.now())
      this.#env.bump(META.rulesRevision)
      return rule
    })
  }

  deleteByRef (workspaceId: string, kind: RuleKind, ruleRef: string): Promise<boolean> {
    return this.#env.write((dbs) => {
      const removed = removeByRef(dbs, workspaceId, kind, ruleRef)
      if (removed) this.#env.bump(META.rulesRevision)
      return removed
    })
  }

  deleteAccessByTarget (workspaceId: string, target: Target): Promise<number> {
    return this.#env.write((dbs) => {
      const removed = removeAccessByTarget(dbs, workspaceId, target)
      if (removed > 0) this.#env.bump(META.rulesRevision)
      return removed
    })
  }

  async list (workspaceId: string, kind: RuleKind, now?: number): Promise<Rule[]> {
    return this.#env.read((dbs) => {
      const entries = kind === 'access_rule'
        ? dbs.accessRules.getRange(workspaceRange(workspaceId))
        : dbs.expressionRules.getRange(expressionRuleRange(workspaceId, kind))
      const rules: Rule[] = []
      for (const { value } of entries) {
        if (now === undefined || !isLapsed(value, now)) rules.push(value)
      }
      return rules
    })
  }

  async listAccessRules (workspaceId: string, now: number): Promise<AccessRule[]> {
    return this.#env.read((dbs) => {
      const rules: AccessRule[] = []
      for (const { value } of dbs.accessRules.getRange(workspaceRange(workspaceId))) {
        if (!isLapsed(value, now)) rules.push(value)
      }
      return rules
    })
  }

  async purgeLapsed (before: number): Promise<number> {
    let total = 0
    let after: ExpiryKey | undefined
    for (;;) {
      const step = await this.#env.write((dbs) => {
        const done = removeLapsed(dbs, before, after, PURGE_CHUNK)
        if (done.removed > 0) this.#env.bump(META.rulesRevision)
        return done
      })
      total += step.removed
      after = step.last
      if (step.scanned < PURGE_CHUNK) return total
    }
  }

  applyRuleBatch (batch: RuleBatch): Promise<RuleBatchResult> {
    return this.#env.write((dbs) => {
      const now = Date.now()
      let upserted = 0
      let deleted = 0
      for (const op of batch.ops) {
        switch (op.op) {
          case 'upsertAccessRule': putAccessRule(dbs, op.input, now); upserted++; break
          case 'upsertExpressionRule': putExpressionRule(dbs, op.input, now); upserted++; break
          case 'deleteByRef': if (removeByRef(dbs, op.workspaceId, op.kind, op.ruleRef)) deleted++; break
          case 'deleteAccessByTarget': deleted += removeAccessByTarget(dbs, op.workspaceId, op.target); break
          // Throwing aborts the whole batch: an op we do not know must not be skipped silently.
          default: throw new TypeError('unknown rule op')
        }
      }
      if (batch.checkpoint !== undefined) dbs.checkpoints.put(batch.checkpoint.consumer, batch.checkpoint.seq)
      if (upserted + deleted > 0) this.#env.bump(META.rulesRevision)
      return { upserted, deleted }
    })
  }
}

/** A rule lapses at its expiresAt instant (types.ts: expiresAt <= now is lapsed). */
function isLapsed (rule: Rule, now: number): boolean {
  return rule.expiresAt !== null && rule.expiresAt <= now
}
