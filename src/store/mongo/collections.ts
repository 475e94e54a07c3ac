/**
 * Collections of the MongoDB store, their document shapes and their indexes.
 *
 * Caller-defined maps (rule labels, list selectors) are stored as arrays of {k, v} pairs and
 * expression-rule `config` as JSON text: a key such as `$where` or `a.b` is then plain data in
 * a field value, never a field name the server could read as an operator or a path.
 *
 * Identity (DECISIONS §3) is one unique index per rule collection. An access rule's `identity`
 * is `r:<ruleRef>` or `t:<type>:<value>`, so {workspaceId, identity} unique covers both the
 * keyed and the unkeyed identity without partial indexes, and serves the upsert filter.
 */
import { MongoServerError, type Collection, type Db, type Document, type IndexDescription } from 'mongodb'
import type {
  BouncerSetting, Confidence, FeedAction, JournalTable, Family, FeedVersion, FeedVersionBasis, FeedVersionState, GuardSettings, LabelValue, ListDefaults, PublishState, RuleKind, Scope, Severity, Subscription, Target,
} from '../types.js'
import { isDuplicateKey } from './mongo-client.js'

export interface Pair<V> { k: string, v: V }

/** childWrites: raised by every key or list creation, so that it conflicts with a delete (key-store.ts requireLiveWorkspace). */
export interface WorkspaceDoc { _id: string, name: string, subscription: Subscription, createdAt: number, deletedAt: number | null, childWrites?: number, feedGuards?: GuardSettings }
export interface KeyDoc { _id: string, workspaceId: string, hash: string, scopes: Scope[], createdAt: number, revokedAt: number | null, bouncer?: BouncerSetting }
export interface ListDoc {
  _id: string
  workspaceId: string
  name: string
  description: string
  defaults: ListDefaults
  selector: Array<Pair<string>>
  createdAt: number
  updatedAt: number
  publishState?: PublishState
}

interface RuleDocCommon {
  _id: string
  workspaceId: string
  labels: Array<Pair<LabelValue>>
  reason: string | null
  expiresAt: number | null
  createdAt: number
  updatedAt: number
  seq: number
}

export interface AccessRuleDoc extends RuleDocCommon {
  identity: string
  /** `<type>:<value>`: what delete-by-target matches on. */
  targetKey: string
  ruleRef: string | null
  target: Target
  action: 'block' | 'allow'
  name: string | null
  confidence: Confidence | null
  severity: Severity | null
}

export interface ExpressionRuleDoc extends RuleDocCommon {
  kind: 'waf_rule' | 'smart_firewall_rule'
  ruleRef: string
  name: string
  type: 'custom' | 'generated'
  expression: string
  action: string
  order: number | null
  shortDescription: string | null
  /** JSON text of the rule's free-form config. */
  config: string
}

/**
 * One append (signal-stream.ts): `_id` is its first seq — unique by construction, and the order
 * of a range scan — and `n` its number of records, seqs `_id` … `_id + n - 1`. It holds a whole
 * v1 batch's `body` as accepted, or its `records`. `acceptedAt` is the latest of its records'.
 * A document without `n` holds one record in `payload` (the layout before batches), and is read
 * as such. `batchId` names the ingest batch of the append, when it had one.
 */
export interface StreamDoc {
  _id: number
  n?: number
  workspaceId: string
  acceptedAt: number
  body?: string
  records?: StreamDocRecord[]
  payload?: string
  schemaVersion?: number
  /** The ingest batch that appended it (types.ts StreamRecord#batchId); on each document of the append. */
  batchId?: string
  /**
   * The append's id, on each of its documents: what resolves a commit of unknown outcome. The
   * batch's id when it has one.
   */
  appendId?: string
}
export interface StreamDocRecord { workspaceId: string, schemaVersion?: number, payload: string, acceptedAt: number }
/**
 * An idempotency key's entry (SignalStream#appendOnce): `_id` {w: workspace, k: key}, always
 * built in that field order. `note` is the caller's JSON text; `expireAt` drives a TTL index.
 */
