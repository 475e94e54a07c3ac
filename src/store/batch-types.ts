/**
 * Batched rule writes: an extension of the store contract (types.ts) for the stream consumer.
 *
 * Applying rules one call at a time costs one transaction — and one disk flush — per rule; the
 * ingest path must sustain 100k entries/s, so the consumer applies a whole slice of the stream in
 * one transaction instead. Moving the consumer's checkpoint inside that same transaction makes
 * the position move exactly when the effects land: after a crash the slice is either applied with
 * its checkpoint or not at all, so nothing is applied twice and nothing is skipped.
 *
 * Several consumers of one stream under one name (two servers on one LMDB directory, several
 * nodes on one MongoDB) would each apply the same slice, and one that read an older slice could
 * write it over newer effects. The checkpoint is therefore a compare-and-set: a batch says which
 * position it continues from, and when the stored checkpoint is no longer that position the batch
 * applies nothing and says where the stream now stands, so that its consumer re-reads from there.
 */
import type { ConsumerThreadHandoff } from './consumer-thread.js'
import type { AccessRuleInput, ExpressionRuleInput, RuleKind, Store, SweepPass, Target } from './types.js'

/** One rule write; the same semantics as the RuleStore method of the same name. */
export type RuleOp =
  | { readonly op: 'upsertAccessRule', readonly input: AccessRuleInput }
  | { readonly op: 'upsertExpressionRule', readonly input: ExpressionRuleInput }
  | { readonly op: 'deleteByRef', readonly workspaceId: string, readonly kind: RuleKind, readonly ruleRef: string }
  | { readonly op: 'deleteAccessByTarget', readonly workspaceId: string, readonly target: Target }

export interface BatchCheckpoint {
  readonly consumer: string
  /** The position after this batch: the seq of its last record. */
  readonly seq: number
  /**
   * The position this batch continues from: the stored checkpoint must hold exactly this (0
   * when none is stored yet), or nothing is applied. Left out, the checkpoint is set whatever
   * it held — for a single writer only (tools, tests).
   */
  readonly expected?: number
}

/**
 * `Op` is RuleOp for every caller but the embedded store's consumer thread, whose batches also
 * carry that store's own pre-encoded ops (consumer-thread.ts); nobody else can name them.
 */
export interface RuleBatch<Op = RuleOp> {
  /** Applied in order (a later op sees the effect of an earlier one on the same identity). */
  readonly ops: readonly Op[]
  /** Set in the same transaction as the ops. */
  readonly checkpoint?: BatchCheckpoint
  /**
   * Also one sweep pass (RuleStore#sweepLapsed with these arguments) after the ops, in the same
   * transaction, when the store can (the embedded store: its consumer sweeps in the commits it
   * makes anyway); a store that cannot ignores it and its result has no `swept`. `scrub: false`:
   * the pass removes lapsed rules only, and leaves the budget they do not use unspent instead of
   * scrubbing stale references of later buckets with it (the consumer, while records wait).
   */
  readonly sweep?: { readonly now: number, readonly limit: number, readonly scrub?: boolean }
}

export interface RuleBatchResult {
  /**
   * False when the checkpoint did not hold `checkpoint.expected`: no op was applied and the
   * checkpoint was left as it was.
   */
  readonly applied: boolean
  /** The checkpoint as stored after the call (null for a batch without checkpoint). On a
   *  mismatch, the position to continue from. */
  readonly checkpoint: number | null
  /** Upsert ops applied (each inserted or updated exactly one rule). */
  readonly upserted: number
  /** Rules removed by the delete ops. */
  readonly deleted: number
  /** The sweep pass the batch asked for, when the store made it. */
  readonly swept?: SweepPass
}

/** A Store that also applies rule batches; both backends implement it and `openStore` returns it. */
export interface BatchingStore<Op = RuleOp> extends Store {
  /**
   * Applies every op and the checkpoint atomically and durably, or nothing (rejecting with
   * TF_ERR_STORE_UNAVAILABLE, or resolving with `applied: false` when the checkpoint moved
   * meanwhile). The rules revision rises once when anything changed.
   *
   * @example
   *   const r = await store.applyRuleBatch({
   *     ops: [{ op: 'deleteByRef', workspaceId, kind: 'waf_rule', ruleRef: 'sqli-1' }],
   *     checkpoint: { consumer: 'rules', seq: 42, expected: 41 },
   *   })
   *   if (!r.applied) position = r.checkpoint! // another consumer got there first
   */
  applyRuleBatch (batch: RuleBatch<Op>): Promise<RuleBatchResult>
  /**
   * Present when the store's consumer applies on a thread of its own (the embedded store); absent
   * (MongoDB), the consumer runs in the server's thread (consumer-thread.ts).
   */
  readonly consumerThread?: ConsumerThreadHandoff
}
