/**
 * The store contract. Two backends implement it: `embedded/` (LMDB, the default) and `mongo/`
 * (the official driver). One conformance suite (test/store/contract.ts) runs against both.
 *
 * Conventions:
 * - Times are milliseconds since the epoch (numbers), `null` where absent.
 * - Ids of workspaces, keys, lists and rules are UUIDs (crypto.randomUUID()).
 * - Every write that resolves is durable: LMDB answers after the write is flushed to disk;
 *   MongoDB writes with `w: "majority", j: true`.
 * - A failing dependency rejects with ThreatfeedError('TF_ERR_STORE_UNAVAILABLE'), never a
 *   caller error, so HTTP answers 500 and clients retry.
 */
import type { CommitGate } from './commit-gate.js'

/**
 * `rules:read` sees rule metadata (GET /v1/threat/explain), which a fleet's shared feed key must not.
 * `admin` manages its own workspace through /v1/admin/; `admin:all` every workspace (issue 22).
 */
export const SCOPES = ['signals:write', 'feeds:read', 'rules:read', 'admin', 'admin:all'] as const
export type Scope = (typeof SCOPES)[number]

export const SUBSCRIPTIONS = ['active', 'inactive'] as const
export type Subscription = (typeof SUBSCRIPTIONS)[number]

export const RULE_KINDS = ['access_rule', 'waf_rule', 'smart_firewall_rule'] as const
export type RuleKind = (typeof RULE_KINDS)[number]

export const CONFIDENCES = ['low', 'medium', 'high'] as const
export type Confidence = (typeof CONFIDENCES)[number]
export const SEVERITIES = ['low', 'medium', 'high', 'critical'] as const
export type Severity = (typeof SEVERITIES)[number]

export const FORMATS = ['plain', 'dialect_a', 'dialect_b', 'nftables'] as const
export type FeedFormat = (typeof FORMATS)[number]
export const FAMILIES = ['v4', 'v6', 'both'] as const
export type Family = (typeof FAMILIES)[number]
export const FEED_ACTIONS = ['block', 'allow'] as const
export type FeedAction = (typeof FEED_ACTIONS)[number]

export interface Workspace {
  id: string
  name: string
  subscription: Subscription
  createdAt: number
  /** Set when the workspace is deleted; its keys then answer 401. */
  deletedAt: number | null
  /** Publish guards of the workspace feed (/v1/threat/feeds); none when absent. */
  feedGuards?: GuardSettings
}

export interface ApiKey {
  id: string
  workspaceId: string
  /** SHA-256 of the key, lowercase hex. The key itself is never stored. */
  hash: string
  scopes: Scope[]
  createdAt: number
  revokedAt: number | null
  /**
   * What the CrowdSec bouncers using this key receive (docs/bouncers.md): a list's networks of
   * one action; absent: the workspace feed's block networks.
   */
  bouncer?: BouncerSetting
}

/** The set a key's CrowdSec bouncers receive: the networks of `action` of a list (null: the workspace feed). */
export interface BouncerSetting {
  listId: string | null
  action: FeedAction
}

export interface ListDefaults {
  format?: FeedFormat
  family?: Family
  action?: FeedAction
  maxEntries?: number
  confidence?: Confidence
  severity?: Severity
  /** Shard count N (1..64) a request with `shard=I` and no `of` uses (README "Shards"). */
  shards?: number
  /** Publish guards (src/feed/guards.ts, README "Publish guards"); none when absent. */
  guards?: GuardSettings
}

/** Publish guards of a feed; every guard is off unless set. */
export interface GuardSettings {
  minEntries?: number
  maxShrinkPct?: number
  maxGrowPct?: number
  rejectSpecial?: boolean
  minPrefixV4?: number
  minPrefixV6?: number
  /** What a `rejectSpecial` trip does: hold the build (default) or leave the special networks out. */
  mode?: 'hold' | 'drop'
  /** Digest of a held build an operator accepted (`threatfeed list accept`): published as it is. */
  accepted?: string
}

