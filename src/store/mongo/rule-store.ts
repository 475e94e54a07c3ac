/**
 * Rules on MongoDB. Identity is the unique index of each rule collection; an upsert is one
 * findOneAndUpdate(upsert) on it, and two upserts racing to insert one identity end with one
 * insert and one update (runTransaction retries the loser, which then finds the winner).
 */
import type { AnyBulkWriteOperation, ClientSession, Collection } from 'mongodb'
import type { RuleBatch, RuleBatchResult } from '../batch-types.js'
import type { AccessRule, AccessRuleInput, ExpressionRule, ExpressionRuleInput, Rule, RuleKind, RuleStore, Target } from '../types.js'
import { COUNTERS, type AccessRuleDoc, type ExpressionRuleDoc } from './collections.js'
import type { MongoContext } from './mongo-context.js'
import {
  accessByRefFilter, accessByTargetFilter, expressionByRefFilter, liveAt, toAccessRule, toExpressionRule,
  upsertAccessModel, upsertExpressionModel, type AccessWrite, type ExpressionWrite,
} from './rule-docs.js'
import { num, text } from './values.js'

function workspaceRevisionId (workspaceId: string): string {
  return `${COUNTERS.rulesRevision}:${text(workspaceId)}`
}

export class MongoRuleStore implements RuleStore {
  readonly #ctx: MongoContext

  constructor (ctx: MongoContext) {
    this.#ctx = ctx
  }

  upsertAccessRule (input: AccessRuleInput): Promise<AccessRule> {
    return this.#ctx.write(async (session) => {
      const { filter, update } = upsertAccessModel(input, Date.now())
      const doc = await this.#ctx.c.accessRules.findOneAndUpdate(filter, update, { session, upsert: true, returnDocument: 'after' })
      await this.#changed([input.workspaceId], session)
      return toAccessRule(present(doc))
    })
  }

  upsertExpressionRule (input: ExpressionRuleInput): Promise<ExpressionRule> {
    return this.#ctx.write(async (session) => {
      const { filter, update } = upsertExpressionModel(input, Date.now())
      const doc = await this.#ctx.c.expressionRules.findOneAndUpdate(filter, update, { session, upsert: true, returnDocument: 'after' })
      await this.#changed([input.workspaceId], session)
      return toExpressionRule(present(doc))
    })
  }

  deleteByRef (workspaceId: string, kind: RuleKind, ruleRef: string): Promise<boolean> {
    return this.#ctx.write(async (session) => {
      const res = kind === 'access_rule'
        ? await this.#ctx.c.accessRules.deleteOne(accessByRefFilter(workspaceId, ruleRef), { session })
        : await this.#ctx.c.expressionRules.deleteOne(expressionByRefFilter(workspaceId, kind, ruleRef), { session })
      if (res.deletedCount === 0) return false
      await this.#changed([workspaceId], session)
      return true
    })
  }

  deleteAccessByTarget (workspaceId: string, target: Target): Promise<number> {
    return this.#ctx.write(async (session) => {
      const res = await this.#ctx.c.accessRules.deleteMany(accessByTargetFilter(workspaceId, target), { session })
      if (res.deletedCount > 0) await this.#changed([workspaceId], session)
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

  listAccessRules (workspaceId: string, now: number): Promise<AccessRule[]> {
    return this.#ctx.run(async () => {
      return (await this.#ctx.c.accessRules.find({ workspaceId: text(workspaceId), ...liveAt(now) }).toArray()).map(toAccessRule)
    })
  }

  /**
   * Not one transaction: a purge after a long outage can remove more documents than a
   * transaction may hold. Each deleteMany is atomic per document and the purge is idempotent;
   * the revision is raised after the documents are gone, so a reader that sees it sees them gone.
   */
  purgeLapsed (before: number): Promise<number> {
    return this.#ctx.run(async () => {
      const lapsed = { expiresAt: { $lt: num(before) } }
      // Taken before the deletes: a workspace is then raised at worst once more than needed.
      const workspaces = new Set([
        ...await this.#ctx.c.accessRules.distinct('workspaceId', lapsed),
        ...await this.#ctx.c.expressionRules.distinct('workspaceId', lapsed),
      ])
      const access = await this.#ctx.c.accessRules.deleteMany(lapsed)
      const expression = await this.#ctx.c.expressionRules.deleteMany(lapsed)
      const removed = access.deletedCount + expression.deletedCount
      if (removed > 0) {
        for (const ws of workspaces) await this.#ctx.c.meta.updateOne({ _id: workspaceRevisionId(ws) }, { $inc: { value: 1 } }, { upsert: true })
        await this.#ctx.c.meta.updateOne({ _id: COUNTERS.rulesRevision }, { $inc: { value: 1 } })
      }
      return removed
    })
  }

  revisionOf (workspaceId: string): Promise<number> {
    return this.#ctx.run(async () => (await this.#ctx.c.meta.findOne({ _id: workspaceRevisionId(workspaceId) }))?.value ?? 0)
  }

  /** Inside the write's transaction: the rules revision and each changed workspace's. */
  async #changed (workspaces: Iterable<string>, session: ClientSession): Promise<void> {
    await this.#ctx.bump(COUNTERS.rulesRevision, session)
    // Created on a workspace's first change, unlike the global counters made at start-up.
    for (const ws of workspaces) await this.#ctx.c.meta.updateOne({ _id: workspaceRevisionId(ws) }, { $inc: { value: 1 } }, { session, upsert: true })
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
  applyRuleBatch (batch: RuleBatch): Promise<RuleBatchResult> {
    return this.#ctx.write(async (session): Promise<RuleBatchResult> => {
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
      for (const op of batch.ops) {
        workspaces.add('input' in op ? op.input.workspaceId : op.workspaceId)
        switch (op.op) {
          case 'upsertAccessRule': access.push({ updateOne: { ...upsertAccessModel(op.input, now), upsert: true } }); upserted++; break
          case 'upsertExpressionRule': expression.push({ updateOne: { ...upsertExpressionModel(op.input, now), upsert: true } }); upserted++; break
          case 'deleteByRef':
            if (op.kind === 'access_rule') access.push({ deleteOne: { filter: accessByRefFilter(op.workspaceId, op.ruleRef) } })
            else expression.push({ deleteOne: { filter: expressionByRefFilter(op.workspaceId, op.kind, op.ruleRef) } })
            break
          case 'deleteAccessByTarget': access.push({ deleteMany: { filter: accessByTargetFilter(op.workspaceId, op.target) } }); break
          default: throw new TypeError('unknown rule op')
        }
      }
      const deleted = await bulk(this.#ctx.c.accessRules, access, session) + await bulk(this.#ctx.c.expressionRules, expression, session)
      if (cp !== undefined) {
        await this.#ctx.c.checkpoints.updateOne({ _id: text(cp.consumer) }, { $set: { seq: num(cp.seq) } }, { session, upsert: true })
      }
      if (upserted + deleted > 0) await this.#changed(workspaces, session)
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
