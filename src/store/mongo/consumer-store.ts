/**
 * Feed consumers (issue 20) on MongoDB: one document per consumer, `_id` its id. A flush is one
 * unordered bulk write of upserts whose update operators are consumer-record.ts's merge, so
 * nodes flushing the same consumer at once need no transaction: counts `$inc`, `firstSeen`
 * `$min`, last times `$max`, and the (time, value) pairs `last` and `held` `$max` as documents —
 * BSON compares documents field by field, so the one with the later `at` (their first field)
 * wins. The three most recent 4xx times are a `$push` with `$sort` and `$slice`.
 * An upsert that races another node's insert of the same `_id` is retried by the server itself
 * (an equality match on `_id`, MongoDB 4.2+). A workspace's drop counts (issue 35) are counters
 * in `meta`, `consumer-drops:<workspace>:<kind>`, `$inc`ed like the revisions.
 */
import type { AnyBulkWriteOperation } from 'mongodb'
import { noDrops } from '../consumer-record.js'
import type { ConsumerDrops, ConsumerStore, FeedConsumer } from '../types.js'
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

const DROPS_PREFIX = 'consumer-drops:'
const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

export class MongoConsumerStore implements ConsumerStore {
  readonly #ctx: MongoContext

  constructor (ctx: MongoContext) {
    this.#ctx = ctx
  }

  merge (tallies: readonly FeedConsumer[], drops?: ReadonlyMap<string, ConsumerDrops>): Promise<void> {
    return this.#ctx.run(async () => {
      if (tallies.length > 0) await this.#ctx.c.consumers.bulkWrite(tallies.map(toDoc), { ordered: false })
      if (drops !== undefined) for (const [ws, d] of drops) await this.#addDrops(ws, d)
    })
  }

  trim (workspaceId: string, keyId: string, keep: number): Promise<number> {
    return this.#ctx.run(async () => {
      const filter = { workspaceId: text(workspaceId), keyId: text(keyId) }
      const gone = await this.#ctx.c.consumers.find(filter, { projection: { _id: 1, lastSeen: 1 } }).sort({ lastSeen: -1 }).skip(keep).toArray()
      if (gone.length === 0) return 0
      // Each removal checks its lastSeen again: another node may have merged a later poll meanwhile.
      const r = await this.#ctx.c.consumers.bulkWrite(gone.map((d) => ({ deleteOne: { filter: { _id: d._id, lastSeen: d.lastSeen } } })), { ordered: false })
      await this.#addDrops(workspaceId, { evicted: 0, refused: 0, removed: r.deletedCount })
      return r.deletedCount
    })
  }

  drops (workspaceId?: string): Promise<ConsumerDrops> {
    return this.#ctx.run(async () => {
      const prefix = workspaceId === undefined ? DROPS_PREFIX : `${DROPS_PREFIX}${text(workspaceId)}:`
      const sum = noDrops()
      const docs = await this.#ctx.c.meta.find({ _id: { $regex: `^${escapeRegex(prefix)}` } }).toArray()
      for (const d of docs) {
        const kind = d._id.slice(d._id.lastIndexOf(':') + 1)
        if (kind === 'evicted' || kind === 'refused' || kind === 'removed') sum[kind] += d.value
      }
      return sum
    })
  }

  async #addDrops (workspaceId: string, d: Readonly<ConsumerDrops>): Promise<void> {
    const ops = (['evicted', 'refused', 'removed'] as const).filter((k) => d[k] > 0)
      .map((k) => ({ updateOne: { filter: { _id: `${DROPS_PREFIX}${text(workspaceId)}:${k}` }, update: { $inc: { value: num(d[k]) } }, upsert: true } }))
    if (ops.length > 0) await this.#ctx.c.meta.bulkWrite(ops, { ordered: false })
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