/** What a feed's guards did last, recorded by the server for `list show` and `list accept`. */
export interface PublishState {
  held: {
    /** Digest of the held build: what `list accept` names. */
    digest: string
    /** The guard tripped, per held action. */
    guards: Partial<Record<FeedAction, string>>
    /** When this build was first held (ms). */
    since: number
    /** The held build against the published one, per action: counts and a sample of networks. */
    diff: Record<FeedAction, { published: number, held: number, added: number, removed: number, addedSample: string[], removedSample: string[] }>
  } | null
  /** Digest of the build published last (null before the first). */
  publishedDigest: string | null
}

export interface AccessList {
  id: string
  workspaceId: string
  name: string
  description: string
  defaults: ListDefaults
  /** Label selector: a rule is selected when its labels hold every key=value (DECISIONS §4). */
  selector: Record<string, string>
  createdAt: number
  updatedAt: number
  /** Set by the server when guards judged a build (src/feed/guards.ts); absent until then. */
  publishState?: PublishState
}

export type TargetType = 'ip' | 'asn' | 'country'

/** A normalized target: ip is a canonical CIDR ("10.0.0.0/8", "2001:db8::/32", "1.2.3.4/32"),
 *  asn is "AS<digits>", country is an uppercase ISO 3166-1 alpha-2 code. */
export interface Target {
  type: TargetType
  value: string
}

export type LabelValue = string | number | boolean

interface RuleCommon {
  id: string
  workspaceId: string
  /** Caller-stable identifier (v2), or null for rules identified by target (v1, v2 without rule_ref). */
  ruleRef: string | null
  labels: Record<string, LabelValue>
  reason: string | null
  /** Lapses at this instant; null = never. Feeds filter on it at query time. */
  expiresAt: number | null
  createdAt: number
  updatedAt: number
  /** Stream sequence number of the signal that last wrote this rule (idempotent re-application). */
  seq: number
}

export interface AccessRule extends RuleCommon {
  kind: 'access_rule'
  target: Target
  action: 'block' | 'allow'
  name: string | null
  confidence: Confidence | null
  severity: Severity | null
}

export interface ExpressionRule extends RuleCommon {
  kind: 'waf_rule' | 'smart_firewall_rule'
  ruleRef: string
  name: string
  type: 'custom' | 'generated'
  expression: string
  action: string
  order: number | null
  shortDescription: string | null
  /** Free-form settings; `phase` (waf_rule only) is carried here (SPEC 2.4). */
  config: Record<string, unknown>
}

export type Rule = AccessRule | ExpressionRule

/** Fields of a rule the writer supplies; the store assigns id, createdAt and keeps them on update. */
export type AccessRuleInput = Omit<AccessRule, 'id' | 'createdAt' | 'updatedAt'>
export type ExpressionRuleInput = Omit<ExpressionRule, 'id' | 'createdAt' | 'updatedAt'>

export interface WorkspaceStore {
  create (input: { name: string, subscription: Subscription }): Promise<Workspace>
  get (id: string): Promise<Workspace | null>
  /** `feedGuards` null removes them. */
  update (id: string, patch: { name?: string, subscription?: Subscription, feedGuards?: GuardSettings | null }): Promise<Workspace | null>
  /** Marks deleted; returns false when there was no such live workspace. */
  delete (id: string): Promise<boolean>
  list (): Promise<Workspace[]>
}

export interface KeyStore {
  create (input: { workspaceId: string, hash: string, scopes: Scope[] }): Promise<ApiKey>
  getByHash (hash: string): Promise<ApiKey | null>
  get (id: string): Promise<ApiKey | null>
  revoke (id: string): Promise<boolean>
  list (workspaceId?: string): Promise<ApiKey[]>
  /**
   * Sets (null: clears) the set the key's CrowdSec bouncers receive; the admin revision moves.
   * The key with its new setting; null when there is no such key or it is revoked.
   */
  setBouncer (id: string, setting: BouncerSetting | null): Promise<ApiKey | null>
}

export interface ListStore {
  create (input: Omit<AccessList, 'id' | 'createdAt' | 'updatedAt'>): Promise<AccessList>
  get (id: string): Promise<AccessList | null>
  update (id: string, patch: Partial<Omit<AccessList, 'id' | 'workspaceId' | 'createdAt' | 'updatedAt'>>): Promise<AccessList | null>
  delete (id: string): Promise<boolean>
  list (workspaceId?: string): Promise<AccessList[]>
  /** Lists of one workspace whose name equals `name` exactly (names need not be unique). */
  findByName (workspaceId: string, name: string): Promise<AccessList[]>
  /**
   * Records what a list's guards did. Neither updatedAt nor the admin revision moves: it is the
   * server's report, not a change of the list. False when there is no such list.
   */
  setPublishState (id: string, state: PublishState): Promise<boolean>
}

