/**
 * Rules on LMDB. Writes live in rule-writes.ts so that applyRuleBatch can run many of them in
 * one transaction; every write that changes something raises the rules revision with it. Reads
 * start from the latest commit (LmdbEnv.readLatest): a rule written or deleted by another store on
 * the directory — the consumer's thread, the CLI, another node — is seen by the next read.
 */
import type { RuleBatch, RuleBatchResult } from '../batch-types.js'
import type { EmbeddedRuleOp } from './packed-batch.js'
import {
  TOMBSTONE_MS, addSweepPass, sweepCut, type AccessRule, type AccessRuleChanges, type AccessRuleInput, type ExpressionRule, type ExpressionRuleInput, type HousekeepingCounters,
  type LapsedTombstone, type Rule, type RuleKind, type RuleStore, type SweepPass, type Target,
} from '../types.js'
import { ArrivalIndex, NotCaughtUp, type ArrivalTxn } from './arrival-index.js'
import { ExpiryLogWriter, purgeLog, scrubLog, type PurgeStep } from './expiry-log.js'
import type { Transaction } from 'lmdb'
import { CHANGES_KEPT_MS, changesTrimmedKey, trimChanges } from './change-log.js'
import { readChanges, readWhole } from './change-reads.js'
import { accessRuleKey, expressionRuleRange, targetIdentity, targetIndexRange, tombstoneKey, tombstoneTargetRange, workspaceRange } from './key-layout.js'
import { META, workspaceRulesRevision, type Databases, type ExpiryLogKey } from './layout.js'
import type { LmdbEnv } from './lmdb-env.js'
import { decodeAccessRule } from './rule-codec.js'
import { dropTombstones, findTombstones } from './tombstones.js'
import { lapseTarget, putAccessRule, putEncodedAccessRule, putExpressionRule, readAccessRule, removeAccessByTarget, removeByRef, upsertAccessRule, type RuleTxn } from './rule-writes.js'

/** Expiry-log references handled per transaction: bounded, so a purge after a long outage never
 *  holds the (cross-process) write lock for long. */
const PURGE_CHUNK = 5000

/** What one sweep step did, until its transaction commits. */
interface SweepStep {
  readonly swept: PurgeStep
  readonly scrub: PurgeStep | null
  readonly tombstonesDropped: number
  readonly budget: number
}

/** Arrival keys per slice of a catch-up outside the lock (#catchUp: a few milliseconds). */
const WARM_SLICE = 5000

/** Tries of a write whose workspace's arrival identity another writer keeps moving ahead of it
 *  (NotCaughtUp) before it catches up under the lock: never in practice, but a write must end. */
const BOUNDED_TRIES = 5

/** Longest slice of a sliced read (accessRulesChangedSince): well under the 5 ms a poll may wait. */
const SLICE_MS = 0.5

export class EmbeddedRuleStore implements RuleStore {
  readonly #env: LmdbEnv
  readonly #counters: HousekeepingCounters
  readonly #tombstoneMax: number
  /** Where this process's scrub of the expiry log stopped (undefined: at the start). */
  #scrubAfter: ExpiryLogKey | undefined
  readonly #arrivals = new ArrivalIndex()

  readonly #changesKeptMs: number

  /** `changesKeptMs`: how long change-log entries are kept (change-log.ts CHANGES_KEPT_MS). */
  constructor (env: LmdbEnv, counters: HousekeepingCounters, tombstoneMax: number, changesKeptMs = CHANGES_KEPT_MS) {
    this.#env = env
    this.#changesKeptMs = changesKeptMs
    this.#counters = counters
    this.#tombstoneMax = tombstoneMax
  }

