/**
 * What the feed service keeps per workspace and per feed: the snapshot, its build's state and
 * schedule, and the workspace's rules; and the registry of them all by id (FeedRegistry), which
 * the service's parts share (feed-service.ts wires them; feed-scheduler.ts, feed-builder.ts and
 * feed-sync.ts read and write these fields).
 */
import { ThreatfeedError } from '../errors.js'
import type { ChunkCache } from '../pool/protocol.js'
import type { Logger } from '../log.js'
import type { AccessList, GuardSettings, ListStore, RuleStore } from '../store/types.js'
import { FeedGuard } from './guards.js'
import type { BuiltVersions } from './last-modified.js'
import type { BuildReason } from './metrics.js'
import { WorkspaceRuleCache } from './rule-cache.js'
import { ShardDemand } from './shards.js'
import { WORKSPACE_FEED, type FeedId, type FeedSnapshot } from './snapshot-types.js'

/** A snapshot built ahead of the current one's first lapse, swapped in at it (rebuild-schedule.ts). */
export interface NextSnapshot {
  readonly snapshot: FeedSnapshot
  /** What its build recorded (Supersession#built, once it is the current one). */
  readonly versions: BuiltVersions
}

export class FeedState {
  list: AccessList | null = null
  snapshot: FeedSnapshot | undefined = undefined
  /** Built ahead, waiting for `snapshot` to lapse: never served before. */
  next: NextSnapshot | null = null
  caches: Map<string, ChunkCache> | undefined = undefined
  building: Promise<void> | null = null
  /** A trigger arrived that the current snapshot does not reflect. */
  dirty = true
  /** Why the next build runs: a first build is 'demand', or 'start' for a feed built before ready. */
  reason: BuildReason = 'demand'
  lastStart = -Infinity
  /** Inputs of the newest snapshot, `next` or else the current one (rules fingerprint, list, workspace name, geo version). */
  builtFrom = ''
  /** Expected time of a build from its decision to its snapshot, and from reading the rules on (rebuild-schedule.ts nextEstimate). */
  buildMs = 0
  selectMs = 0
  failures = 0
  retryAt = 0
  lastError: unknown = null
  timer: NodeJS.Timeout | null = null
  timerAt = Infinity
  /** The list does not exist (or belongs to another workspace). */
  missing = false
  /** Kept built: served within idleMs, or recorded as served within idleMs before the start. */
  wanted = false
  /** When the feed was last asked for. */
  fetchedAt = -Infinity
  /** The fetchedAt last written to the store (recordFetches). */
  recordedAt = -Infinity
  readonly shards = new ShardDemand()
  readonly guard = new FeedGuard()
  /** The served copy answered from until the first build lands (served-copy.ts); null after it. */
  restored: FeedSnapshot | null = null
  /** When each representation was last polled (served-copy.ts pollKey): what a copy keeps. */
  readonly polls = new Map<string, number>()

  constructor (readonly workspaceId: string, readonly feedId: FeedId) {}
}

export class WorkspaceState {
  name: string | null = null
  active = true
  /** As last read, caught up by what changed (rule-cache.ts). */
  readonly rules: WorkspaceRuleCache
  /** The workspace's rules revision (RuleStore#revisionOf) `rules` was read at. */
  rulesRevision = -1
  /** Publish guards of the workspace feed (guards.ts), and their JSON to notice a change. */
  guards: GuardSettings | undefined = undefined
  guardsJson = ''
  /** Its latest rules revision known (polled when the store's rules revision moves). */
  revision = 0
  fetching: Promise<void> | null = null
  readonly feeds = new Map<FeedId, FeedState>()

  constructor (readonly id: string) {
    this.rules = new WorkspaceRuleCache(id)
  }

  /**
   * The workspace's rules: caught up when its rules revision moved, else (or when the store fails)
   * as last read. `fresh`: read the revision now rather than trust the last poll (a first build
   * shows every signal acknowledged before its request, not only those a poll has seen).
   */
  async catchUp (store: RuleStore, now: number, fresh: boolean, log: Pick<Logger, 'warn'>): Promise<void> {
    if (fresh && this.rules.table !== null) {
      try {
        // As the store has it, back as well as forward (below).
        this.revision = await store.revisionOf(this.id)
      } catch {
        // The store is down: the rules in memory are the best there is (below).
      }
    }
    if (this.rules.table !== null && this.rulesRevision === this.revision) return
    if (this.fetching !== null) return this.fetching
    // The revision is read before the rules: a write in between makes the rules newer than the
    // revision recorded, never older, and the next poll reads again.
    this.fetching = store.revisionOf(this.id).then(async (revision) => {
      // Back (issue 33: a rollback after a MongoDB failover, a restore): the rule seqs after the
      // rollback point are reused by new rules, so a read of what changed since would skip them.
      await this.rules.refresh(store, now, revision < this.rulesRevision)
      this.rulesRevision = revision
      // A poll may have seen a newer one meanwhile; one that saw it go back lowered it already.
      this.revision = Math.max(this.revision, revision)
    }).catch((e: unknown) => {
      if (this.rules.table === null) throw e
      log.warn({ err: e, workspace: this.id }, 'rule store unavailable; building from the rules in memory')
    }).finally(() => { this.fetching = null })
    return this.fetching
  }
}

/** Every workspace's state by id, and its feeds': what the feed service knows of. */
export class FeedRegistry {
  readonly workspaces = new Map<string, WorkspaceState>()

  /** The workspace's state, created (with its workspace feed) on first sight. */
  workspace (id: string): WorkspaceState {
    let ws = this.workspaces.get(id)
    if (ws === undefined) {
      ws = new WorkspaceState(id)
      ws.feeds.set(WORKSPACE_FEED, new FeedState(id, WORKSPACE_FEED))
      this.workspaces.set(id, ws)
    }
    return ws
  }

  /** The feed's state if it is known; nothing is created. */
  feed (workspaceId: string, feedId: FeedId): FeedState | undefined {
    return this.workspaces.get(workspaceId)?.feeds.get(feedId)
  }

  /** The feed's state: the workspace feed is created on first sight, a list only once known. */
  known (workspaceId: string, feedId: FeedId): FeedState | undefined {
    if (feedId === WORKSPACE_FEED) return this.workspace(workspaceId).feeds.get(WORKSPACE_FEED)
    return this.feed(workspaceId, feedId)
  }

  /** A list created since the last admin reload (or an id that is no list of the workspace: TF_ERR_LIST_NOT_FOUND). */
  async discover (lists: Pick<ListStore, 'get'>, workspaceId: string, listId: string): Promise<FeedState> {
    const list = await lists.get(listId)
    if (list === null || list.workspaceId !== workspaceId) throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
    const ws = this.workspace(workspaceId)
    let f = ws.feeds.get(listId)
    if (f === undefined) {
      f = new FeedState(workspaceId, listId)
      ws.feeds.set(listId, f)
    }
    f.list ??= list
    return f
  }

  /** How many feeds a publish guard holds back (guards.ts). */
  held (): number {
    let held = 0
    for (const ws of this.workspaces.values()) for (const f of ws.feeds.values()) if (f.guard.state.held !== null) held++
    return held
  }
}