export interface RuleStore {
  /**
   * Insert or update in place. Identity (DECISIONS §3): with ruleRef → (workspace, kind, ruleRef);
   * an access rule without ruleRef → (workspace, target). Never creates a duplicate; enforced by
   * unique indexes on MongoDB and by key layout on LMDB. Returns the stored rule.
   */
  upsertAccessRule (input: AccessRuleInput): Promise<AccessRule>
  upsertExpressionRule (input: ExpressionRuleInput): Promise<ExpressionRule>
  /** Removes the rule of that (workspace, kind, ruleRef); false when none existed. */
  deleteByRef (workspaceId: string, kind: RuleKind, ruleRef: string): Promise<boolean>
  /** Removes every access rule of the workspace with that target, keyed or not; returns how many. */
  deleteAccessByTarget (workspaceId: string, target: Target): Promise<number>
  /** Rules of one workspace and kind; when `now` is given, lapsed rules (expiresAt <= now) are left out. */
  list (workspaceId: string, kind: RuleKind, now?: number): Promise<Rule[]>
  /** Every non-lapsed access rule of one workspace (snapshot building). */
  listAccessRules (workspaceId: string, now: number): Promise<AccessRule[]>
  /** Deletes rules that lapsed before `before`, leaving a tombstone each; returns how many. */
  purgeLapsed (before: number): Promise<number>
  /**
   * One bounded pass of the background sweep: removes at most about `limit` rules that lapsed
   * before `now` rounded down to SWEEP_GRAIN_MS (sweepCut), each leaving a LapsedTombstone, and
   * drops tombstones that lapsed more than TOMBSTONE_MS before `now` and, oldest lapse first, those
   * beyond the store's tombstone cap (TOMBSTONE_MAX unless opened with another). Safe to run from several
   * processes at once: a rule is removed — and counted — by one of them, and a rule whose expiry
   * moved since it was found is left alone. Raises the revision of each workspace it changed;
   * feeds do not change, since a lapsed rule was not served. `more` says another pass has work.
   */
  sweepLapsed (now: number, limit: number): Promise<SweepPass>
  /** Tombstones of swept rules still kept: the access rules of one target (keyed or not), or
   *  the expression rule of one (kind, ruleRef). Most recent lapse first. */
  lapsedTombstones (workspaceId: string, of: Target | { kind: ExpressionRule['kind'], ruleRef: string }): Promise<LapsedTombstone[]>
  /** Every access rule of the workspace whose target is one of `targets` (keyed or not), lapsed
   *  or not, through the stores' target index: what explaining one address reads. */
  accessRulesOfTargets (workspaceId: string, targets: readonly Target[]): Promise<AccessRule[]>
  /**
   * A counter that rises with every write that changes a rule of this workspace (0 when none
   * ever did), in the same transaction as the write. The feed side refetches a workspace's rules
   * only when its own counter moved, not on every change in any workspace (revisions().rules).
   */
  revisionOf (workspaceId: string): Promise<number>
  /** revisionOf for many workspaces in one read (MongoDB: one query, where one each cost a round
   *  trip per workspace on every move of the global revision). Absent: callers loop revisionOf. */
  revisionsOf? (workspaceIds: readonly string[]): Promise<Map<string, number>>
  /**
   * What a cache of a workspace's access rules needs to catch up (the feed side's rebuild reads):
   * every access rule changed after `since` (-1: every rule), lapsed or not, handed to `each` one
   * at a time (a first read of millions never holds them all at once). The answer's `seq` is the
   * `since` of the next call (a position only the same store reads: MongoDB, the highest rule seq;
   * the embedded store, its change counter). Deletions: a store that lists them hands each to
   * `gone` (the rule of that ruleRef, or else the unkeyed rule of that target) and answers `live`
   * null; otherwise `live` counts the workspace's access rules live at `now`, and a cache that,
   * with `changed` applied, holds more live rules knows some went and reloads (since -1). Long
   * reads yield to the event loop between slices.
   */
  accessRulesChangedSince (workspaceId: string, since: number, now: number, each: (rule: AccessRule) => void, gone?: (ruleRef: string | null, target: Target | null) => void): Promise<AccessRuleChanges>
}

