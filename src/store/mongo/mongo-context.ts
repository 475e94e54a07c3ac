/** What every MongoDB sub-store shares: the client, the collections, and the two ways in. */
import type { ClientSession, MongoClient } from 'mongodb'
import { ThreatfeedError } from '../../errors.js'
import type { Collections } from './collections.js'
import { runTransaction, toStoreError, type CommitLookup } from './mongo-client.js'

export class MongoContext {
  readonly client: MongoClient
  readonly c: Collections
  #closed = false

  constructor (client: MongoClient, collections: Collections) {
    this.client = client
    this.c = collections
  }

  /** Runs driver calls; any failure of theirs becomes TF_ERR_STORE_UNAVAILABLE. */
  async run<T> (fn: () => Promise<T>): Promise<T> {
    if (this.#closed) throw closedError()
    try {
      return await fn()
    } catch (e) {
      throw toStoreError(e)
    }
  }

  /** Runs `fn` in a durable transaction (see runTransaction for what is retried, `giveUp` and `lookup`). */
  write<T> (fn: (session: ClientSession) => Promise<T>, giveUp?: () => boolean, lookup?: CommitLookup<T>): Promise<T> {
    return this.run(() => runTransaction(this.client, fn, undefined, undefined, giveUp, lookup))
  }

  /** Inside a transaction: raises a counter. The counters exist from start-up, so no upsert. */
  async bump (id: string, session: ClientSession, by = 1): Promise<void> {
    await this.c.meta.updateOne({ _id: id }, { $inc: { value: by } }, { session })
  }

  get closed (): boolean {
    return this.#closed
  }

  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await this.client.close().catch(() => undefined)
  }
}

function closedError (): ThreatfeedError {
  return new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: new Error('the store is closed') })
}
