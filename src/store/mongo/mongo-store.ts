/**
 * The MongoDB store (THREATFEED_STORE=mongodb): several server processes may share it.
 *
 * It needs a replica set — a single-node one will do — because the stream's ordering and every
 * change-plus-revision pair rely on multi-document transactions; a standalone server is refused
 * at start with a configuration error rather than failing every write later.
 */
import type { Document } from 'mongodb'
import type { BatchingStore, RuleBatch, RuleBatchResult } from '../batch-types.js'
import { ThreatfeedError } from '../../errors.js'
import { TOMBSTONE_MAX, newHousekeepingCounters } from '../types.js'
import { COUNTERS, collectionsOf, prepareCollections } from './collections.js'
import { createClient, resolveDbName, toStoreError } from './mongo-client.js'
import { MongoContext } from './mongo-context.js'
import { MongoFeedVersionStore } from './feed-version-store.js'
import { MongoConsumerStore } from './consumer-store.js'
import { MongoJournalStore } from './journal-store.js'
import { MongoKeyStore } from './key-store.js'
import { MongoLeaseStore } from './lease-store.js'
import { MongoListStore } from './list-store.js'
import { MongoRuleStore } from './rule-store.js'
import { MongoSignalStream } from './signal-stream.js'
import { MongoWorkspaceStore } from './workspace-store.js'

const REVISION_IDS = [COUNTERS.adminRevision, COUNTERS.rulesRevision]

export class MongoStore implements BatchingStore {
  readonly kind = 'mongodb'
  readonly workspaces: MongoWorkspaceStore
  readonly keys: MongoKeyStore
  readonly lists: MongoListStore
  readonly rules: MongoRuleStore
  readonly stream: MongoSignalStream
  readonly feedVersions: MongoFeedVersionStore
  readonly consumers: MongoConsumerStore
  readonly leases: MongoLeaseStore
  readonly journal: MongoJournalStore
  readonly housekeeping = newHousekeepingCounters()
  readonly #ctx: MongoContext

  /** `tombstoneMax`: tombstones kept at most (RuleStore#sweepLapsed). */
  constructor (ctx: MongoContext, tombstoneMax = TOMBSTONE_MAX) {
    this.#ctx = ctx
    this.workspaces = new MongoWorkspaceStore(ctx)
    this.keys = new MongoKeyStore(ctx)
    this.lists = new MongoListStore(ctx)
    this.rules = new MongoRuleStore(ctx, this.housekeeping, tombstoneMax)
    this.stream = new MongoSignalStream(ctx, this.housekeeping)
    this.feedVersions = new MongoFeedVersionStore(ctx)
    this.consumers = new MongoConsumerStore(ctx)
    this.leases = new MongoLeaseStore(ctx)
    this.journal = new MongoJournalStore(ctx)
  }

  /** One round trip for both counters: the server polls this every ~250 ms. */
  revisions (): Promise<{ admin: number, rules: number }> {
    return this.#ctx.run(async () => {
      const docs = await this.#ctx.c.meta.find({ _id: { $in: REVISION_IDS } }).toArray()
      const value = (id: string): number => docs.find((d) => d._id === id)?.value ?? 0
      return { admin: value(COUNTERS.adminRevision), rules: value(COUNTERS.rulesRevision) }
    })
  }

  ping (): Promise<void> {
    return this.#ctx.run(async () => {
      await this.#ctx.client.db('admin').command({ ping: 1 })
    })
  }

  /** From `hello`'s localTime, against the midpoint of its round trip (clock-skew.ts). */
  clockSkew (): Promise<number> {
    return this.#ctx.run(async () => {
      const sent = Date.now()
      const hello = await this.#ctx.client.db('admin').command({ hello: 1 })
      const received = Date.now()
      if (!(hello.localTime instanceof Date)) throw new Error('the server did not say its time')
      return hello.localTime.getTime() - (sent + received) / 2
    })
  }

  applyRuleBatch (batch: RuleBatch): Promise<RuleBatchResult> {
    return this.rules.applyRuleBatch(batch)
  }

  close (): Promise<void> {
    return this.#ctx.close()
  }
}

/**
 * Connects, checks that the server can run transactions, and creates indexes and counters.
 * Rejects with TF_ERR_STORE_UNAVAILABLE when no server answers within the selection timeout.
 *
 * @example
 *   const store = await openMongoStore('mongodb://db1,db2,db3/?replicaSet=rs0', { dbName: 'threatfeed' })
 */
export interface OpenMongoOptions {
  dbName?: string
  tombstoneMax?: number
  /**
   * Keep trying the first connection this long (default 0: one attempt). A server starting with
   * its database (docker compose) waits for it instead of exiting; the CLI fails at once.
   */
  connectRetryMs?: number
  /** Hears each failed attempt that will be retried (the server logs a line per attempt). */
  onConnectRetry?: (attempt: number, error: unknown) => void
  /** Hears each index whose definition differs from this version's (collections.ts ensureIndexes): the node starts anyway. */
  onIndexProblem?: (message: string) => void
}

/**
 * What the server's `hello` must say at start: a replica set (or mongos), and with
 * directConnection=true a writable primary — on a secondary every write fails, and a direct
 * connection never follows a failover to another member.
 */
export function checkHello (hello: Document, directConnection: boolean): void {
  if (typeof hello.setName !== 'string' && hello.msg !== 'isdbgrid') {
    throw new ThreatfeedError('TF_ERR_CONFIG', ['MongoDB must be a replica set (a single-node one will do): the store needs transactions'])
  }
  if (directConnection && hello.isWritablePrimary !== true) {
    // The URI is not quoted: it may hold credentials.
    const role = hello.secondary === true ? 'a secondary' : hello.arbiterOnly === true ? 'an arbiter' : 'not writable'
    throw new ThreatfeedError('TF_ERR_CONFIG', [`THREATFEED_MONGODB_URI has directConnection=true and its member is not the primary (${role}): name every member and the set (mongodb://db1,db2,db3/?replicaSet=rs0) without directConnection`])
  }
}

/** Between two attempts at the first connection (each fails within the 1.5 s server selection). */
const CONNECT_RETRY_PAUSE_MS = 1000

export async function openMongoStore (uri: string, opts: OpenMongoOptions = {}): Promise<MongoStore> {
  const giveUpAt = Date.now() + (opts.connectRetryMs ?? 0)
  for (let attempt = 1; ; attempt++) {
    try {
      return await connectOnce(uri, opts)
    } catch (e) {
      if (Date.now() + CONNECT_RETRY_PAUSE_MS >= giveUpAt) throw e
      opts.onConnectRetry?.(attempt, e)
      await new Promise((resolve) => setTimeout(resolve, CONNECT_RETRY_PAUSE_MS))
    }
  }
}

async function connectOnce (uri: string, opts: OpenMongoOptions): Promise<MongoStore> {
  const client = createClient(uri)
  try {
    await client.connect()
    checkHello(await client.db('admin').command({ hello: 1 }), client.options.directConnection)
    const db = client.db(resolveDbName(uri, opts.dbName))
    const collections = collectionsOf(db)
    for (const problem of await prepareCollections(db, collections)) opts.onIndexProblem?.(problem)
    return new MongoStore(new MongoContext(client, collections), opts.tombstoneMax)
  } catch (e) {
    await client.close().catch(() => undefined)
    throw toStoreError(e)
  }
}