/** RuleStore#accessRulesChangedSince's answer. */
export interface AccessRuleChanges {
  /** How many rules went to `each`. */
  changed: number
  /** Null when removals went to `gone` instead. */
  live: number | null
  seq: number
}

/** The sweep removes rules lapsed before the start of the current grain: the embedded store
 *  logs expiries in buckets of this size and sweeps only buckets that have ended. */
export const SWEEP_GRAIN_MS = 10_000

/** Rules with expiresAt below this are what a sweep at `now` removes. */
export function sweepCut (now: number): number {
  return Math.floor(now / SWEEP_GRAIN_MS) * SWEEP_GRAIN_MS
}

/** How long a swept rule's tombstone is kept after its lapse. */
export const TOMBSTONE_MS = 86_400_000

/** How many tombstones a store keeps at most by default (THREATFEED_TOMBSTONE_MAX): a day of
 *  lapses at a detection pipeline's rate would otherwise never let the store plateau. */
export const TOMBSTONE_MAX = 1_000_000

/** What is left of a rule the sweep removed, so that an explanation can still say "lapsed at T". */
export interface LapsedTombstone {
  workspaceId: string
  kind: RuleKind
  /** The access rule's target; null for expression rules. */
  target: Target | null
  ruleRef: string | null
  /** The rule's expiresAt. */
  lapsedAt: number
  /** The access rule's action; absent on expression rules and on tombstones written before it was kept. */
  action?: 'block' | 'allow'
}

export interface SweepPass {
  /** Lapsed rules removed. */
  removed: number
  /** Tombstones dropped for being older than TOMBSTONE_MS or beyond the tombstone cap. */
  tombstonesDropped: number
  /** Bookkeeping cleaned that named no rule (the embedded store's stale expiry-log references). */
  staleCleaned: number
  more: boolean
}

export interface TrimPass {
  /** Records removed. */
  records: number
  more: boolean
}

/** What the stream still holds. Seqs are contiguous, so every seq in [first, last] is kept. */
export interface StreamRetained {
  /** The first seq still kept (last + 1 when nothing is). */
  first: number
  /** The stream head. */
  last: number
  records: number
  /** Bytes the kept records take in the store. */
  bytes: number
}

/** One accepted signal entry on the durable message stream (SPEC §6, DECISIONS §3). */
export interface StreamRecord {
  seq: number
  workspaceId: string
  /** `schema_version` header: absent (undefined) for v1, 2 for v2. */
  schemaVersion?: number
  /** The entry as accepted: for v1 byte-for-byte the v1 entry's JSON text. */
  payload: string
  acceptedAt: number
  /**
   * The id of the ingest batch whose append wrote the record (every record of one append has the
   * same), as its 200/206 answer named it; absent for records appended without one (before batch
   * ids existed, or not from ingest).
   */
  batchId?: string
}

export type StreamRecordInput = Omit<StreamRecord, 'seq' | 'batchId'>

/**
 * A whole v1 batch as one append: each element of `body` (a JSON array in UTF-8, parsed by the
 * caller) is a v1 record of `workspaceId` accepted at `acceptedAt`, its payload the element's
 * text byte for byte. What the ingest path appends when no entry of a v1 batch failed — nearly
 * always — so that the body is split into records when they are read back instead of on every
 * request: the split cost as much CPU as the JSON parse, and a batch's records are read again
 * only for a replay, a gap or `stream tail` (the consumer is handed the batch already parsed).
 */
export interface WholeV1Batch {
  readonly workspaceId: string
  readonly acceptedAt: number
  readonly body: Buffer
  /** The array's length. */
  readonly count: number
}

/** How long an idempotency key is remembered (SignalStream#appendOnce): a client's retries of
 *  one batch come within minutes; a day covers a client that was down meanwhile. */
export const IDEMPOTENCY_WINDOW_MS = 86_400_000

