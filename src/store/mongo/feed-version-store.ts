/**
 * Feed versions (Last-Modified, DECISIONS §5) on MongoDB: one document per feed key, which also
 * holds when its feed was last served (DECISIONS §6).
 */
import { Binary, type Collection } from 'mongodb'
import { decodePublished, encodePublished, nextFeedVersion, normalizeRecord, versionOf } from '../feed-version-record.js'
import { FAMILIES, FEED_ACTIONS, type FeedFetch, type FeedKey, type FeedRef, type FeedVersion, type FeedVersionBasis, type FeedVersionRecord, type FeedVersionStore, type PublishedRecord } from '../types.js'
import { isDuplicateKey } from './mongo-client.js'
import type { MongoContext } from './mongo-context.js'
import { num, text } from './values.js'

/** Last-Modified is an HTTP-date: whole seconds. */
const LAST_MODIFIED_STEP_MS = 1000

/** Most compare-and-set rounds of one observe: each lost round is another node's newer write. */
const CAS_ATTEMPTS = 8

export class MongoFeedVersionStore implements FeedVersionStore {
  readonly #ctx: MongoContext

  constructor (ctx: MongoContext) {
    this.#ctx = ctx
  }

  /**
   * A compare-and-set on the run read: the update matches only while the record still holds the
   * version it was computed from, and an insert of a first record collides on _id (E11000) with a
   * concurrent one; either way the record is read again and the decision made anew. So every node
   * agrees on one `since` per run of content, and a build from an older basis never replaces one
   * from a newer (feed-version-record.ts).
   */
  observe (key: FeedKey, contentHash: string, now: number, basis?: FeedVersionBasis): Promise<FeedVersion> {
    return this.#ctx.run(async () => {
      const id = feedKeyId(key)
      const workspaceId = text(key.workspaceId)
      const hash = text(contentHash)
      for (let attempt = 0; ; attempt++) {
        const seen = await this.#ctx.c.feedVersions.findOne({ _id: id, workspaceId })
        const next = nextFeedVersion(key, seen === null ? null : normalizeRecord(key, seen), hash, num(now), basis)
        if (next === null) return versionOf(seen!)
        // The run before may carry another node's clock, ahead of this one: a new run starts at
        // least a second (Last-Modified's resolution) after it, so Last-Modified never goes back
        // and If-Modified-Since never answers 304 to content that changed (issue 33).
        if (seen !== null) next.since = Math.max(next.since, seen.since + LAST_MODIFIED_STEP_MS)
        // Each lost race means another node recorded a newer state; a handful settles it.
        if (attempt === CAS_ATTEMPTS) throw new Error(`feed version ${id} kept changing under ${CAS_ATTEMPTS} attempts`)
        const fields = { contentHash: next.contentHash, since: next.since, basis: next.basis, state: next.state, history: next.history, changes: next.changes }
        if (seen === null) {
          try {
            await this.#ctx.c.feedVersions.insertOne({ _id: id, workspaceId, listId: text(key.listId), family: key.family, action: key.action, ...fields })
            return versionOf(next)
          } catch (e) {
            if (!isDuplicateKey(e)) throw e
            continue
          }
        }
        const r = await this.#ctx.c.feedVersions.updateOne({ _id: id, workspaceId, contentHash: seen.contentHash, since: seen.since }, { $set: fields })
        if (r.matchedCount === 1) return versionOf(next)
      }
    })
  }

  get (key: FeedKey): Promise<FeedVersion | null> {
    return this.#ctx.run(async () => {
      const doc = await this.#ctx.c.feedVersions.findOne({ _id: feedKeyId(key), workspaceId: text(key.workspaceId) })
      return doc === null ? null : versionOf(doc)
    })
  }

  record (key: FeedKey): Promise<FeedVersionRecord | null> {
    return this.#ctx.run(async () => {
      const doc = await this.#ctx.c.feedVersions.findOne({ _id: feedKeyId(key), workspaceId: text(key.workspaceId) })
      return doc === null ? null : normalizeRecord(key, doc)
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

  /**
   * One document per feed in `published_rules`, the encoded record as one binary field (a feed's
   * rules must stay under MongoDB's 16 MiB document limit: about 400,000 rules).
   */
  savePublished (ref: FeedRef, record: PublishedRecord | null): Promise<void> {
    return this.#ctx.run(async () => {
      const id = `${text(ref.workspaceId)}:${text(ref.listId)}`
      const workspaceId = text(ref.workspaceId)
      if (record === null) await this.#published().deleteOne({ _id: id, workspaceId })
      else await this.#published().replaceOne({ _id: id, workspaceId }, { workspaceId, data: new Binary(encodePublished(record)) }, { upsert: true })
    })
  }

  loadPublished (ref: FeedRef): Promise<PublishedRecord | null> {
    return this.#ctx.run(async () => {
      const doc = await this.#published().findOne({ _id: `${text(ref.workspaceId)}:${text(ref.listId)}`, workspaceId: text(ref.workspaceId) })
      return doc === null ? null : decodePublished(doc.data.buffer)
    })
  }

  #published (): Collection<{ _id: string, workspaceId: string, data: Binary }> {
    return this.#ctx.client.db(this.#ctx.c.feedVersions.dbName).collection('published_rules')
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

