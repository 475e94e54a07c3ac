/**
 * The embedded store: LMDB in a data directory, the default backend (DECISIONS §1).
 *
 * The server keeps it open for its lifetime; the CLI opens the same directory for one command
 * and closes it. Both see each other's commits: revisions() renews the read snapshot first, so a
 * server polling it notices a key revoked from the command line at its next poll.
 */
import { statfsSync } from 'node:fs'
import { join } from 'node:path'
import type { BatchingStore, RuleBatch, RuleBatchResult } from '../batch-types.js'
import type { ConsumerThreadHandoff } from '../consumer-thread.js'
import { ThreatfeedError } from '../../errors.js'
import { TOMBSTONE_MAX, newHousekeepingCounters } from '../types.js'
import { EmbeddedFeedVersionStore } from './feed-version-store.js'
import { EmbeddedConsumerStore } from './consumer-store.js'
import { EmbeddedJournalStore } from './journal-store.js'
import { EmbeddedKeyStore } from './key-store.js'
import { EmbeddedLeaseStore } from './lease-store.js'
import { EmbeddedListStore } from './list-store.js'
import { META, STREAM_DIR } from './layout.js'
import { LmdbEnv, type LmdbEnvOptions } from './lmdb-env.js'
import { migrateFormat } from './migrate-format.js'
import type { EmbeddedRuleOp } from './packed-batch.js'
import { embeddedConsumerThread } from './consumer-handoff.js'
import { EmbeddedRuleStore } from './rule-store.js'
import { EmbeddedSignalStream } from './signal-stream.js'
import { EmbeddedWorkspaceStore } from './workspace-store.js'

export class EmbeddedStore implements BatchingStore<EmbeddedRuleOp> {
  readonly kind = 'embedded'
  readonly workspaces: EmbeddedWorkspaceStore
  readonly keys: EmbeddedKeyStore
  readonly lists: EmbeddedListStore
  readonly rules: EmbeddedRuleStore
  readonly stream: EmbeddedSignalStream
  readonly feedVersions: EmbeddedFeedVersionStore
  readonly consumers: EmbeddedConsumerStore
  readonly leases: EmbeddedLeaseStore
  readonly journal: EmbeddedJournalStore
  readonly housekeeping = newHousekeepingCounters()
  readonly consumerThread: ConsumerThreadHandoff
  readonly #env: LmdbEnv
  readonly #streamDir: string

  /** `tombstoneMax`: tombstones kept at most (RuleStore#sweepLapsed); `changesKeptMs`: see change-log.ts. */
  constructor (env: LmdbEnv, dataDir: string, tombstoneMax = TOMBSTONE_MAX, changesKeptMs?: number) {
    this.#env = env
    this.#streamDir = join(dataDir, STREAM_DIR)
    this.consumerThread = embeddedConsumerThread(dataDir, { tombstoneMax, ...(changesKeptMs === undefined ? {} : { changesKeptMs }) })
    this.workspaces = new EmbeddedWorkspaceStore(env)
    this.keys = new EmbeddedKeyStore(env)
    this.lists = new EmbeddedListStore(env)
    this.rules = new EmbeddedRuleStore(env, this.housekeeping, tombstoneMax, changesKeptMs)
    this.stream = new EmbeddedSignalStream(env, this.housekeeping)
    this.feedVersions = new EmbeddedFeedVersionStore(env)
    this.consumers = new EmbeddedConsumerStore(env)
    this.leases = new EmbeddedLeaseStore(env)
    this.journal = new EmbeddedJournalStore(env)
  }

  async revisions (): Promise<{ admin: number, rules: number }> {
    this.#env.renew()
    return this.#env.read((dbs) => ({
      admin: dbs.meta.get(META.adminRevision) ?? 0,
      rules: dbs.meta.get(META.rulesRevision) ?? 0,
    }))
  }

  async ping (): Promise<void> {
    if (this.#env.closed) throw new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: new Error('the store is closed') })
    this.#env.read((dbs) => dbs.meta.get(META.adminRevision))
    this.#env.readStream((dbs) => dbs.meta.get(META.streamHead))
  }

  streamFreeBytes (): number | null {
    try {
      const st = statfsSync(this.#streamDir)
      return st.bavail * st.bsize
    } catch {
      return null
    }
  }

  applyRuleBatch (batch: RuleBatch<EmbeddedRuleOp>): Promise<RuleBatchResult> {
    return this.rules.applyRuleBatch(batch)
  }

  close (): Promise<void> {
    return this.#env.close()
  }
}

/**
 * Opens (creating if missing) the embedded store in `dataDir`.
 *
 * @example
 *   const store = await openEmbeddedStore('./data')
 *   const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
 *   await store.close()
 */
export async function openEmbeddedStore (dataDir: string, options: LmdbEnvOptions & { tombstoneMax?: number, changesKeptMs?: number } = {}): Promise<EmbeddedStore> {
  const env = new LmdbEnv(dataDir, options)
  // An older directory is upgraded before any store reads it (migrate-format.ts).
  env.upgrade(migrateFormat)
  return new EmbeddedStore(env, dataDir, options.tombstoneMax, options.changesKeptMs)
}