/** An append made once per key (SignalStream#appendOnce). */
export interface AppendOnce {
  readonly workspaceId: string
  /** The client's key (1–255 visible ASCII characters). */
  readonly key: string
  /** Digest of the request the key came with: the same key with another request is refused by the caller. */
  readonly digest: string
  /** What the caller needs to answer a retry the same way; stored as JSON. */
  readonly note: Record<string, unknown>
  /** When (ms): the window of the entry starts here. */
  readonly at: number
}

export interface AppendOnceResult {
  readonly seqs: number[]
  /** The entry of a key seen within the window (nothing was appended now); null when this call appended. */
  readonly earlier: { readonly digest: string, readonly note: Record<string, unknown>, readonly at: number } | null
}

/** What one append takes: records, or a whole v1 batch (whole-v1-batch.ts). */
export type StreamAppend = StreamRecordInput[] | WholeV1Batch

export interface SignalStream {
  /**
   * Appends durably and atomically; resolves with the assigned sequence numbers, strictly
   * increasing. A reader never observes seq n+1 before seq n is readable (commit order = seq order),
   * also with several processes appending at once. With a `gate`, the write transaction calls
   * `gate.begin()` as its last step before the commit and rolls back if it throws: an append
   * abandoned before its commit started is never written (commit-gate.ts). A `batchId` (a
   * canonical UUID) is stored with the append and read back on each of its records.
   */
  append (input: StreamAppend, gate?: CommitGate, batchId?: string): Promise<number[]>
  /**
   * `append` at most once per (workspace, key) within IDEMPOTENCY_WINDOW_MS (docs/signals.md,
   * "Idempotency-Key"): in the append's own transaction, an entry of that key accepted within
   * the window is answered as `earlier`, with its seqs, and nothing is appended; otherwise the
   * records and the entry are written together. An older entry is replaced. Both stores have
   * it (StoredSignalStream); a test double without it refuses a key (SignalIngester).
   */
  appendOnce? (input: StreamAppend, once: AppendOnce, gate?: CommitGate, batchId?: string): Promise<AppendOnceResult>
  /** Records with seq >= from, ascending, at most `limit`. */
  read (from: number, limit: number): Promise<StreamRecord[]>
  /** Highest assigned seq, 0 when empty. */
  head (): Promise<number>
  getCheckpoint (consumer: string): Promise<number>
  setCheckpoint (consumer: string, seq: number): Promise<void>
}

/** The stream as a store keeps it: also trimmed (the ingest path needs only SignalStream). */
export interface StoredSignalStream extends SignalStream {
  appendOnce (input: StreamAppend, once: AppendOnce, gate?: CommitGate): Promise<AppendOnceResult>
  /**
   * One bounded pass of the trim: removes, from the start of the stream, records that every
   * consumer's checkpoint has passed — the record a checkpoint names is kept, so no checkpoint
   * points into trimmed space — and that were accepted before `acceptedBefore`; at most about
   * `limit` of them. Safe from several processes at once. With no checkpoint stored, nothing goes.
   */
  trim (acceptedBefore: number, limit: number): Promise<TrimPass>
  retained (): Promise<StreamRetained>
  /** Every stored checkpoint, by consumer name. */
  checkpoints (): Promise<StreamCheckpoint[]>
  /**
   * Removes a consumer's checkpoint (true if there was one), so that a consumer no longer run
   * stops holding back the trim. A consumer still running under that name finds no checkpoint
   * at its next apply and starts over from the first record kept.
   */
  forgetCheckpoint (consumer: string): Promise<boolean>
}

export interface StreamCheckpoint {
  readonly consumer: string
  readonly seq: number
}

export interface HousekeepingCounters {
  rulesSwept: number
  tombstonesDropped: number
  staleCleaned: number
  streamRecordsTrimmed: number
  sweepPasses: number
  trimPasses: number
}

export function newHousekeepingCounters (): HousekeepingCounters {
  return { rulesSwept: 0, tombstonesDropped: 0, staleCleaned: 0, streamRecordsTrimmed: 0, sweepPasses: 0, trimPasses: 0 }
}