  upsertAccessRule (input: AccessRuleInput): Promise<AccessRule> {
    return this.#write((txn) => {
      const rule = putAccessRule(txn, input, Date.now())
      this.#changed([input.workspaceId])
      return rule
    })
  }

  upsertExpressionRule (input: ExpressionRuleInput): Promise<ExpressionRule> {
    return this.#write((txn) => {
      const rule = putExpressionRule(txn, input, Date.now())
      this.#changed([input.workspaceId])
      return rule
    })
  }

  deleteByRef (workspaceId: string, kind: RuleKind, ruleRef: string): Promise<boolean> {
    return this.#write((txn) => {
      const removed = removeByRef(txn, workspaceId, kind, ruleRef)
      if (removed) this.#changed([workspaceId])
      return removed
    })
  }

  deleteAccessByTarget (workspaceId: string, target: Target): Promise<number> {
    return this.#write((txn) => {
      const removed = removeAccessByTarget(txn, workspaceId, target)
      if (removed > 0) this.#changed([workspaceId])
      return removed
    })
  }

  async revisionOf (workspaceId: string): Promise<number> {
    return this.#env.readLatest((dbs) => dbs.meta.get(workspaceRulesRevision(workspaceId)) ?? 0)
  }

  /** Inside a write: raises the rules revision and that of each workspace whose rules changed. */
  #changed (workspaces: Iterable<string>): void {
    this.#env.bump(META.rulesRevision)
    for (const ws of workspaces) this.#env.bump(workspaceRulesRevision(ws))
  }

  async list (workspaceId: string, kind: RuleKind, now?: number): Promise<Rule[]> {
    if (kind === 'access_rule') return this.#env.readLatest((dbs) => readAccessRules(dbs, workspaceId, now))
    return this.#env.readLatest((dbs) => {
      const rules: Rule[] = []
      for (const { value } of dbs.expressionRules.getRange(expressionRuleRange(workspaceId, kind))) {
        if (now === undefined || !isLapsed(value, now)) rules.push(value)
      }
      return rules
    })
  }

  async listAccessRules (workspaceId: string, now: number): Promise<AccessRule[]> {
    return this.#env.readLatest((dbs) => readAccessRules(dbs, workspaceId, now))
  }

  /**
   * Read in slices of about SLICE_MS, each of the latest commit (LmdbEnv.readSliced). `since` and the answer's `seq` are numbers of
   * the store's change counter (change-log.ts), not rule seqs. From a number the change log still
   * covers, the workspace's arrival keys and change entries after it are read, merged in number
   * order, removals handed to `gone`, and `live` is null: O(changes). Otherwise (the first read, or
   * one from before the log's trim mark) every rule is read and counted, and handed to `each`.
   */
  async accessRulesChangedSince (workspaceId: string, since: number, now: number, each: (rule: AccessRule) => void, gone?: (ruleRef: string | null, target: Target | null) => void): Promise<AccessRuleChanges> {
    let read: ((dbs: Databases, transaction: Transaction, until: number) => boolean) | null = null
    let answer: AccessRuleChanges = { changed: 0, live: null, seq: since }
    await this.#env.readSliced((dbs, transaction) => {
      const until = performance.now() + SLICE_MS
      if (read === null) {
        const top = (dbs.meta.get(META.arrivalNext, { transaction }) ?? 1) - 1
        const trimmed = dbs.meta.get(changesTrimmedKey(workspaceId), { transaction }) ?? 0
        const whole = since < 0 || since < trimmed || gone === undefined
        answer = { changed: 0, live: whole ? 0 : null, seq: top }
        read = whole ? readWhole(workspaceId, now, each, answer) : readChanges(workspaceId, since, each, gone, answer)
      }
      return read(dbs, transaction, until)
    })
    return answer
  }

  /**
   * Builds the arrival identity of every workspace ahead of its first write, WARM_SLICE keys at a
   * time with the event loop free between slices (a write arriving meanwhile catches up the rest
   * itself). Ends quietly when the store closes.
   */
  async warmArrivals (): Promise<void> {
    try {
      const workspaces = this.#env.readLatest((dbs) => Array.from(dbs.workspaces.getKeys({})))
      for (const ws of workspaces) await this.#catchUp(ws)
    } catch (e) {
      if (!this.#env.closed) throw e
    }
  }

  /** Catches the workspace's arrival identity up to the latest commit, WARM_SLICE keys per read, the event loop free between. */
  async #catchUp (workspaceId: string): Promise<void> {
    while (!this.#env.readLatest((dbs) => this.#arrivals.catchUp(dbs, workspaceId, WARM_SLICE))) {
      await new Promise<void>((resolve) => { setImmediate(resolve) })
    }
  }

  async purgeLapsed (before: number): Promise<number> {
    let total = 0
    let after: ExpiryLogKey | undefined
    for (;;) {
      const step = await this.#write((txn) => this.#purge(txn, before, after, PURGE_CHUNK))
      total += step.removed
      this.#counters.rulesSwept += step.removed
      this.#counters.staleCleaned += step.stale
      after = step.last
      if (step.scanned < PURGE_CHUNK) return total
    }
  }

  /**
   * Ended buckets are swept from the start of the log: each entry read goes whole, so the next
   * pass starts at work not yet done. Budget left over scrubs later buckets from where the last
   * pass of this process stopped (two processes scrubbing the same entries agree: both drop only
   * references that name no rule of that bucket).
   */
  async sweepLapsed (now: number, limit: number): Promise<SweepPass> {
    const step = await this.#write((txn) => this.#sweepIn(txn, now, limit))
    return this.#swept(step)
  }

  /**
   * Inside a write: one sweep pass (sweepLapsed's), for applyRuleBatch too, so that the consumer
   * sweeps in the transactions it commits anyway — no write lock of its own to wait for, and no
   * flush of its own (bench/NOTES.md, "Sweep: in the consumer's transactions").
   */
  #sweepIn (txn: RuleTxn, now: number, limit: number, scrubs = true): SweepStep {
    const budget = Math.max(1, limit)
    const swept = this.#purge(txn, sweepCut(now), undefined, budget)
    let scrub: PurgeStep | null = null
    if (scrubs && swept.scanned < budget) {
      scrub = scrubLog(txn.dbs, txn.scratch, lapseTarget(txn, () => {}), this.#scrubAfter, budget - swept.scanned)
    }
    const tombstonesDropped = dropTombstones(txn.dbs, now - TOMBSTONE_MS, this.#tombstoneMax, budget)
    return { swept, scrub, tombstonesDropped, budget }
  }

  /** After the commit of a sweep step: its counts, and the scrub's cursor moves. */
  #swept ({ swept, scrub, tombstonesDropped, budget }: SweepStep): SweepPass {
    if (scrub !== null) this.#scrubAfter = scrub.last
    const more = swept.scanned >= budget || (scrub !== null && scrub.last !== undefined) || tombstonesDropped >= budget
    const pass = { removed: swept.removed, tombstonesDropped, staleCleaned: swept.stale + (scrub?.stale ?? 0), more }
    addSweepPass(this.#counters, pass)
    return pass
  }

  /** Inside a write: one step of the log's lapsed buckets, raising the revisions it must. */
  #purge (txn: RuleTxn, before: number, after: ExpiryLogKey | undefined, limit: number): PurgeStep {
    const workspaces = new Set<string>()
    const target = lapseTarget(txn, (ws) => { workspaces.add(ws) })
    const step = purgeLog(txn.dbs, txn.scratch, target, before, after, limit)
    target.finish()
    if (step.removed > 0) this.#changed(workspaces)
    return step
  }

  async lapsedTombstones (workspaceId: string, of: Target | { kind: ExpressionRule['kind'], ruleRef: string }): Promise<LapsedTombstone[]> {
    return this.#env.readLatest((dbs) => {
      return findTombstones(dbs, 'kind' in of ? { key: tombstoneKey(workspaceId, of.kind, null, of.ruleRef) } : { range: tombstoneTargetRange(workspaceId, of) })
    })
  }

  async accessRulesOfTargets (workspaceId: string, targets: readonly Target[]): Promise<AccessRule[]> {
    // In slices first: the look-up below then reads only what was committed since.
    await this.#catchUp(workspaceId)
    return this.#env.readLatest((dbs) => {
      const found: AccessRule[] = []
      for (const target of targets) {
        // The unkeyed rule is in arrival order (or, written before format 5, under its target
        // key); keyed ones are in the target index.
        const arrival = this.#arrivals.lookup(dbs, workspaceId, targetIdentity(target))
        const own = readAccessRule(dbs, arrival ?? accessRuleKey(workspaceId, null, target), workspaceId)
        if (own !== undefined) found.push(own)
        for (const { value } of dbs.accessByTarget.getRange(targetIndexRange(workspaceId, target))) {
          const rule = readAccessRule(dbs, value, workspaceId)
          if (rule !== undefined) found.push(rule)
        }
      }
      return found
    })
  }

  async applyRuleBatch (batch: RuleBatch<EmbeddedRuleOp>): Promise<RuleBatchResult> {
    let sweep: SweepStep | null = null
    const result = await this.#write((txn) => {
      const applied = this.#applyIn(txn, batch)
      // After the ops: a rule this batch refreshed is no longer lapsed. Not when the checkpoint
      // moved under us: that transaction must change nothing (the consumer reads on and retries).
      if (applied.applied && batch.sweep !== undefined) sweep = this.#sweepIn(txn, batch.sweep.now, batch.sweep.limit, batch.sweep.scrub !== false)
      return applied
    })
    return sweep === null ? result : { ...result, swept: this.#swept(sweep) }
  }

  #applyIn (txn: RuleTxn, batch: RuleBatch<EmbeddedRuleOp>): RuleBatchResult {
    const { dbs } = txn
    const cp = batch.checkpoint
    if (cp?.expected !== undefined) {
      // Under LMDB's write lock, which every process shares: nobody moves it in between.
      const stored = dbs.checkpoints.get(cp.consumer) ?? 0
      if (stored !== cp.expected) return { applied: false, checkpoint: stored, upserted: 0, deleted: 0 }
    }
    const now = Date.now()
    let upserted = 0
    let deleted = 0
    // A batch is usually one workspace's: the set stays tiny.
    const workspaces = new Set<string>()
    for (const op of batch.ops) {
      switch (op.op) {
        case 'upsertAccessRule': upsertAccessRule(txn, op.input, now, null); upserted++; workspaces.add(op.input.workspaceId); break
        case 'putEncodedAccessRule': putEncodedAccessRule(txn, op, now); upserted++; workspaces.add(op.workspaceId); break
        case 'upsertExpressionRule': putExpressionRule(txn, op.input, now); upserted++; workspaces.add(op.input.workspaceId); break
        case 'deleteByRef': if (removeByRef(txn, op.workspaceId, op.kind, op.ruleRef)) { deleted++; workspaces.add(op.workspaceId) } break
        case 'deleteAccessByTarget': {
          const removed = removeAccessByTarget(txn, op.workspaceId, op.target)
          if (removed > 0) workspaces.add(op.workspaceId)
          deleted += removed
          break
        }
        // Throwing aborts the whole batch: an op we do not know must not be skipped silently.
        default: throw new TypeError('unknown rule op')
      }
    }
    if (cp !== undefined) dbs.checkpoints.put(cp.consumer, cp.seq)
    if (upserted + deleted > 0) this.#changed(workspaces)
    // The arrival index drops entries whose rules were swept (arrival-index.ts).
    for (const ws of workspaces) txn.arrivals.prune(ws)
    return { applied: true, checkpoint: cp?.seq ?? null, upserted, deleted }
  }

  /**
   * A write transaction with what rule writes need; the expiry log is written before the commit.
   *
   * The arrival identity is never built under the write lock: a transaction that finds a
   * workspace's map more than CATCH_UP_MAX keys behind (NotCaughtUp: the first write of it after
   * a start, or another process wrote much since) rolls back having written nothing, the map is
   * caught up in slices of reads, and the transaction runs again.
   *
   * A transaction that fails has its changes to the arrival index undone (ArrivalTxn#revert),
   * synchronously, before lmdb-js runs any other transaction. A commit that fails afterwards
   * undoes them too when this store commits alone (syncWrites); otherwise the commit held other
   * transactions' writes, whose changes may have been made on top, and the index is emptied
   * (rebuilt on its next use, outside the lock).
   */
  async #write<T> (fn: (txn: RuleTxn) => T): Promise<T> {
    for (let tries = 1; ; tries++) {
      let arrivals: ArrivalTxn | null = null
      let ran = false
      try {
        return await this.#env.write((dbs) => {
          const now = Date.now()
          arrivals = this.#arrivals.begin(dbs, tries <= BOUNDED_TRIES ? undefined : Infinity)
          const txn: RuleTxn = { dbs, scratch: this.#env.scratch, keys: this.#env.keys, log: new ExpiryLogWriter(), arrivals, now, logged: new Map() }
          try {
            const result = fn(txn)
            for (const [ws, added] of txn.logged) trimChanges(dbs, ws, now, added, this.#changesKeptMs)
            txn.log.write(dbs, txn.scratch)
            txn.arrivals.finish()
            ran = true
            return result
          } catch (e) {
            arrivals.revert()
            throw e
          }
        })
      } catch (e) {
        const behind = NotCaughtUp.of(e)
        if (behind !== undefined && !this.#env.closed) {
          await this.#catchUp(behind.workspaceId)
          continue
        }
        if (ran) {
          if (this.#env.syncWrites) (arrivals as ArrivalTxn | null)?.revert()
          else this.#arrivals.clear()
        }
        throw e
      }
    }
  }
}

function readAccessRules (dbs: Databases, workspaceId: string, now: number | undefined): AccessRule[] {
  const rules: AccessRule[] = []
  for (const { value } of dbs.accessRules.getRange(workspaceRange(workspaceId))) {
    const rule = decodeAccessRule(value, workspaceId)
    if (now === undefined || !isLapsed(rule, now)) rules.push(rule)
  }
  return rules
}

/** A rule lapses at its expiresAt instant (types.ts: expiresAt <= now is lapsed). */
function isLapsed (rule: Rule, now: number): boolean {
  return rule.expiresAt !== null && rule.expiresAt <= now
}
