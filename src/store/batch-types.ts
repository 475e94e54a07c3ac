/**
 * Batched rule writes: an extension of the store contract (types.ts) for the stream consumer.
 *
 * Applying rules one call at a time costs one transaction — and one disk flush — per rule; the
 * ingest path must sustain 100k entries/s, so the consumer applies a whole slice of the stream in
 * one transaction instead. Moving the consumer's checkpoint inside that same transaction makes
 * the position move exactly when the effects land: after a crash the slice is either applied with
 * its checkpoint or not at all, so nothing is applied twice and nothing is skipped.
 */
import type { AccessRuleInput, ExpressionRuleInput, RuleKind, Store, Target } from './types.js'

/** One rule write; the same semantics as the RuleStore method of the same name. */
export type RuleOp =
  | { readonly op: 'upsertAccessRule', readonly input: AccessRuleInput }
  | { readonly op: 'upsertExpressionRule', readonly input: ExpressionRuleInput }
  | { readonly op: 'deleteByRef', readonly workspaceId: string, readonly kind: RuleKind, readonly ruleRef: string }
  | { readonly op: 'deleteAccessByTarget', readonly workspaceId: string, readonly target: Target }

export interface RuleBatch {
  /** Applied in order (a later op sees the effect of an earlier one on the same identity). */
  readonly ops: readonly RuleOp[]
  /** Set in the same transaction as the ops. */
  readonly checkpoint?: { readonly consumer: string, readonly seq: number }
}

export interface RuleBatchResult {
  /** Upsert ops applied (each inserted or updated exactly one rule). */
  readonly upserted: number
  /** Rules removed by the delete ops. */
  readonly deleted: number
}

/** A Store that also applies rule batches; both backends implement it and `openStore` returns it. */
export interface BatchingStore extends Store {
  /**
   * Applies every op and the checkpoint atomically and durably, or nothing (rejecting with
   * TF_ERR_STORE_UNAVAILABLE). The rules revision rises once when anything changed.
   *
   * @example
   *   await store.applyRuleBatch({
   *     ops: [{ op: 'deleteByRef', workspaceId, kind: 'waf_rule', ruleRef: 'sqli-1' }],
   *     checkpoint: { consumer: 'rules', seq: 42 },
   *   })
   */
  applyRuleBatch (batch: RuleBatch): Promise<RuleBatchResult>
}