/** Counts one sweep pass (made by this store, or by another thread's on the same directory). */
export function addSweepPass (c: HousekeepingCounters, pass: SweepPass): void {
  c.sweepPasses++
  c.rulesSwept += pass.removed
  c.staleCleaned += pass.staleCleaned
  c.tombstonesDropped += pass.tombstonesDropped
}

/** Identifies one feed's network content: per list (or the workspace feed), family and action. */
export interface FeedKey {
  workspaceId: string
  /** List id, or '*' for the workspace feed. */
  listId: string
  family: Family
  action: FeedAction
}

export interface FeedVersion {
  /** Hash of the feed's network content (format-independent). */
  contentHash: string
  /** When this content's current run started (Last-Modified). */
  since: number
}

/**
 * What a feed's content was built from. Nodes build at different moments from what they last
 * read, so a record only moves to a build from a newer state (compareBasis): a node that finishes
 * a build from older rules cannot switch the record back (A→B→A would start a new Last-Modified
 * and, through dialect_a's `generated` line, new bytes on every node).
 */
export interface FeedVersionBasis {
  /** The workspace's rules revision (RuleStore#revisionOf) the rules were read at. */
  readonly rulesRevision: number
  /** revisions().admin when the lists and workspaces were last read. */
  readonly adminRevision: number
  /** Newest buildEpoch of the geo databases: a reload to a newer database moves it. */
  readonly geoEpoch: number
  /** Identity of the geo databases (type, build epoch and size of each). */
  readonly geoDigest: string
  /** Rules lapsed at this instant were left out (a lapse changes content, not the revisions). */
  readonly expiryCutoff: number
}

/** A version is published (served) or held back by a publish guard; every version is published for now. */
export const FEED_VERSION_STATES = ['published', 'held'] as const
export type FeedVersionState = (typeof FEED_VERSION_STATES)[number]

/** How many earlier runs a record keeps (a consumer's "versions behind" is counted in them). */
export const FEED_VERSION_HISTORY = 32
/** Resolution and reach of the change counts kept for charts: hourly, 30 days (at most 720). */
export const FEED_CHANGE_BUCKET_MS = 3_600_000
export const FEED_CHANGE_DAYS_MS = 30 * 86_400_000

/**
 * A feed version as stored: bounded in size whatever the rate of change. The shard key of a
 * sharded store is `workspaceId` (every read and write of one record names it).
 */
export interface FeedVersionRecord extends FeedVersion {
  readonly workspaceId: string
  /** null: written before bases were recorded; any build replaces it. */
  basis: FeedVersionBasis | null
  state: FeedVersionState
  /** Earlier runs, newest first, at most FEED_VERSION_HISTORY. */
  history: FeedVersion[]
  /** [start of hour, new runs in it], oldest first, over the last FEED_CHANGE_DAYS_MS. */
  changes: Array<[number, number]>
}

/** One feed: a list, or the workspace feed ('*'). */
export interface FeedRef {
  workspaceId: string
  listId: string
}

/** When a feed was last served (FeedVersionStore#recordFetches). */
export interface FeedFetch extends FeedRef {
  at: number
}

export interface FeedVersionStore {
  /**
   * Atomically: when the stored hash equals `contentHash`, return the stored version unchanged;
   * otherwise, when `basis` is newer than the stored one (compareBasis; any basis is newer than
   * none stored, and a call without one is a single writer's, tools and tests), store
   * `{contentHash, since: now}` and return it — so content A→B→A gets a new time. When the stored
   * basis is as new or newer, return the stored version: its hash differs from `contentHash`,
   * which tells the caller its build is behind. A new run keeps the record's fetch time and
   * state, and pushes the old run onto its history.
   */
  observe (key: FeedKey, contentHash: string, now: number, basis?: FeedVersionBasis): Promise<FeedVersion>
  get (key: FeedKey): Promise<FeedVersion | null>
  /** The whole record (basis, state, history, change counts), or null. */
  record (key: FeedKey): Promise<FeedVersionRecord | null>
  /**
   * Notes when feeds were served, on their version records (every family and action), keeping
   * the latest time per feed. A feed with no version record yet (never built) records nothing.
   * Callers throttle it (the feed service: at most once every few minutes per feed); it is what
   * a restart reads to build the feeds in use before reporting ready (DECISIONS §6).
   */
  recordFetches (fetches: readonly FeedFetch[]): Promise<void>
  /** The feeds whose recorded fetch time is at or after `since`, each once, with that time. */
  fetchedSince (since: number): Promise<FeedFetch[]>
  /**
   * What a guarded feed last published and its guards' state (src/feed/guards-persist.ts), so a
   * restart or another node holds what this one held; null forgets it (the guards were removed).
   */
  savePublished (ref: FeedRef, record: PublishedRecord | null): Promise<void>
  loadPublished (ref: FeedRef): Promise<PublishedRecord | null>
}

