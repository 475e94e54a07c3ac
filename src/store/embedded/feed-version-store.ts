/** Feed versions (Last-Modified, DECISIONS §5) on LMDB. */
import type { FeedKey, FeedVersion, FeedVersionStore } from '../types.js'
import { feedVersionKey } from './key-layout.js'
import type { LmdbEnv } from './lmdb-env.js'

export class EmbeddedFeedVersionStore implements FeedVersionStore {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  async observe (key: FeedKey, contentHash: string, now: number): Promise<FeedVersion> {
    const id = feedVersionKey(key)
    // Almost every rebuild finds its content unchanged: answer that from a read, without taking
    // the cross-process write lock or waiting for a flush. Only a change is re-checked and
    // written inside the transaction, which is what makes observe atomic.
    const seen = this.#env.read((dbs) => dbs.feedVersions.get(id))
    if (seen !== undefined && seen.contentHash === contentHash) return seen
    return this.#env.write((dbs) => {
      const current = dbs.feedVersions.get(id)
      if (current !== undefined && current.contentHash === contentHash) return current
      const next: FeedVersion = { contentHash, since: now }
      dbs.feedVersions.put(id, next)
      return next
    })
  }

  async get (key: FeedKey): Promise<FeedVersion | null> {
    return this.#env.read((dbs) => dbs.feedVersions.get(feedVersionKey(key)) ?? null)
  }
}
