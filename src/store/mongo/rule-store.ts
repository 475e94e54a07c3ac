/**
 * Rules on MongoDB. Identity is the unique index of each rule collection; an upsert is one
 * findOneAndUpdate(upsert) on it, and two upserts racing to insert one identity end with one
 * insert and one update (runTransaction retries the loser, which then finds the winner).
 */
import type { AnyBulkWriteOperation, ClientSession, Collection } from 'mongodb'
import type { RuleBatch, RuleBatchResult } from '../batch-types.js'
import {
  TOMBSTONE_MS, sweepCut, type AccessRule, type AccessRuleChanges, type AccessRuleInput, type ExpressionRule, type ExpressionRuleInput, type HousekeepingCounters,
  type LapsedTombstone, type Rule, type RuleKind, type RuleStore, type SweepPass, type Target,
} from '../types.js'
import { COUNTERS, type AccessRuleDoc, type ExpressionRuleDoc, type TombstoneDoc } from './collections.js'
import type { MongoContext } from './mongo-context.js'
import {
  accessByRefFilter, accessByTargetFilter, expressionByRefFilter, liveAt, targetKey, toAccessRule, toExpressionRule,
  upsertAccessModel, upsertExpressionModel, type AccessWrite, type ExpressionWrite,
} from './rule-docs.js'
import { num, text } from './values.js'

const REVISION_PREFIX = `${COUNTERS.rulesRevision}:`

function workspaceRevisionId (workspaceId: string): string {
  return REVISION_PREFIX + text(workspaceId)
}

/**
 * A workspace's count of transactions that deleted access rules (issue 33, item 6): a cache
 * that saw it unchanged knows no rule went, and its catch-up counts nothing.
 */
function workspaceRemovalsId (workspaceId: string): string {
  return `removals:rules:${text(workspaceId)}`
}

/** What a feed's rule cache reads: the rule, without the index-only fields (identity, targetKey). */
const CHANGED_RULE_PROJECTION = { identity: 0, targetKey: 0 } as const

/** Workspaces per revisionsOf query. */
export const REVISIONS_PER_QUERY = 1000

/** Rules per purge transaction: well inside what one transaction may hold. */
const PURGE_CHUNK = 1000

/** Longest run of a sliced read (accessRulesChangedSince) between two turns of the event loop:
 *  well under the 5 ms a poll may wait (as the embedded store's). */
const SLICE_MS = 0.5

/** Documents per round trip of an admin page's read (a page holds up to 500). */
const PAGE_BATCH_DOCS = 501

/** Documents per round trip of a sliced read, so that a batch's bytes stay a few MiB. */
const READ_BATCH_DOCS = 10_000

export class MongoRuleStore implements RuleStore {
  readonly #ctx: MongoContext
  readonly #counters: HousekeepingCounters
  readonly #tombstoneMax: number
  /** This process has raised the global rules revision once (#write says why). */
  #announced = false

  constructor (ctx: MongoContext, counters: HousekeepingCounters, tombstoneMax: number) {
    this.#ctx = ctx
    this.#counters = counters
    this.#tombstoneMax = tombstoneMax
  }

