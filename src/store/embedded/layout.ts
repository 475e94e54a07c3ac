/**
 * The layout of the embedded store's environments: their named databases and the meta keys
 * shared by the modules that read and write them (lmdb-env.ts opens them; migrate-format.ts and
 * expiry-log.ts, which lmdb-env.ts must not depend on, use them too).
 */
import type { Database } from 'lmdb'
import type { AccessList, ApiKey, ExpressionRule, FeedConsumer, FeedVersion, JournalTable, Workspace } from '../types.js'

/** Expiry log key: [expiry bucket, entry number]; see expiry-log.ts. */
export type ExpiryLogKey = [number, number]

export type JournalKey = [JournalTable, string, number, string]

export interface Databases {
  readonly workspaces: Database<Workspace, string>
  readonly keys: Database<ApiKey, string>
  /** hash → key id; a hash belongs to at most one key. */
  readonly keysByHash: Database<string, string>
  readonly lists: Database<AccessList, string>
  /** workspace␟name␟id → id (names are not unique, so the id ends the key). */
  readonly listsByName: Database<string, string>
  /** Identity key (see key-layout.ts) → rule in the form of rule-codec.ts; one entry per identity by construction. */
  readonly accessRules: Database<Buffer, string>
  /**
   * The same table, read only, for the arrival index's catch-up (arrival-index.ts) over arrival
   * keys only: each entry as its arrival number → the hash of its target (rule-codec.ts
   * accessRuleTargetHash), neither key nor value copied out of LMDB's buffers.
   */
  readonly arrivalScan: Database<number, string>
  /** workspace␟change number → what changed (change-log.ts; format 6). */
  readonly accessChanges: Database<Buffer, string>
  /** workspace␟type␟value␟ruleRef → primary key, for keyed access rules only. */
  readonly accessByTarget: Database<string, string>
  readonly expressionRules: Database<ExpressionRule, string>
  /** Which rules may lapse in which expiry bucket (expiry-log.ts). */
  readonly expiryLog: Database<Buffer, ExpiryLogKey>
  /**
   * Tombstones of swept rules (tombstones.ts, format 8): in lapse order, [lapsedAt, n] → the
   * target table's partition and the tombstone key (key-layout.ts tombstoneKey); and by target
   * within partitions, [partition, tombstone key, n] → lapse time and action.
   */
  readonly tombstoneLog: Database<Buffer, [number, number]>
  readonly tombstonesByTarget: Database<Buffer, [number, string] | [number, string, number]>
  /** Where format 2 kept the stream; emptied when the directory moves to format 3
   *  (migrate-format.ts). Nothing else reads or writes it. */
  readonly legacyStream: Database<Buffer, number>
  readonly checkpoints: Database<number, string>
  readonly feedVersions: Database<FeedVersion, string>
  /** workspace␟list → what a guarded feed last published (feed-version-store.ts savePublished). */
  readonly publishedRules: Database<Buffer, string>
  /** workspace␟list → the bytes of the feed's last published version (feed-version-store.ts saveServed). */
  readonly servedCopies: Database<Buffer, string>
  /** workspace␟list → { bytes, savedAt } of its served copy: listServed without reading the bytes. */
  readonly servedIndex: Database<{ bytes: number, savedAt: number }, string>
  /** workspace␟consumer id → the consumer's record (consumer-store.ts). */
  readonly consumers: Database<FeedConsumer, string>
  /** [table, partition, at, id] → the entry's data (journal-store.ts: the admin API's diagnostics and audit log). */
  readonly journal: Database<Record<string, unknown>, JournalKey>
  /** Counters: the two revisions; also the data format (migrate-format.ts) and the expiry-log
   *  entry counter (expiry-log.ts). */
  readonly meta: Database<number, string>
}

/** The stream's own environment (see LmdbEnv). */
export interface StreamDatabases {
  /** First seq of an append → its records (stream-codec.ts). Numbers are ordered-binary keys,
   *  so a range scan walks chunks in seq order. */
  readonly chunks: Database<Buffer, number>
  /** The stream head (META.streamHead). */
  readonly meta: Database<number, string>
  /** `workspaceId NUL key` → its idempotency entry (SignalStream#appendOnce). */
  readonly idempotency: Database<IdempotencyEntry, string>
  /** [at, `workspaceId NUL key`] → null: the entries in the order they lapse, for pruning. */
  readonly idempotencyByTime: Database<null, [number, string]>
}

/** An idempotency key's entry; `note` is the caller's JSON. */
export interface IdempotencyEntry { digest: string, note: Record<string, unknown>, at: number, first: number, n: number }

/** The meta key of one workspace's rules revision (RuleStore#revisionOf). */
export function workspaceRulesRevision (workspaceId: string): string {
  return `${META.rulesRevision}:${workspaceId}`
}

/** The stream's environment, a directory inside the data directory (see LmdbEnv). */
export const STREAM_DIR = 'stream'

export const META = {
  adminRevision: 'revision:admin',
  rulesRevision: 'revision:rules',
  streamHead: 'stream:head',
  /** How many tombstones are kept (tombstones.ts), so the cap is checked without a scan. */
  tombstoneCount: 'tombstones:count',
  /** The number of the next tombstone (tombstones.ts), which picks its partition. */
  tombstoneNext: 'tombstones:next',
  /** The next arrival number of an unkeyed access rule (arrival-index.ts), which also numbers
   *  every other access-rule change (change-log.ts). */
  arrivalNext: 'arrival:next',
} as const

