/**
 * Feed versions (Last-Modified, DECISIONS §5) on MongoDB: one document per feed key, which also
 * holds when its feed was last served (DECISIONS §6).
 */
import { Binary, type ClientSession, type Collection } from 'mongodb'
import { decodePublished, encodePublished, nextFeedVersion, normalizeRecord, versionOf } from '../feed-version-record.js'
import { FAMILIES, FEED_ACTIONS, type FeedFetch, type FeedKey, type FeedRef, type FeedVersion, type FeedVersionBasis, type FeedVersionRecord, type FeedVersionStore, type PublishedRecord, type ServedCopy, type ServedCopyEntry } from '../types.js'
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
   * A feed's record in `published_rules`, encoded, in parts of at most PUBLISHED_PART_BYTES: the
   * first part in the feed's document (with how many there are), the others in `<id>#<i>`. One
   * document stopped at MongoDB's 16 MiB — about 400,000 rules (issue 33). One transaction writes
   * every part and drops the parts a smaller record no longer needs, so a reader never mixes two.
   */
  savePublished (ref: FeedRef, record: PublishedRecord | null): Promise<void> {
    return this.#ctx.write((session) => writeParts(this.#collection('published_rules'), ref, record === null ? null : encodePublished(record), {}, session))
  }

  loadPublished (ref: FeedRef): Promise<PublishedRecord | null> {
    // In a (read-only) transaction: the parts of one save, never of two.
    return this.#ctx.write(async (session) => {
      const got = await readParts(this.#collection('published_rules'), ref, session)
      return got === null ? null : decodePublished(got.bytes)
    })
  }

  /** A feed's served copy in `served_copies`, in parts as the published records (its size and time on the first part). */
  saveServed (ref: FeedRef, copy: ServedCopy | null): Promise<void> {
    return this.#ctx.write((session) => writeParts(this.#collection('served_copies'), ref, copy === null ? null : copy.bytes, copy === null ? {} : { listId: text(ref.listId), bytes: copy.bytes.byteLength, savedAt: num(copy.savedAt) }, session))
  }

  loadServed (ref: FeedRef): Promise<ServedCopy | null> {
    return this.#ctx.write(async (session) => {
      const got = await readParts(this.#collection('served_copies'), ref, session)
      return got === null ? null : { bytes: got.bytes, savedAt: got.first.savedAt ?? 0 }
    })
  }

  listServed (): Promise<ServedCopyEntry[]> {
    return this.#ctx.run(async () => {
      // First parts only: they alone carry `parts`.
      const docs = await this.#collection('served_copies').find({ parts: { $exists: true } }, { projection: { workspaceId: 1, listId: 1, bytes: 1, savedAt: 1 } }).toArray()
      return docs.map((d) => ({ workspaceId: d.workspaceId, listId: d.listId ?? '', bytes: d.bytes ?? 0, savedAt: d.savedAt ?? 0 }))
    })
  }

  #collection (name: 'published_rules' | 'served_copies'): Collection<PartDoc> {
    return this.#ctx.client.db(this.#ctx.c.feedVersions.dbName).collection(name)
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

/** A part of a record kept in parts: the first carries how many there are (and, for served copies, size and time). */
interface PartDoc { _id: string, workspaceId: string, data: Binary, parts?: number, listId?: string, bytes?: number, savedAt?: number }

/**
 * Writes `bytes` as the parts of the feed's record (null: removes them all), inside the caller's
 * transaction, and drops the parts a smaller record no longer needs.
 */
async function writeParts (c: Collection<PartDoc>, ref: FeedRef, bytes: Uint8Array | null, head: Partial<PartDoc>, session: ClientSession): Promise<void> {
  const id = publishedId(ref)
  const workspaceId = text(ref.workspaceId)
  const parts = bytes === null ? 0 : Math.max(1, Math.ceil(bytes.length / PUBLISHED_PART_BYTES))
  const before = (await c.findOne({ _id: id, workspaceId }, { session, projection: { parts: 1 } }))?.parts ?? 1
  for (let i = 0; i < parts; i++) {
    const data = new Binary(bytes!.subarray(i * PUBLISHED_PART_BYTES, (i + 1) * PUBLISHED_PART_BYTES))
    const doc = i === 0 ? { workspaceId, data, parts, ...head } : { workspaceId, data }
    await c.replaceOne({ _id: partId(id, i), workspaceId }, doc, { session, upsert: true })
  }
  const gone = Array.from({ length: Math.max(0, before - parts) }, (_, k) => partId(id, parts + k))
  if (gone.length > 0) await c.deleteMany({ _id: { $in: gone }, workspaceId }, { session })
}

/** The parts of the feed's record, joined, with its first document; null when there is none. */
async function readParts (c: Collection<PartDoc>, ref: FeedRef, session: ClientSession): Promise<{ first: PartDoc, bytes: Buffer } | null> {
  const id = publishedId(ref)
  const workspaceId = text(ref.workspaceId)
  const first = await c.findOne({ _id: id, workspaceId }, { session })
  if (first === null) return null
  const parts = first.parts ?? 1
  if (parts === 1) return { first, bytes: Buffer.from(first.data.buffer) }
  const rest = await c.find({ _id: { $in: Array.from({ length: parts - 1 }, (_, k) => partId(id, k + 1)) }, workspaceId }, { session }).toArray()
  const byId = new Map(rest.map((d) => [d._id, d.data.buffer]))
  const chunks = [first.data.buffer, ...Array.from({ length: parts - 1 }, (_, k) => byId.get(partId(id, k + 1)))]
  if (chunks.some((b) => b === undefined)) throw new Error(`record ${id}: a part is missing`)
  return { first, bytes: Buffer.concat(chunks as Uint8Array[]) }
}

/** Bytes of a published record per document: half of MongoDB's 16 MiB, leaving room for the rest. */
export const PUBLISHED_PART_BYTES = 8 * 1024 * 1024

function publishedId (ref: FeedRef): string {
  return `${text(ref.workspaceId)}:${text(ref.listId)}`
}

/** The first part keeps the feed's own id (the layout before parts); the others `#<i>`. */
function partId (id: string, i: number): string {
  return i === 0 ? id : `${id}#${i}`
}

/** Ids, list ids ('*' or a UUID), families and actions hold no ':', so the id is unambiguous. */
function feedKeyId (key: FeedKey): string {
  return `${text(key.workspaceId)}:${text(key.listId)}:${text(key.family)}:${text(key.action)}`
}