  upsertAccessRule (input: AccessRuleInput): Promise<AccessRule> {
    return this.#write(async (session, changed) => {
      const { filter, update } = upsertAccessModel(input, Date.now())
      const doc = await this.#ctx.c.accessRules.findOneAndUpdate(filter, update, { session, upsert: true, returnDocument: 'after' })
      await this.#changed([input.workspaceId], session)
      changed()
      return toAccessRule(present(doc))
    })
  }

  upsertExpressionRule (input: ExpressionRuleInput): Promise<ExpressionRule> {
    return this.#write(async (session, changed) => {
      const { filter, update } = upsertExpressionModel(input, Date.now())
      const doc = await this.#ctx.c.expressionRules.findOneAndUpdate(filter, update, { session, upsert: true, returnDocument: 'after' })
      await this.#changed([input.workspaceId], session)
      changed()
      return toExpressionRule(present(doc))
    })
  }

  deleteByRef (workspaceId: string, kind: RuleKind, ruleRef: string): Promise<boolean> {
    return this.#write(async (session, changed) => {
      const res = kind === 'access_rule'
        ? await this.#ctx.c.accessRules.deleteOne(accessByRefFilter(workspaceId, ruleRef), { session })
        : await this.#ctx.c.expressionRules.deleteOne(expressionByRefFilter(workspaceId, kind, ruleRef), { session })
      if (res.deletedCount === 0) return false
      await this.#changed([workspaceId], session, kind === 'access_rule' ? [workspaceId] : [])
      changed()
      return true
    })
  }

  deleteAccessByTarget (workspaceId: string, target: Target): Promise<number> {
    return this.#write(async (session, changed) => {
      const res = await this.#ctx.c.accessRules.deleteMany(accessByTargetFilter(workspaceId, target), { session })
      if (res.deletedCount > 0) {
        await this.#changed([workspaceId], session, [workspaceId])
        changed()
      }
      return res.deletedCount
    })
  }

  list (workspaceId: string, kind: RuleKind, now?: number): Promise<Rule[]> {
    return this.#ctx.run(async () => {
      const live = now === undefined ? {} : liveAt(now)
      if (kind === 'access_rule') {
        return (await this.#ctx.c.accessRules.find({ workspaceId: text(workspaceId), ...live }).toArray()).map(toAccessRule)
      }
      const docs = await this.#ctx.c.expressionRules.find({ workspaceId: text(workspaceId), kind: text(kind) as ExpressionRuleDoc['kind'], ...live }).toArray()
      return docs.map(toExpressionRule)
    })
  }

  rulesNewestFirst (workspaceId: string, kind: RuleKind, before: { at: number, id: string } | undefined, each: (rule: Rule) => boolean): Promise<void> {
    return this.#ctx.run(async () => {
      // The workspace_created indexes (collections.ts): a page reads about its own rules, not the workspace.
      const older = before === undefined ? {} : { $or: [{ createdAt: { $lt: num(before.at) } }, { createdAt: num(before.at), _id: { $lt: text(before.id) } }] }
      const sort = { createdAt: -1, _id: -1 } as const
      if (kind === 'access_rule') {
        for await (const d of this.#ctx.c.accessRules.find({ workspaceId: text(workspaceId), ...older }).sort(sort).batchSize(PAGE_BATCH_DOCS)) if (!each(toAccessRule(d))) return
        return
      }
      const filter = { workspaceId: text(workspaceId), kind: text(kind) as ExpressionRuleDoc['kind'], ...older }
      for await (const d of this.#ctx.c.expressionRules.find(filter).sort(sort).batchSize(PAGE_BATCH_DOCS)) if (!each(toExpressionRule(d))) return
    })
  }

  listAccessRules (workspaceId: string, now: number): Promise<AccessRule[]> {
    return this.#ctx.run(async () => {
      return (await this.#ctx.c.accessRules.find({ workspaceId: text(workspaceId), ...liveAt(now) }).toArray()).map(toAccessRule)
    })
  }

  async purgeLapsed (before: number): Promise<number> {
    let total = 0
    for (;;) {
      const removed = await this.#ctx.run(() => this.#sweepBelow(before, PURGE_CHUNK))
      total += removed
      this.#counters.rulesSwept += removed
      if (removed < PURGE_CHUNK) return total
    }
  }

  sweepLapsed (now: number, limit: number): Promise<SweepPass> {
    return this.#ctx.run(async () => {
      const budget = Math.max(1, limit)
      const removed = await this.#sweepBelow(sweepCut(now), budget)
      const tombs = await this.#dropTombstones(now, budget)
      const c = this.#counters
      c.sweepPasses++
      c.rulesSwept += removed
      c.tombstonesDropped += tombs.dropped
      return { removed, tombstonesDropped: tombs.dropped, staleCleaned: 0, more: removed >= budget || tombs.found >= budget }
    })
  }

  /**
   * Up to `limit` tombstones, oldest lapse first: those beyond the cap, then those older than
   * TOMBSTONE_MS. Each delete names the lapse times it found, so a tombstone replaced meanwhile
   * by a later lapse stays; two processes dropping at once may keep somewhat fewer than the cap.
   */
  async #dropTombstones (now: number, limit: number): Promise<{ found: number, dropped: number }> {
    const c = this.#ctx.c.tombstones
    const excess = Math.min(limit, (await c.estimatedDocumentCount()) - this.#tombstoneMax)
    const overCap = excess > 0 ? await c.find({}, { projection: { _id: 1, lapsedAt: 1 } }).sort({ lapsedAt: 1 }).limit(excess).toArray() : []
    const aged = overCap.length < limit
      ? await c.find({ lapsedAt: { $lt: num(now - TOMBSTONE_MS) }, _id: { $nin: overCap.map((d) => d._id) } }, { projection: { _id: 1, lapsedAt: 1 } }).sort({ lapsedAt: 1 }).limit(limit - overCap.length).toArray()
      : []
    const found = [...overCap, ...aged]
    if (found.length === 0) return { found: 0, dropped: 0 }
    const { deletedCount } = await c.deleteMany({ $or: found.map((d) => ({ _id: text(d._id), lapsedAt: num(d.lapsedAt) })) })
    return { found: found.length, dropped: deletedCount }
  }

  /**
   * Up to `limit` rules lapsed before `cut`, found through the expiry indexes, then removed in a
   * transaction that finds them again: a rule whose expiry moved meanwhile no longer matches,
   * and two processes sweeping the same rules conflict, the loser retrying to find them gone —
   * so each rule is removed and counted once. Returns how many.
   */
  async #sweepBelow (cut: number, limit: number): Promise<number> {
    const lapsed = { expiresAt: { $lt: num(cut) } }
    const access = (await this.#ctx.c.accessRules.find(lapsed, { projection: { _id: 1 } }).sort({ expiresAt: 1 }).limit(limit).toArray()).map((d) => d._id)
    const expression = (await this.#ctx.c.expressionRules.find(lapsed, { projection: { _id: 1 } }).sort({ expiresAt: 1 }).limit(Math.max(1, limit - access.length)).toArray()).map((d) => d._id)
    if (access.length + expression.length === 0) return 0
    return this.#write(async (session, changed) => {
      const a = await this.#ctx.c.accessRules.find({ _id: { $in: access }, ...lapsed }, { session }).toArray()
      const e = await this.#ctx.c.expressionRules.find({ _id: { $in: expression }, ...lapsed }, { session }).toArray()
      if (a.length > 0) await this.#ctx.c.accessRules.deleteMany({ _id: { $in: a.map((d) => d._id) } }, { session })
      if (e.length > 0) await this.#ctx.c.expressionRules.deleteMany({ _id: { $in: e.map((d) => d._id) } }, { session })
      const tombs: TombstoneDoc[] = [
        ...a.map((d): TombstoneDoc => ({ _id: `${d.workspaceId}|a|${d.identity}`, workspaceId: d.workspaceId, kind: 'access_rule', targetKey: d.targetKey, target: d.target, ruleRef: d.ruleRef, lapsedAt: d.expiresAt!, action: d.action })),
        ...e.map((d): TombstoneDoc => ({ _id: `${d.workspaceId}|${d.kind}|${d.ruleRef}`, workspaceId: d.workspaceId, kind: d.kind, targetKey: null, target: null, ruleRef: d.ruleRef, lapsedAt: d.expiresAt! })),
      ]
      if (tombs.length === 0) return 0
      await this.#ctx.c.tombstones.bulkWrite(tombs.map((t) => ({ replaceOne: { filter: { _id: t._id }, replacement: t, upsert: true } })), { session, ordered: false })
      await this.#changed(new Set(tombs.map((t) => t.workspaceId)), session)
      changed()
      return tombs.length
    })
  }

  lapsedTombstones (workspaceId: string, of: Target | { kind: ExpressionRule['kind'], ruleRef: string }): Promise<LapsedTombstone[]> {
    return this.#ctx.run(async () => {
      const filter = 'kind' in of
        ? { _id: `${text(workspaceId)}|${text(of.kind)}|${text(of.ruleRef)}` }
        : { workspaceId: text(workspaceId), targetKey: targetKey(of) }
      const docs = await this.#ctx.c.tombstones.find(filter).sort({ lapsedAt: -1 }).toArray()
      return docs.map((d) => ({ workspaceId: d.workspaceId, kind: d.kind, target: d.target, ruleRef: d.ruleRef, lapsedAt: d.lapsedAt, ...(d.action !== undefined ? { action: d.action } : {}) }))
    })
  }

  accessRulesOfTargets (workspaceId: string, targets: readonly Target[]): Promise<AccessRule[]> {
    return this.#ctx.run(async () => {
      if (targets.length === 0) return []
      const docs = await this.#ctx.c.accessRules.find({ workspaceId: text(workspaceId), targetKey: { $in: targets.map(targetKey) } }).toArray()
      return docs.map(toAccessRule)
    })
  }

  /**
   * Through the workspace_seq index. Three reads, not one snapshot: the watermark is read first,
   * so a write racing them is read again next time, and a count it skews makes the caller reload.
   * Decoded in slices between turns of the event loop, so polls are answered during a large read.
   */
  accessRulesChangedSince (workspaceId: string, since: number, now: number, each: (rule: AccessRule) => void, _gone?: unknown, removalsSeen?: number): Promise<AccessRuleChanges> {
    return this.#ctx.run(async () => {
      const ws = text(workspaceId)
      // First: a delete after it is counted next time.
      const removals = (await this.#ctx.c.meta.findOne({ _id: workspaceRemovalsId(ws) }))?.value ?? 0
      const top = await this.#ctx.c.accessRules.find({ workspaceId: ws }, { projection: { seq: 1 } }).sort({ seq: -1 }).limit(1).toArray()
      let changed = 0
      // The driver decodes a batch's documents one by one as they are taken, and taking one
      // already received never yields to the event loop: a reload of a large workspace would
      // hold the HTTP thread for all of a batch. Slices of about SLICE_MS, a turn between them.
      let until = performance.now() + SLICE_MS
      const cursor = this.#ctx.c.accessRules.find({ workspaceId: ws, seq: { $gt: num(since) } }, { projection: CHANGED_RULE_PROJECTION }).batchSize(READ_BATCH_DOCS)
      for await (const doc of cursor) {
        changed++
        each(toAccessRule(doc))
        if ((changed & 127) === 0 && performance.now() >= until) {
          await new Promise((resolve) => setImmediate(resolve))
          until = performance.now() + SLICE_MS
        }
      }
      // No access rule deleted since the caller's last read: nothing to count (the count walks
      // every live rule of the workspace in the index, and the caller's its whole table).
      const live = since >= 0 && removalsSeen === removals ? null : await this.#ctx.c.accessRules.countDocuments({ workspaceId: ws, ...liveAt(now) })
      return { changed, live, seq: Math.max(since, top[0]?.seq ?? since), removals }
    })
  }

  revisionsOf (workspaceIds: readonly string[]): Promise<Map<string, number>> {
    return this.#ctx.run(async () => {
      const out = new Map<string, number>()
      for (const id of workspaceIds) out.set(id, 0)
      // In slices: one $in over every workspace grew with the tenant count, past what one
      // query (and its 16 MiB command) should carry.
      for (let i = 0; i < workspaceIds.length; i += REVISIONS_PER_QUERY) {
        const ids = workspaceIds.slice(i, i + REVISIONS_PER_QUERY).map((id) => workspaceRevisionId(text(id)))
        for await (const d of this.#ctx.c.meta.find({ _id: { $in: ids } })) out.set(d._id.slice(REVISION_PREFIX.length), d.value)
      }
      return out
    })
  }

  revisionOf (workspaceId: string): Promise<number> {
    return this.#ctx.run(async () => (await this.#ctx.c.meta.findOne({ _id: workspaceRevisionId(workspaceId) }))?.value ?? 0)
  }

  /**
   * Inside the write's transaction: each changed workspace's revision, and the removals count of
   * those it deleted access rules from, in one round trip
   * (created on a workspace's first change, unlike the global counters made at start-up).
   */
  async #changed (workspaces: Iterable<string>, session: ClientSession, removedFrom: Iterable<string> = []): Promise<void> {
    const ops = [...workspaces].map((ws) => workspaceRevisionId(ws)).concat([...removedFrom].map((ws) => workspaceRemovalsId(ws)))
      .map((id) => ({ updateOne: { filter: { _id: id }, update: { $inc: { value: 1 } }, upsert: true } }))
    if (ops.length > 0) await this.#ctx.c.meta.bulkWrite(ops, { session, ordered: false })
  }

  /**
   * A rule write: `fn` in a transaction, then — when it changed something — the global rules
   * revision, raised AFTER the commit, outside it (issue 33). Inside, every transaction that
   * changed rules wrote that one document, so any two conflicted and a long apply lost to each
   * short sweep or admin write that committed during it. Raised after the workspace revisions
   * it announces, so a reader that sees it move finds them moved. Lost only if the process dies
   * between the two: the next process to write rules raises it at its first write whatever it
   * changed (#announced), and whoever takes the applier lease over writes the checkpoint.
   */
  async #write<T> (fn: (session: ClientSession, changed: () => void) => Promise<T>): Promise<T> {
    let changed = false
    const result = await this.#ctx.write((session) => {
      changed = false
      return fn(session, () => { changed = true })
    })
    if (changed || !this.#announced) {
      await this.#ctx.run(() => this.#ctx.c.meta.updateOne({ _id: COUNTERS.rulesRevision }, { $inc: { value: 1 } }))
      this.#announced = true
    }
    return result
  }

  /**
   * The ops go out as one ordered bulkWrite per collection, in one transaction with the
   * checkpoint. Splitting by collection keeps each identity's ops in order: an op only ever
   * touches rules of its own collection.
   *
   * The checkpoint's compare-and-set: the transaction reads the checkpoint from its snapshot and
   * always writes it. Two transactions that both saw the expected value both write that document,
   * and MongoDB lets only the first commit (the other gets a WriteConflict, a transient error
   * runTransaction retries); the retry then reads the moved checkpoint and applies nothing.
   */
  async applyRuleBatch (batch: RuleBatch): Promise<RuleBatchResult> {
    const result = await this.#applyOps(batch)
    if (batch.sweep === undefined || !result.applied) return result
    // The sweep the consumer asked for, in a transaction of its own right after the apply's: in
    // turn with the applies of the one node that holds the applier lease, never against them.
    // A failing sweep does not fail the apply: the consumer asks again at its next pass.
    try {
      return { ...result, swept: await this.sweepLapsed(batch.sweep.now, batch.sweep.limit) }
    } catch {
      return result
    }
  }

  #applyOps (batch: RuleBatch): Promise<RuleBatchResult> {
    return this.#write(async (session, changed): Promise<RuleBatchResult> => {
      const cp = batch.checkpoint
      if (cp?.expected !== undefined) {
        const stored = (await this.#ctx.c.checkpoints.findOne({ _id: text(cp.consumer) }, { session }))?.seq ?? 0
        if (stored !== cp.expected) return { applied: false, checkpoint: stored, upserted: 0, deleted: 0 }
      }
      const now = Date.now()
      const access: AccessWrite[] = []
      const expression: ExpressionWrite[] = []
      let upserted = 0
      // Every workspace an op names (a delete that finds nothing raises it needlessly, harmlessly).
      const workspaces = new Set<string>()
      const removedFrom = new Set<string>()
      for (const op of batch.ops) {
        workspaces.add('input' in op ? op.input.workspaceId : op.workspaceId)
        switch (op.op) {
          case 'upsertAccessRule': access.push({ updateOne: { ...upsertAccessModel(op.input, now), upsert: true } }); upserted++; break
          case 'upsertExpressionRule': expression.push({ updateOne: { ...upsertExpressionModel(op.input, now), upsert: true } }); upserted++; break
          case 'deleteByRef':
            if (op.kind === 'access_rule') {
              access.push({ deleteOne: { filter: accessByRefFilter(op.workspaceId, op.ruleRef) } })
              removedFrom.add(op.workspaceId)
            }
            else expression.push({ deleteOne: { filter: expressionByRefFilter(op.workspaceId, op.kind, op.ruleRef) } })
            break
          case 'deleteAccessByTarget': access.push({ deleteMany: { filter: accessByTargetFilter(op.workspaceId, op.target) } }); removedFrom.add(op.workspaceId); break
          default: throw new TypeError('unknown rule op')
        }
      }
      const deleted = await bulk(this.#ctx.c.accessRules, access, session) + await bulk(this.#ctx.c.expressionRules, expression, session)
      if (cp !== undefined) {
        await this.#ctx.c.checkpoints.updateOne({ _id: text(cp.consumer) }, { $set: { seq: num(cp.seq) } }, { session, upsert: true })
      }
      if (upserted + deleted > 0) {
        await this.#changed(workspaces, session, deleted > 0 ? removedFrom : [])
        changed()
      }
      return { applied: true, checkpoint: cp?.seq ?? null, upserted, deleted }
    })
  }
}

/** Runs an ordered bulk write; returns how many documents it deleted. */
async function bulk<D extends AccessRuleDoc | ExpressionRuleDoc> (
  collection: Collection<D>,
  ops: Array<AnyBulkWriteOperation<D>>,
  session: ClientSession,
): Promise<number> {
  if (ops.length === 0) return 0
  const res = await collection.bulkWrite(ops, { session, ordered: true })
  return res.deletedCount
}

/** findOneAndUpdate with upsert and returnDocument 'after' always returns the document. */
function present<T> (doc: T | null): T {
  if (doc === null) throw new Error('upsert returned no document')
  return doc
}
