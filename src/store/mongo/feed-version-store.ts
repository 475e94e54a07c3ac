/**
 * Feed versions (Last-Modified, DECISIONS §5) on MongoDB: one document per feed key, which also
 * holds when its feed was last served (DECISIONS §6).
 */
import { FAMILIES, FEED_ACTIONS, type FeedFetch, type FeedKey, type FeedVersion, type FeedVersionStore } from '../types.js'
import type { FeedVersionDoc } from './collections.js'
import { isDuplicateKey } from './mongo-client.js'
import type { MongoContext } from './mongo-context.js'
import { num, text } from './values.js'

export class MongoFeedVersionStore implements FeedVersionStore {
  readonly #ctx: MongoContext

  constructor (ctx: MongoContext) {
    this.#ctx = ctx
  }

  /**
   * One conditional upsert: it matches only a document with ANOTHER hash. With the same hash
   * stored nothing matches, the upsert's insert collides on _id (E11000) and the stored version
   * is returned unchanged — so every node agrees on one `since` per run of content.
   */
  observe (key: FeedKey, contentHash: string, now: number): Promise<FeedVersion> {
    return this.#ctx.run(async () => {
      const id = feedKeyId(key)
      const hash = text(contentHash)
      const seen = await this.#ctx.c.feedVersions.findOne({ _id: id })
      if (seen !== null && seen.contentHash === hash) return toVersion(seen)
      try {
        const doc = await this.#ctx.c.feedVersions.findOneAndUpdate(
          { _id: id, contentHash: { $ne: hash } },
          {
            $set: { contentHash: hash, since: num(now) },
            $setOnInsert: { workspaceId: text(key.workspaceId), listId: text(key.listId), family: key.family, action: key.action },
          },
          { upsert: true, returnDocument: 'after' },
        )
        if (doc !== null) return toVersion(doc)
      } catch (e) {
        if (!isDuplicateKey(e)) throw e
      }
      const stored = await this.#ctx.c.feedVersions.findOne({ _id: id })
      if (stored === null) throw new Error('feed version vanished')
      return toVersion(stored)
    })
  }

  get (key: FeedKey): Promise<FeedVersion | null> {
    return this.#ctx.run(async () => {
      const doc = await this.#ctx.c.feedVersions.findOne({ _id: feedKeyId(key) })
      return doc === null ? null : toVersion(doc)
    })
  }

  /** One unordered bulk write; by _id (the feed's family and action keys), and `$max` keeps the latest time. */
  recordFetches (fetches: readonly FeedFetch[]): Promise<void> {
    return this.#ctx.run(async () => {
      if (fetches.length === 0) return
      const ops = fetches.map((f) => ({
        updateMany: {
          filter: { _id: { $in: FEED_ACTIONS.flatMap((action) => FAMILIES.map((family) => feedKeyId({ workspaceId: f.workspaceId, listId: f.listId, family, action }))) } },
          update: { $max: { fetchedAt: num(f.at) } },
        },
      }))
      await this.#ctx.c.feedVersions.bulkWrite(ops, { ordered: false })
    })
  }

  fetchedSince (since: number): Promise<FeedFetch[]> {
    return this.#ctx.run(async () => {
      const latest = new Map<string, FeedFetch>()
      const docs = this.#ctx.c.feedVersions.find({ fetchedAt: { $gte: num(since) } }, { projection: { workspaceId: 1, listId: 1, fetchedAt: 1 } })
      for await (const d of docs) {
        const id = `${d.workspaceId}\0${d.listId}`
        const at = d.fetchedAt!
        const seen = latest.get(id)
        if (seen === undefined || seen.at < at) latest.set(id, { workspaceId: d.workspaceId, listId: d.listId, at })
      }
      return [...latest.values()]
    })
  }
}

/** Ids, list ids ('*' or a UUID), families and actions hold no ':', so the id is unambiguous. */
function feedKeyId (key: FeedKey): string {
  return `${text(key.workspaceId)}:${text(key.listId)}:${text(key.family)}:${text(key.action)}`
}

function toVersion (d: FeedVersionDoc): FeedVersion {
  return { contentHash: d.contentHash, since: d.since }
}
