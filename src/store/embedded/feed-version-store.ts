/** Feed versions (Last-Modified, DECISIONS §5) and feed fetch times (DECISIONS §6) on LMDB. */
import { decodePublished, encodePublished, nextFeedVersion, normalizeRecord, versionOf } from '../feed-version-record.js'
import { FAMILIES, FEED_ACTIONS, type FeedFetch, type FeedKey, type FeedRef, type FeedVersion, type FeedVersionBasis, type FeedVersionRecord as StoredVersion, type FeedVersionStore, type PublishedRecord, type ServedCopy, type ServedCopyEntry } from '../types.js'
import { feedOfPublishedKey, feedOfVersionKey, feedVersionKey, publishedRulesKey } from './key-layout.js'
import type { Databases } from './layout.js'
import type { LmdbEnv } from './lmdb-env.js'

/** A version record as kept: the record (older ones: the version alone), and when its feed was last served. */
type FeedVersionRecord = FeedVersion & Partial<StoredVersion> & { fetchedAt?: number }

/** Every version key of one feed: the builder records one per family and action. */
function versionKeys (f: FeedFetch): string[] {
  return FEED_ACTIONS.flatMap((action) => FAMILIES.map((family) => feedVersionKey({ workspaceId: f.workspaceId, listId: f.listId, family, action })))
}

/** The record at `id` when it exists and holds a fetch time older than `at`. */
function stale (dbs: Databases, id: string, at: number): FeedVersionRecord | null {
  const r: FeedVersionRecord | undefined = dbs.feedVersions.get(id)
  return r !== undefined && (r.fetchedAt ?? -Infinity) < at ? r : null
}

export class EmbeddedFeedVersionStore implements FeedVersionStore {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  async observe (key: FeedKey, contentHash: string, now: number, basis?: FeedVersionBasis): Promise<FeedVersion> {
    const id = feedVersionKey(key)
    // Almost every rebuild finds its content unchanged (or a newer build recorded): answer that
    // from a read, without taking the cross-process write lock or waiting for a flush. Only a
    // change is re-checked and written inside the transaction, which is what makes observe atomic.
    // The read is of the latest commit (readLatest): lmdb-js's cached snapshot can predate another
    // node's record, and for content that went A→B→A it still shows A's first run — a time no
    // other node serves.
    const seen: FeedVersionRecord | undefined = this.#env.readLatest((dbs) => dbs.feedVersions.get(id))
    if (seen !== undefined && nextFeedVersion(key, normalizeRecord(key, seen), contentHash, now, basis) === null) return versionOf(seen)
    return this.#env.write((dbs) => {
      const current: FeedVersionRecord | undefined = dbs.feedVersions.get(id)
      const next = nextFeedVersion(key, current === undefined ? null : normalizeRecord(key, current), contentHash, now, basis)
      if (next === null) return versionOf(current!)
      const stored: FeedVersionRecord = current?.fetchedAt === undefined ? next : { ...next, fetchedAt: current.fetchedAt }
      dbs.feedVersions.put(id, stored)
      return versionOf(next)
    })
  }

  async get (key: FeedKey): Promise<FeedVersion | null> {
    const r: FeedVersionRecord | undefined = this.#env.readLatest((dbs) => dbs.feedVersions.get(feedVersionKey(key)))
    return r === undefined ? null : versionOf(r)
  }

  async record (key: FeedKey): Promise<StoredVersion | null> {
    // Another node's newest record, not this handle's cached snapshot (supersession.ts asks).
    const r: FeedVersionRecord | undefined = this.#env.readLatest((dbs) => dbs.feedVersions.get(feedVersionKey(key)))
    return r === undefined ? null : normalizeRecord(key, r)
  }

  async recordFetches (fetches: readonly FeedFetch[]): Promise<void> {
    // As in observe: a read first, so that fetches already recorded take no write lock.
    const due = this.#env.read((dbs) => fetches.filter((f) => versionKeys(f).some((id) => stale(dbs, id, f.at) !== null)))
    if (due.length === 0) return
    await this.#env.write((dbs) => {
      for (const f of due) {
        for (const id of versionKeys(f)) {
          const r = stale(dbs, id, f.at)
          if (r === null) continue
          const next: FeedVersionRecord = { ...r, fetchedAt: f.at }
          dbs.feedVersions.put(id, next)
        }
      }
    })
  }

  async savePublished (ref: FeedRef, record: PublishedRecord | null): Promise<void> {
    const id = publishedRulesKey(ref)
    await this.#env.write((dbs) => {
      if (record === null) void dbs.publishedRules.remove(id)
      else void dbs.publishedRules.put(id, encodePublished(record))
    })
  }

  async loadPublished (ref: FeedRef): Promise<PublishedRecord | null> {
    const raw: Buffer | undefined = this.#env.readLatest((dbs) => dbs.publishedRules.get(publishedRulesKey(ref)))
    return raw === undefined ? null : decodePublished(raw)
  }

  async saveServed (ref: FeedRef, copy: ServedCopy | null): Promise<void> {
    // Same key as the published rules: one feed, one key, in both databases.
    const id = publishedRulesKey(ref)
    await this.#env.write((dbs) => {
      if (copy === null) {
        void dbs.servedCopies.remove(id)
        void dbs.servedIndex.remove(id)
        return
      }
      void dbs.servedCopies.put(id, Buffer.from(copy.bytes.buffer, copy.bytes.byteOffset, copy.bytes.byteLength))
      void dbs.servedIndex.put(id, { bytes: copy.bytes.byteLength, savedAt: copy.savedAt })
    })
  }

  async loadServed (ref: FeedRef): Promise<ServedCopy | null> {
    const id = publishedRulesKey(ref)
    return this.#env.readLatest((dbs) => {
      const raw: Buffer | undefined = dbs.servedCopies.get(id)
      const entry = dbs.servedIndex.get(id)
      return raw === undefined || entry === undefined ? null : { bytes: raw, savedAt: entry.savedAt }
    })
  }

  async listServed (): Promise<ServedCopyEntry[]> {
    return this.#env.readLatest((dbs) => {
      const out: ServedCopyEntry[] = []
      for (const { key, value } of dbs.servedIndex.getRange({})) out.push({ ...feedOfPublishedKey(key), bytes: value.bytes, savedAt: value.savedAt })
      return out
    })
  }

  async fetchedSince (since: number): Promise<FeedFetch[]> {
    return this.#env.read((dbs) => {
      const latest = new Map<string, FeedFetch>()
      for (const { key, value } of dbs.feedVersions.getRange({})) {
        const record: FeedVersionRecord = value
        const at = record.fetchedAt
        if (at === undefined || at < since) continue
        const feed = feedOfVersionKey(key)
        const id = `${feed.workspaceId}\0${feed.listId}`
        const seen = latest.get(id)
        if (seen === undefined || seen.at < at) latest.set(id, { ...feed, at })
      }
      return [...latest.values()]
    })
  }
}