/** A guarded feed's published rules (encoded by the feed service, opaque here) and publish state. */
export interface PublishedRecord {
  readonly state: PublishState
  /** The rules the published build came from; null before anything was published. */
  readonly rules: Uint8Array | null
  readonly savedAt: number
}

/** Who holds a lease, until when (the store's clock, ms since the epoch). */
export interface Lease {
  readonly owner: string
  readonly expiresAt: number
}

/**
 * Named leases with owner and expiry, shared by every process on the store: one node applies the
 * stream while the others follow its checkpoint (stream/applier-lease.ts). A lease only saves
 * work; correctness never rests on it (the checkpoint compare-and-set does), so a holder paused
 * past its expiry costs a conflict, not a double apply.
 */
export interface LeaseStore {
  /**
   * Takes `name` for `owner` until ttlMs from now when it is free, lapsed, or `owner`'s already
   * (a renewal); otherwise leaves it. Answers the holder after the call.
   */
  claim (name: string, owner: string, ttlMs: number): Promise<Lease>
  /** Frees `name` if `owner` holds it: a clean stop hands over at once. */
  release (name: string, owner: string): Promise<void>
  /** The lease as stored (lapsed or not), or null: who applies, for tools and tests. */
  get (name: string): Promise<Lease | null>
}

export interface Store {
  readonly kind: 'embedded' | 'mongodb'
  readonly workspaces: WorkspaceStore
  readonly keys: KeyStore
  readonly lists: ListStore
  readonly rules: RuleStore
  readonly stream: StoredSignalStream
  readonly feedVersions: FeedVersionStore
  /** Who polls the feeds (issue 20). */
  readonly consumers: ConsumerStore
  /** Present on stores shared by several processes (both backends); absent on test doubles. */
  readonly leases?: LeaseStore
  /** The admin API's diagnostics and audit log (issue 22); both backends, absent on test doubles. */
  readonly journal?: JournalStore
  /**
   * Counters that rise on every change, seen from any process using the same store (the CLI
   * changes keys while the server runs). Polled by the server (cheap: one read each).
   * `admin` covers workspaces, keys and lists; `rules` covers rule writes.
   */
  revisions (): Promise<{ admin: number, rules: number }>
  /** What the sweep and the trim did in this process, for metrics. */
  readonly housekeeping: HousekeepingCounters
  /** Resolves when the store answers; rejects with TF_ERR_STORE_UNAVAILABLE otherwise. */
  ping (): Promise<void>
  /**
   * Bytes free on the file system that holds the signal stream, for readiness; absent where the
   * store cannot tell (MongoDB: the server's disks are its own), null when the check failed.
   */
  streamFreeBytes? (): number | null
  /**
   * The store server's clock less this process's, in ms (clock-skew.ts), on stores shared by
   * several machines (MongoDB); absent where every process shares one clock (LMDB).
   */
  clockSkew? (): Promise<number>
  close (): Promise<void>
}

/**
 * One consumer of a feed (issue 20): who polls — the key, the client's address, its User-Agent
 * and the `?client=` name it gave — and what — the list ('*' for the workspace feed) and the
 * variant. `id` is a digest of those fields (src/store/consumer-record.ts consumerId).
 */
export interface FeedConsumerIdentity {
  id: string
  workspaceId: string
  keyId: string
  address: string
  userAgent: string
  /** The `?client=` name, '' when the request gave none. */
  client: string
  listId: string
  /** The variant key (`plain|v4|block|`, feed/snapshot-types.ts variantKey). */
  variant: string
  /** The variant's family and action: the feed-version record its ETag belongs to. */
  family: Family
  action: FeedAction
}