export interface IdempotencyDoc { _id: { w: string, k: string }, digest: string, note: string, at: number, first: number, n: number, expireAt: Date }
export interface CheckpointDoc { _id: string, seq: number }
/**
 * One feed key's version record (types.ts FeedVersionRecord). Shard key, when sharded:
 * `{ workspaceId: 1, _id: 1 }` — every single-record filter names both.
 */
export interface FeedVersionDoc {
  _id: string
  workspaceId: string
  listId: string
  family: Family
  action: FeedAction
  contentHash: string
  since: number
  basis?: FeedVersionBasis | null
  state?: FeedVersionState
  history?: FeedVersion[]
  changes?: Array<[number, number]>
  /** When the feed was last served (FeedVersionStore#recordFetches); absent until then. */
  fetchedAt?: number
}
export interface CounterDoc { _id: string, value: number }
/** A lease (types.ts LeaseStore); expiresAt is the server's clock ($$NOW), so node clocks never matter. */
export interface LeaseDoc { _id: string, owner: string, expiresAt: Date }
/** A swept rule (types.ts LapsedTombstone); _id is its identity, so a later lapse replaces it. */
export interface TombstoneDoc {
  _id: string
  workspaceId: string
  kind: RuleKind
  /** `<type>:<value>` of an access rule, null for an expression rule. */
  targetKey: string | null
  target: Target | null
  ruleRef: string | null
  lapsedAt: number
  /** The access rule's action (absent on expression rules and older tombstones). */
  action?: 'block' | 'allow'
}

/** An entry of the admin API's journal (types.ts JournalEntry); _id is table␟partition␟at␟id. */
export interface JournalDoc {
  _id: string
  table: JournalTable
  partition: string
  at: number
  id: string
  data: Record<string, unknown>
}

/** A feed consumer (types.ts FeedConsumer); _id is its id. Fields written by consumer-store.ts. */
export interface ConsumerDoc {
  _id: string
  workspaceId: string
  keyId: string
  address: string
  userAgent: string
  client: string
  listId: string
  variant: string
  family: Family
  action: FeedAction
  polls: number
  ok: number
  notModified: number
  clientErrors: number
  serverErrors: number
  firstSeen: number
  lastSeen: number
  last: { at: number, status: number }
  last200At?: number
  held?: { at: number, etag: string, since: number } | null
  recentFails?: number[]
  intervals?: Record<string, number>
}

export const COUNTERS = {
  adminRevision: 'revision:admin',
  rulesRevision: 'revision:rules',
  streamHead: 'stream:head',
} as const

export interface Collections {
  readonly workspaces: Collection<WorkspaceDoc>
  readonly keys: Collection<KeyDoc>
  readonly lists: Collection<ListDoc>
  readonly accessRules: Collection<AccessRuleDoc>
  readonly expressionRules: Collection<ExpressionRuleDoc>
  readonly stream: Collection<StreamDoc>
  readonly checkpoints: Collection<CheckpointDoc>
  readonly feedVersions: Collection<FeedVersionDoc>
  readonly meta: Collection<CounterDoc>
  readonly tombstones: Collection<TombstoneDoc>
  readonly consumers: Collection<ConsumerDoc>
  readonly leases: Collection<LeaseDoc>
  readonly journal: Collection<JournalDoc>
  readonly idempotency: Collection<IdempotencyDoc>
}

export function collectionsOf (db: Db): Collections {
  return {
    workspaces: db.collection('workspaces'),
    keys: db.collection('keys'),
    lists: db.collection('lists'),
    accessRules: db.collection('access_rules'),
    expressionRules: db.collection('expression_rules'),
    stream: db.collection('stream'),
    checkpoints: db.collection('checkpoints'),
    feedVersions: db.collection('feed_versions'),
    meta: db.collection('meta'),
    tombstones: db.collection('lapsed_rules'),
    consumers: db.collection('feed_consumers'),
    leases: db.collection('leases'),
    journal: db.collection('admin_journal'),
    idempotency: db.collection('idempotency_keys'),
  }
}

