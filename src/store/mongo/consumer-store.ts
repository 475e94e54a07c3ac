/**
 * Feed consumers (issue 20) on MongoDB: one document per consumer, `_id` its id. A flush is one
 * unordered bulk write of upserts whose update operators are consumer-record.ts's merge, so
 * nodes flushing the same consumer at once need no transaction: counts `$inc`, `firstSeen`
 * `$min`, last times `$max`, and the (time, value) pairs `last` and `held` `$max` as documents —
 * BSON compares documents field by field, so the one with the later `at` (their first field)
 * wins. The three most recent 4xx times are a `$push` with `$sort` and `$slice`.
 * An upsert that races another node's insert of the same `_id` is retried by the server itself
 * (an equality match on `_id`, MongoDB 4.2+).
 */
import type { AnyBulkWriteOperation } from 'mongodb'
import type { ConsumerStore, FeedConsumer } from '../types.js'
import type { ConsumerDoc } from './collections.js'
import type { MongoContext } from './mongo-context.js'
import { num, text } from './values.js'

function toDoc (c: FeedConsumer): AnyBulkWriteOperation<ConsumerDoc> {
  const inc: Record<string, number> = {
    polls: num(c.polls),
    ok: num(c.ok),
    notModified: num(c.notModified),
    clientErrors: num(c.clientErrors),
    serverErrors: num(c.serverErrors),
  }
  for (const [k, n] of Object.entries(c.intervals)) inc[`intervals.${Number(k)}`] = num(n)
  const max: Record<string, unknown> = { lastSeen: num(c.lastSeen), last: { at: num(c.last.at), status: num(c.last.status) } }
  if (c.last200At !== null) max.last200At = num(c.last200At)
  if (c.held !== null) max.held = { at: num(c.held.at), etag: text(c.held.etag), since: num(c.held.since) }
  const update: Record<string, unknown> = {
    $inc: inc,
    $min: { firstSeen: num(c.firstSeen) },
    $max: max,
    $setOnInsert: {
      workspaceId: text(c.workspaceId),
      keyId: text(c.keyId),
      address: text(c.address),
      userAgent: text(c.userAgent),
      client: text(c.client),
      listId: text(c.listId),
      variant: text(c.variant),
      family: text(c.family),
      action: text(c.action),
    },
  }
  update.$push = { recentFails: { $each: c.recentFails.map(num), $sort: -1, $slice: 3 } }
  return { updateOne: { filter: { _id: text(c.id) }, update, upsert: true } }
}

function fromDoc (d: ConsumerDoc): FeedConsumer {
  return {
    id: d._id,
    workspaceId: d.workspaceId,
    keyId: d.keyId,
    address: d.address,
    userAgent: d.userAgent,
    client: d.client,
    listId: d.listId,
    variant: d.variant,
    family: d.family,
    action: d.action,
    polls: d.polls,
    ok: d.ok,
    notModified: d.notModified,
    clientErrors: d.clientErrors,
    serverErrors: d.serverErrors,
    firstSeen: d.firstSeen,
    lastSeen: d.lastSeen,
    last: { at: d.last.at, status: d.last.status },
    last200At: d.last200At ?? null,
    held: d.held === undefined || d.held === null ? null : { at: d.held.at, etag: d.held.etag, since: d.held.since },
    recentFails: d.recentFails ?? [],
    intervals: { ...(d.intervals ?? {}) },
  }
}

export class MongoConsumerStore implements ConsumerStore {
  readonly #ctx: MongoContext

  constructor (ctx: MongoContext) {
    this.#ctx = ctx
  }

  merge (tallies: readonly FeedConsumer[]): Promise<void> {
    return this.#ctx.run(async () => {
      if (tallies.length === 0) return
      await this.#ctx.c.consumers.bulkWrite(tallies.map(toDoc), { ordered: false })
    })
  }

  list (workspaceId?: string): Promise<FeedConsumer[]> {
    return this.#ctx.run(async () => {
      const filter = workspaceId === undefined ? {} : { workspaceId: text(workspaceId) }
      const docs = await this.#ctx.c.consumers.find(filter).toArray()
      return docs.map(fromDoc)
    })
  }

  forget (before: number): Promise<number> {
    return this.#ctx.run(async () => {
      const r = await this.#ctx.c.consumers.deleteMany({ lastSeen: { $lt: num(before) } })
      return r.deletedCount
    })
  }
}