/**
 * What polls of one consumer add to its record. Every field merges without coordination, so
 * several processes flushing their views of one consumer agree (ConsumerStore#merge): counts
 * add, first times take the least, last times the greatest, and a (time, value) pair keeps the
 * value of the latest time.
 */
export interface FeedConsumerTally {
  polls: number
  /** Polls by answer: 200, 304, 4xx, 5xx. */
  ok: number
  notModified: number
  clientErrors: number
  serverErrors: number
  firstSeen: number
  lastSeen: number
  /** The status of the poll at `last.at`. */
  last: { at: number, status: number }
  /** When a poll was last answered 200; null: never. */
  last200At: number | null
  /**
   * The version the consumer holds: the ETag and Last-Modified (ms) of its latest 200 or 304, at
   * `at`; null until it had one.
   */
  held: { at: number, etag: string, since: number } | null
  /** The latest (at most three) times a poll got a 4xx or 5xx, most recent first. */
  recentFails: number[]
  /** Poll intervals seen, as counts per bucket of consumer-record.ts INTERVAL_BUCKETS_MS (index → count). */
  intervals: Record<string, number>
}

export type FeedConsumer = FeedConsumerIdentity & FeedConsumerTally

/**
 * Consumers the bounds let go (src/http/consumers.ts), per workspace: `evicted` from a server's
 * memory as their key's least recently seen one when the key reached its bound (their counts
 * since the last flush lost), `refused` because the server tracked as many as it may in all,
 * `removed` from the store as their key's least recently seen beyond the bound.
 */
export interface ConsumerDrops {
  evicted: number
  refused: number
  removed: number
}

/** Consumers, as every server process flushes them (src/http/consumers.ts). */
export interface ConsumerStore {
  /**
   * Adds each tally to its consumer's record, creating it when missing, in one write (one bulk
   * write on MongoDB), and `drops` (workspace id → counts) to the workspaces' drop counts.
   * Merging is commutative: processes may flush the same consumer in any order and the record
   * is the same.
   */
  merge (tallies: ReadonlyArray<FeedConsumerIdentity & FeedConsumerTally>, drops?: ReadonlyMap<string, ConsumerDrops>): Promise<void>
  /** Every consumer of one workspace, or of all. */
  list (workspaceId?: string): Promise<FeedConsumer[]>
  /** Removes consumers last seen before `before`; returns how many. */
  forget (before: number): Promise<number>
  /**
   * Keeps a key's `keep` most recently seen consumers and removes the others, counting them as
   * `removed`; returns how many it removed.
   */
  trim (workspaceId: string, keyId: string, keep: number): Promise<number>
  /** What the bounds let go, summed over one workspace or all. */
  drops (workspaceId?: string): Promise<ConsumerDrops>
}

/**
 * The admin API's bounded tables (issue 22): recent signal batches, hourly feed sizes per variant,
 * and the audit log of changes made through the API. Each entry belongs to a partition (a
 * workspace, or `workspace/list` for feed sizes) and is read newest first.
 */
export const JOURNAL_TABLES = ['batch', 'feed_size', 'audit'] as const
export type JournalTable = (typeof JOURNAL_TABLES)[number]

export interface JournalEntry {
  table: JournalTable
  partition: string
  /** When (ms); the order of a partition, with `id` breaking ties. */
  at: number
  /** Unique within (table, partition, at); an entry put again with the same three replaces it. */
  id: string
  data: Record<string, unknown>
}

/** How long and how many entries of a table each partition keeps. */
export interface JournalBounds {
  keepMs: number
  maxPerPartition: number
}

export interface JournalStore {
  /** Stores the entries in one write (replacing any with the same table, partition, at and id). */
  put (entries: readonly JournalEntry[]): Promise<void>
  /** At most `limit` entries of one partition, newest first, strictly before `before` when given. */
  page (table: JournalTable, partition: string, limit: number, before?: { at: number, id: string }): Promise<JournalEntry[]>
  /**
   * One bounded pass: removes entries older than their table's keepMs, and in each partition the
   * oldest beyond maxPerPartition; at most about `limit` removals. `more`: another pass has work.
   */
  sweep (now: number, bounds: Record<JournalTable, JournalBounds>, limit: number): Promise<{ removed: number, more: boolean }>
}