export const INDEXES: Array<[keyof Collections, IndexDescription[]]> = [
  // Sparse: appends written before append ids were kept have none.
  ['stream', [{ key: { appendId: 1 }, name: 'append_id', sparse: true }]],
  // The server drops an entry once its window has passed (checked every minute; reads check `at`).
  ['idempotency', [{ key: { expireAt: 1 }, name: 'expire_ttl', expireAfterSeconds: 0 }]],
  ['keys', [
    { key: { hash: 1 }, name: 'hash_unique', unique: true },
    { key: { workspaceId: 1 }, name: 'workspace' },
  ]],
  ['lists', [{ key: { workspaceId: 1, name: 1 }, name: 'workspace_name' }]],
  ['accessRules', [
    { key: { workspaceId: 1, identity: 1 }, name: 'identity_unique', unique: true },
    { key: { workspaceId: 1, targetKey: 1 }, name: 'workspace_target' },
    { key: { expiresAt: 1 }, name: 'expiry' },
    // A rebuild reads the rules changed since the last (RuleStore#accessRulesChangedSince).
    { key: { workspaceId: 1, seq: 1 }, name: 'workspace_seq' },
    // …and counts the workspace's live rules: from the index alone, not a scan of the workspace.
    { key: { workspaceId: 1, expiresAt: 1 }, name: 'workspace_expiry' },
  ]],
  // FeedVersionStore#fetchedSince at start-up; sparse: a feed never served has no fetchedAt.
  ['feedVersions', [{ key: { fetchedAt: 1 }, name: 'fetched_at', sparse: true }]],
  ['expressionRules', [
    { key: { workspaceId: 1, kind: 1, ruleRef: 1 }, name: 'identity_unique', unique: true },
    { key: { expiresAt: 1 }, name: 'expiry' },
  ]],
  ['tombstones', [
    { key: { workspaceId: 1, targetKey: 1 }, name: 'workspace_target' },
    { key: { lapsedAt: 1 }, name: 'lapse' },
  ]],
  ['consumers', [
    { key: { workspaceId: 1 }, name: 'workspace' },
    // ConsumerStore#forget
    { key: { lastSeen: 1 }, name: 'last_seen' },
  ]],
  // JournalStore#page reads a partition newest first; the sweep by table and age.
  ['journal', [
    { key: { table: 1, partition: 1, at: -1, id: -1 }, name: 'partition_time' },
    { key: { table: 1, at: 1 }, name: 'table_time' },
  ]],
]

const NAMESPACE_EXISTS = 48

/**
 * Creates the collections, the indexes (no-ops when they exist) and the counters up front, so
 * that no transaction ever creates one implicitly — two transactions doing that at once
 * conflict, and explicit creation inside a transaction is restricted.
 */
export async function prepareCollections (db: Db, c: Collections): Promise<void> {
  const existing = new Set((await db.listCollections({}, { nameOnly: true }).toArray()).map((x) => x.name))
  for (const collection of Object.values(c) as Array<Collection<Document>>) {
    if (existing.has(collection.collectionName)) continue
    try {
      await db.createCollection(collection.collectionName)
    } catch (e) {
      // Another process starting at the same time created it first.
      if (!(e instanceof MongoServerError && e.code === NAMESPACE_EXISTS)) throw e
    }
  }
  for (const [name, indexes] of INDEXES) await c[name].createIndexes(indexes)
  for (const id of Object.values(COUNTERS)) {
    try {
      await c.meta.updateOne({ _id: id }, { $setOnInsert: { value: 0 } }, { upsert: true })
    } catch (e) {
      // Two processes starting at once: the other one created it.
      if (!isDuplicateKey(e)) throw e
    }
  }
}
