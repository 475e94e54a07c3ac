/**
 * Keeps the snapshots of the feeds in use built and fresh, and answers the HTTP side from memory.
 *
 * Which feeds are built (DECISIONS §6, README "Decisions beyond the spec"): a feed is built on its
 * first request, at once, with every signal acknowledged before that request (so a new user's
 * first fetch shows their first signal), and kept fresh while it is served. A feed not served for
 * an hour is let go: its snapshot is dropped and the next request builds it again. When a feed is
 * served is recorded on its feed-version records, at most once every few minutes, so that a
 * restart builds the feeds served in the hour before it ahead of reporting ready, and leaves the
 * others (a workspace's hundreds of unpolled lists) to their first request.
 *
 * When a feed in use is rebuilt (each at most once per THREATFEED_FEED_REBUILD_MS, except at
 * expiry — the interval bounds the CPU a stream of changes costs, SPEC §8):
 * - rules moved (store.revisions().rules, polled every THREATFEED_POLL_MS by the catalog);
 * - a list or workspace changed (the catalog's view, catalog.ts), or the geo index was replaced;
 * - the snapshot nears its expiresAt, the earliest expiry of a rule in it. This one ignores the
 *   interval: a lapsed rule is never served (DECISIONS §5), and the alternative — a feed that
 *   answers nothing until the interval is over — is worse than one extra build. The successor is
 *   built ahead of that lapse and swapped in at it, and every build is cut ahead of its own end
 *   (rebuild-schedule.ts leadOf), so that under constant churn a feed keeps answering;
 * - a build failed (worker crash or timeout, store down with nothing in memory): retried with
 *   backoff while the last good snapshot keeps serving.
 *
 * Store outages: each workspace's rules are kept as last fetched, and a build that cannot reach
 * the store rebuilds from them, filtered by expiry at build time — so feeds keep answering and a
 * rule still disappears at its expiry (chosen over keeping per-rule networks in the snapshot: the
 * rules are far smaller, and the build path stays the one path). Last-Modified falls back to memory
 * too (last-modified.ts).
 *
 * `getSnapshot` is synchronous and never returns a snapshot past its expiresAt: it returns the
 * successor built ahead when there is one, else null and starts the rebuild, which
 * `awaitSnapshot` waits for.
 *
 *   catalog poll ──► revisions ──► mark feeds dirty ──► tick(feed) ──► timer at the next boundary of the interval,
 *                                                  ▲                 a lead before the newest snapshot's expiresAt,
 *                                                  │                 or at the current one's (swap in `next`)
 *   expiry timer / getSnapshot(stale) ─────────────┘                ──► build ──► swap (or hold as `next`) ──► tick
 */
import { ThreatfeedError } from '../errors.js'
import type { GeoIndex } from '../geo/geo-index.js'
import type { GeoIndexData } from '../geo/geo-index.js'
import type { Logger } from '../log.js'
import type { FeedFetch, PublishState, Store } from '../store/types.js'
import { StoreCatalog, type CatalogPoll, type CatalogView, type PolledCatalog } from './catalog.js'
import { buildSnapshot, feedTargets, metaOf, type BuildResult, type FeedTargets, type FeedTasks } from './build-snapshot.js'
import { hasGuards } from './guards.js'
import { feedHoldOf, type FeedHold } from './explain.js'
import { guardedBuild } from './guards-run.js'
import { persistGuard } from './guards-persist.js'
import { LastModifiedKeeper } from './last-modified.js'
import { Supersession } from './supersession.js'
import { FeedState, WorkspaceState, type NextSnapshot } from './feed-state.js'
import { Slots } from './slots.js'
import { FetchRecorder, RECORD_MS } from './fetch-recorder.js'
import { syncAdmin } from './admin-sync.js'
import { cutAfter, geoBasis, leadOf, nextEstimate, nextRebuildAt } from './rebuild-schedule.js'
import { workspaceRevisions } from './workspace-revisions.js'
import { runSliced } from './slices.js'
import { awaitShardCount } from './shards.js'
import type { BuildReason, FeedMetrics } from './metrics.js'
import { WORKSPACE_FEED, type FeedId, type FeedSnapshot } from './snapshot-types.js'

export interface FeedServiceConfig {
  /** Least time between two rebuilds of one feed (THREATFEED_FEED_REBUILD_MS). */
  feedRebuildMs: number
  /** How often the store's revisions are polled (THREATFEED_POLL_MS), when the service polls with a catalog of its own. */
  pollMs: number
}

/** The pool as the service uses it (src/pool/pool.ts FeedPool fits). */
export interface FeedPoolLike extends FeedTasks {
  setGeo (data: GeoIndexData): void
}

export interface FeedServiceOptions {
  store: Store
  pool: FeedPoolLike
  config: FeedServiceConfig
  log: Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>
  metrics?: FeedMetrics
  geo?: GeoIndex
  gzipLevel?: number
  /** Longest awaitSnapshot() wait before TF_ERR_FEED_UNAVAILABLE (a 500). */
  awaitMs?: number
  /**
   * A feed not served for this long is let go (snapshot dropped, rebuilt on its next request);
   * at start, the feeds served within this long before are built before ready(). Default 1 h.
   */
  idleMs?: number
  /**
   * Resolves once every signal this process acknowledged is in the rule store (the stream
   * consumer caught up), or after a bounded wait. A feed's first build waits for it: a fetch
   * that follows a 200 from /v1/signal shows that signal.
   */
  caughtUp?: () => Promise<unknown>
  /** Longest wait for the store's feed versions before using memory. */
  storeTimeoutMs?: number
  /**
   * Builds run at once (default 2, the pool's default size). More would only interleave their
   * tasks in the pool — every build finishing later — and hold all their buffers at once.
   */
  buildConcurrency?: number
  /**
   * The shared catalog (workspaces, keys, lists, and the poll of the store's revisions), whose
   * life cycle is the caller's. Without one, the service polls with a catalog of its own.
   */
  catalog?: PolledCatalog
}

/** Node timers hold at most 2^31 - 1 ms; a later instant is re-armed when reached. */
const MAX_TIMER_MS = 0x7fffffff
const RETRY_MIN_MS = 100
const IDLE_MS = 3_600_000

/**
 * @example
 *   const feeds = new FeedService({ store, pool, config, log, metrics: registerFeedMetrics(metrics), geo })
 *   await feeds.start()
 *   const snapshot = feeds.getSnapshot(workspaceId, '*', Date.now()) ?? await feeds.awaitSnapshot(workspaceId, '*')
 */
export class FeedService {
  readonly #store: Store
  readonly #pool: FeedPoolLike
  readonly #config: FeedServiceConfig
  readonly #log: FeedServiceOptions['log']
  readonly #metrics: FeedMetrics | undefined
  readonly #gzipLevel: number | undefined
  readonly #awaitMs: number
  readonly #idleMs: number
  readonly #caughtUp: (() => Promise<unknown>) | undefined
  readonly #lastModified: LastModifiedKeeper
  readonly #workspaces = new Map<string, WorkspaceState>()
  readonly #slots: Slots
  readonly #catalog: PolledCatalog
  /** The catalog this service made for itself (no catalog given), started and stopped with it. */
  readonly #ownCatalog: StoreCatalog | null
  #geo: GeoIndex | null = null
  #geoVersion = 0
  /** The catalog view the feeds reflect. */
  #adminView: CatalogView | null = null
  #rulesRevision = 0
  #unsubscribe: (() => void) | null = null
  #polling = false
  #started = false
  #stopped = false
  #ready = false
  #initial: Promise<void> | null = null
  readonly #fetches: FetchRecorder
  readonly #swapListeners = new Set<(workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null) => void>()
  /** Feeds another node switched first (several nodes, supersession.ts). */
  readonly #superseded: Supersession<FeedState>
  /** Builds started per feed: which build a late store answer is about (#restamp). */
  readonly #generations = new WeakMap<FeedState, number>()

  constructor (opts: FeedServiceOptions) {
    this.#store = opts.store
    this.#pool = opts.pool
    this.#config = opts.config
    this.#log = opts.log
    this.#metrics = opts.metrics
    this.#gzipLevel = opts.gzipLevel
    this.#awaitMs = opts.awaitMs ?? 10_000
    this.#idleMs = opts.idleMs ?? IDLE_MS
    this.#caughtUp = opts.caughtUp
    this.#slots = new Slots(opts.buildConcurrency ?? 2)
    this.#ownCatalog = opts.catalog === undefined ? new StoreCatalog(opts.store, { pollMs: opts.config.pollMs }) : null
    this.#catalog = opts.catalog ?? this.#ownCatalog!
    this.#lastModified = new LastModifiedKeeper(opts.store.feedVersions, {
      timeoutMs: opts.storeTimeoutMs ?? 2000,
      onStoreError: (e) => { this.#log.warn({ err: e }, 'feed versions unavailable; Last-Modified kept in memory') },
    })
    this.#fetches = new FetchRecorder(opts.store.feedVersions, this.#log)
    this.#superseded = new Supersession(opts.store.feedVersions, opts.config.feedRebuildMs)
    if (opts.geo !== undefined) this.#installGeo(opts.geo)
  }

  /** Loads workspaces and lists, builds the feeds served in the last idleMs, then polls for changes. */
  async start (): Promise<void> {
    if (this.#started) return
    this.#started = true
    this.#unsubscribe = this.#catalog.onPoll((poll) => { void this.#poll(poll) })
    try {
      if (this.#ownCatalog !== null) await this.#ownCatalog.start()
      else if (this.#catalog.view === null) await this.#catalog.refresh()
      this.#rulesRevision = this.#catalog.rulesRevision
      this.#applyAdmin()
      await this.#wantRecent()
    } catch (e) {
      // The store is down at start: the next poll retries the load.
      this.#log.warn({ err: e }, 'feed service: store unavailable at start; retrying')
    }
    if (this.#geo !== null) this.#startInitial()
  }

  /** Stops polling and timers; waits for builds in flight. The pool and the store are the caller's. */
  async stop (): Promise<void> {
    this.#stopped = true
    this.#unsubscribe?.()
    this.#ownCatalog?.stop()
    const pending: Promise<void>[] = []
    for (const ws of this.#workspaces.values()) {
      for (const f of ws.feeds.values()) {
        this.#clearTimer(f)
        if (f.building !== null) pending.push(f.building)
      }
    }
    await Promise.allSettled(pending)
  }

  /** True once a geo index is set and the feeds served in the idleMs before the start are built (for /readyz). */
  ready (): boolean {
    return this.#ready
  }

  /** Replaces the geo index (a reload): every feed is rebuilt within the rebuild interval. */
  setGeo (index: GeoIndex): void {
    this.#installGeo(index)
    if (!this.#started) return
    if (this.#initial === null) {
      this.#startInitial()
      return
    }
    for (const ws of this.#workspaces.values()) for (const f of ws.feeds.values()) this.#markDirty(f, 'geo')
  }

  /**
   * The current snapshot of a feed, or null when there is none valid at `now` (not built yet,
   * or past its expiresAt); a build is then under way and awaitSnapshot() waits for it.
   * `feedId` is '*' for the workspace feed, else a list id.
   */
  getSnapshot (workspaceId: string, feedId: FeedId, now = Date.now()): FeedSnapshot | null {
    const feed = this.#knownFeed(workspaceId, feedId)
    if (feed === undefined) return null
    feed.fetchedAt = now
    return this.#current(feed, now)
  }

  /**
   * The current snapshot, waiting for a build if needed. Rejects with TF_ERR_LIST_NOT_FOUND for a
   * list that does not exist in the workspace, TF_ERR_FEED_UNAVAILABLE (a 500: SPEC §7.2 has no
   * 503) when no valid snapshot could be built in time.
   */
  async awaitSnapshot (workspaceId: string, feedId: FeedId, now?: number): Promise<FeedSnapshot> {
    const deadline = Date.now() + this.#awaitMs
    const feed = this.#knownFeed(workspaceId, feedId) ?? await this.#discoverList(workspaceId, feedId)
    feed.fetchedAt = Date.now()
    let overtime = false
    for (;;) {
      const s = this.#current(feed, now ?? Date.now())
      if (s !== null) return s
      if (feed.missing) throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
      const left = deadline - Date.now()
      if (this.#stopped) throw new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: feed.lastError ?? undefined })
      if (left <= 0) {
        // A build under way at the deadline is waited for (the pool's task timeout bounds it):
        // a feed that is busy is not unavailable. Without one, nothing is coming.
        const building = feed.building
        if (building === null || overtime) throw new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: feed.lastError ?? undefined })
        overtime = true
        await building.catch(() => {})
        now = undefined
        continue
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, feed.building === null ? 25 : left))
        if (feed.building !== null) void feed.building.finally(() => { clearTimeout(t); resolve() })
      })
      // A caller-given `now` is honoured once; later rounds are about the new snapshot.
      now = undefined
    }
  }

  /** Calls `listener` in the same tick as each snapshot swap or drop (the front-end threads' hook, feed/snapshot-port.ts). */
  onSwap (listener: (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null) => void): () => void {
    this.#swapListeners.add(listener)
    return () => { this.#swapListeners.delete(listener) }
  }

  /** What a publish guard holds back of a feed, as explain reports it; undefined when nothing is held. */
  holdOf (workspaceId: string, feedId: FeedId): FeedHold | undefined {
    const held = this.#workspaces.get(workspaceId)?.feeds.get(feedId)?.guard.state.held
    return held == null ? undefined : feedHoldOf(held)
  }

  /** The current snapshot, if one is valid at `now`: no build, and not counted as a poll (explain). */
  peekSnapshot (workspaceId: string, feedId: FeedId, now = Date.now()): FeedSnapshot | null {
    const f = this.#workspaces.get(workspaceId)?.feeds.get(feedId)
    if (f === undefined) return null
    this.#promote(f, now)
    const s = f.snapshot
    return s !== undefined && now < s.expiresAt ? s : null
  }

  /** A snapshot holding the shards of `of` (shards.ts): a new count is built at once, unless it evicts another. */
  async awaitShards (workspaceId: string, feedId: FeedId, of: number): Promise<FeedSnapshot> {
    const feed = this.#knownFeed(workspaceId, feedId) ?? await this.#discoverList(workspaceId, feedId)
    if (feed.shards.ask(of) === 'new') feed.lastStart = -Infinity
    this.#markDirty(feed, 'change')
    return awaitShardCount(of, () => this.awaitSnapshot(workspaceId, feedId), () => feed.building, this.#awaitMs)
  }

  /**
   * A poll's tag matched nothing in `snapshot`: when another node recorded newer content, the
   * snapshot this node builds of it (the client may hold it already); else the current one.
   */
  async fresher (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot): Promise<FeedSnapshot> {
    const f = this.#knownFeed(workspaceId, feedId)
    if (f?.snapshot === snapshot) await this.#catchUp(f)
    return this.awaitSnapshot(workspaceId, feedId)
  }

  // --- internals -------------------------------------------------------------------------

  #catchUp (f: FeedState): Promise<void> {
    return this.#superseded.catchUp(f, {
      building: () => f.building,
      rebuildNow: () => {
        // Outside the boundaries, without moving them: the next change still builds on one.
        const last = f.lastStart
        f.dirty = true
        f.lastStart = -Infinity
        this.#tick(f)
        f.lastStart = last
        return f.building
      },
    })
  }

  /**
   * A version build `gen` served from memory (its feed-version write timed out) is not the one the
   * store recorded for the same content (last-modified.ts): rebuild now, off the boundaries, with
   * the recorded one. The content stays: only Last-Modified, dialect_a's line and their ETags move
   * to what every other node serves. A later build observes the store itself and needs none; with
   * a change pending, the boundary build does it.
   */
  #restamp (f: FeedState, gen: number): void {
    if (this.#generations.get(f) !== gen || f.snapshot === undefined) return
    if (f.building !== null) {
      // Build `gen` itself, not swapped yet: it swaps the version it served; restamp after it.
      void f.building.finally(() => { this.#restamp(f, gen) })
      return
    }
    f.builtFrom = ''
    if (f.dirty) return
    const last = f.lastStart
    f.dirty = true
    f.lastStart = -Infinity
    this.#tick(f)
    f.lastStart = last
  }

  #installGeo (index: GeoIndex): void {
    this.#geo = index
    this.#geoVersion++
    this.#pool.setGeo(index.toTransferable())
  }

  #startInitial (): void {
    this.#initial = (async () => {
      const builds: Promise<void>[] = []
      for (const ws of this.#workspaces.values()) {
        for (const f of ws.feeds.values()) {
          this.#tick(f)
          if (f.building !== null) builds.push(f.building)
        }
      }
      await Promise.allSettled(builds)
      this.#ready = true
      this.#log.info({ feeds: builds.length }, 'feed snapshots built')
    })()
  }

  /** The feeds served within idleMs before the start (as recorded in the store) are wanted. */
  async #wantRecent (): Promise<void> {
    for (const fetch of await this.#store.feedVersions.fetchedSince(Date.now() - this.#idleMs)) {
      const ws = this.#workspaces.get(fetch.workspaceId)
      // An inactive workspace's keys get 402: nobody can be served its feeds.
      const f = ws?.active === true ? ws.feeds.get(fetch.listId) : undefined
      if (f === undefined) continue
      f.wanted = true
      f.reason = 'start'
      f.fetchedAt = Math.max(f.fetchedAt, fetch.at)
      f.recordedAt = f.fetchedAt
    }
  }

  #workspace (id: string): WorkspaceState {
    let ws = this.#workspaces.get(id)
    if (ws === undefined) {
      ws = new WorkspaceState(id)
      ws.feeds.set(WORKSPACE_FEED, new FeedState(id, WORKSPACE_FEED))
      this.#workspaces.set(id, ws)
    }
    return ws
  }

  /** The feed's state: the workspace feed is created on first sight, a list only once known. */
  #knownFeed (workspaceId: string, feedId: FeedId): FeedState | undefined {
    if (feedId === WORKSPACE_FEED) return this.#workspace(workspaceId).feeds.get(WORKSPACE_FEED)
    return this.#workspaces.get(workspaceId)?.feeds.get(feedId)
  }

  /** A list created since the last admin reload (or an id that is no list of the workspace). */
  async #discoverList (workspaceId: string, listId: string): Promise<FeedState> {
    const list = await this.#store.lists.get(listId)
    if (list === null || list.workspaceId !== workspaceId) throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
    const ws = this.#workspace(workspaceId)
    let f = ws.feeds.get(listId)
    if (f === undefined) {
      f = new FeedState(workspaceId, listId)
      ws.feeds.set(listId, f)
    }
    f.list ??= list
    return f
  }

  /** The snapshot if valid at `now`; otherwise starts what is due and answers null. */
  #current (f: FeedState, now: number): FeedSnapshot | null {
    this.#promote(f, now)
    const s = f.snapshot
    if (s !== undefined && now < s.expiresAt && !this.#superseded.holds(f, f.building)) return s
    f.wanted = true
    this.#tick(f)
    return null
  }

  async #poll (poll: CatalogPoll): Promise<void> {
    if (this.#polling || this.#stopped) return
    this.#polling = true
    try {
      this.#applyAdmin()
      if (!poll.ok) throw poll.error
      if (poll.rules !== this.#rulesRevision) {
        // Only workspaces whose own rules moved: one read, where refetching every
        // workspace's rules cost 0.4–0.8 s of this thread per 100,000 rules (bench/snapshot.ts).
        const revisions = await workspaceRevisions(this.#store.rules, [...this.#workspaces.keys()])
        for (const ws of this.#workspaces.values()) {
          const revision = revisions.get(ws.id) ?? ws.revision
          if (revision === ws.revision) continue
          ws.revision = revision
          for (const f of ws.feeds.values()) this.#markDirty(f, 'change')
        }
        // Only once every workspace was looked at: a read failing half-way leaves the change to
        // the next poll, instead of marking it seen for workspaces nobody checked.
        this.#rulesRevision = poll.rules
      }
    } catch (e) {
      this.#log.debug({ err: e }, 'feed service: revision poll failed')
    } finally {
      this.#polling = false
    }
    const now = Date.now()
    const due: FeedFetch[] = []
    for (const ws of this.#workspaces.values()) {
      for (const f of ws.feeds.values()) {
        if (f.wanted && f.fetchedAt < now - this.#idleMs && f.building === null) this.#release(ws, f)
        if (f.snapshot === undefined) continue
        if (f.dirty || f.building !== null) void this.#catchUp(f)
        this.#metrics?.setAge(ws.id, f.feedId, (now - f.snapshot.builtAt) / 1000)
        if (f.fetchedAt - f.recordedAt >= RECORD_MS) due.push({ workspaceId: ws.id, listId: f.feedId, at: f.fetchedAt })
      }
    }
    if (due.length > 0) {
      void this.#fetches.record(due, now, (d) => {
        const f = this.#workspaces.get(d.workspaceId)?.feeds.get(d.listId)
        if (f !== undefined) f.recordedAt = Math.max(f.recordedAt, d.at)
      })
    }
  }

  /** A feed nobody asked for in idleMs: its snapshot goes, and its next request builds it afresh. */
  #release (ws: WorkspaceState, f: FeedState): void {
    f.wanted = false
    this.#clearTimer(f)
    f.snapshot = undefined
    f.next = null
    for (const l of this.#swapListeners) l(ws.id, f.feedId, null)
    f.caches = undefined
    f.builtFrom = ''
    f.dirty = true
    f.reason = 'demand'
    f.failures = 0
    f.retryAt = 0
    f.shards.clear()
    this.#metrics?.removeFeed(ws.id, f.feedId)
  }

  /** Workspaces and lists from the catalog, when its view changed: feeds appear, change and disappear with them. */
  #applyAdmin (): void {
    const view = this.#catalog.view
    if (view === null || view === this.#adminView) return
    this.#adminView = view
    syncAdmin(view, {
      workspaces: this.#workspaces,
      workspace: (id) => this.#workspace(id),
      dropWorkspace: (ws) => { this.#dropWorkspace(ws) },
      dropFeed: (ws, f) => { this.#dropFeed(ws, f) },
      markDirty: (f, reason) => { this.#markDirty(f, reason) },
      tick: (f) => { this.#tick(f) },
    })
  }

  #dropWorkspace (ws: WorkspaceState): void {
    for (const f of ws.feeds.values()) this.#dropFeed(ws, f)
    this.#workspaces.delete(ws.id)
  }

  #dropFeed (ws: WorkspaceState, f: FeedState): void {
    this.#clearTimer(f)
    f.next = null
    f.missing = f.feedId !== WORKSPACE_FEED
    ws.feeds.delete(f.feedId)
    this.#lastModified.forget(ws.id, f.feedId)
    this.#metrics?.removeFeed(ws.id, f.feedId)
  }

  #markDirty (f: FeedState, reason: BuildReason): void {
    f.dirty = true
    f.reason = reason
    this.#tick(f)
  }

  #clearTimer (f: FeedState): void {
    if (f.timer !== null) clearTimeout(f.timer)
    f.timer = null
    f.timerAt = Infinity
  }

  /**
   * Swaps in the successor whose time came, starts a build when one is due, and arms the feed's
   * timer for whichever of the two comes next.
   */
  #tick (f: FeedState): void {
    if (this.#stopped || f.missing || !f.wanted) return
    this.#promote(f)
    const now = Date.now()
    let due = Infinity
    if (f.building === null && this.#geo !== null) {
      const newest = f.next?.snapshot ?? f.snapshot
      // The successor of the newest snapshot is built ahead of its first lapse (rebuild-schedule.ts).
      const renewAt = newest === undefined ? Infinity : Math.max(newest.expiresAt - leadOf(f.buildMs), f.retryAt)
      const changeAt = newest === undefined ? Math.max(now, f.retryAt) : f.dirty ? Math.max(nextRebuildAt(f.lastStart, this.#config.feedRebuildMs), f.retryAt) : Infinity
      due = Math.min(renewAt, changeAt)
      if (due <= now) {
        const renewing = newest !== undefined && renewAt <= now
        const reason: BuildReason = f.failures > 0 ? 'retry' : newest === undefined ? (f.reason === 'start' ? 'start' : 'demand') : changeAt <= now ? f.reason : 'expiry'
        // A renewal is cut at the lapse it replaces the snapshot at; it alone waits for that lapse
        // (a change shows as soon as it is built).
        this.#build(f, now, reason, renewing ? newest.expiresAt : -Infinity, renewing && changeAt > now)
        due = Infinity
      }
    }
    // The current snapshot's lapse is when the successor waiting for it takes over.
    if (f.next !== null && f.snapshot !== undefined) due = Math.min(due, f.snapshot.expiresAt)
    if (due === Infinity || (f.timer !== null && f.timerAt <= due)) return
    this.#clearTimer(f)
    f.timerAt = due
    f.timer = setTimeout(() => {
      f.timer = null
      f.timerAt = Infinity
      this.#tick(f)
    }, Math.min(Math.max(due - now, 0), MAX_TIMER_MS))
    f.timer.unref()
  }

  /**
   * The successor built ahead (`next`) becomes the current snapshot once the current one lapsed:
   * at that instant by the feed's timer, or by the first lookup after it, whichever comes first.
   * A lookup's `now` is its request's arrival: once that is past the lapse, so is the clock, and
   * one that is not (a request that arrived before the lapse) is still answered by the current one.
   */
  #promote (f: FeedState, now = Date.now()): void {
    const n = f.next
    if (n === null) return
    const clock = Date.now()
    if (f.snapshot !== undefined && Math.min(now, clock) < f.snapshot.expiresAt) return
    f.next = null
    // Lapsed as well (the process was paused past both): the build it leads to is due at once.
    if (clock < n.snapshot.expiresAt) this.#swap(f, n)
  }

  /** The swap: one assignment, so a reader sees the old snapshot or the new one, never a mix. */
  #swap (f: FeedState, built: NextSnapshot): void {
    f.snapshot = built.snapshot
    f.next = null
    for (const l of this.#swapListeners) l(f.workspaceId, f.feedId, built.snapshot)
    this.#superseded.built(f, built.versions)
    this.#metrics?.setSnapshot(built.snapshot)
    this.#metrics?.setAge(f.workspaceId, f.feedId, 0)
  }

  /**
   * `cutAt`: rules lapsing by then are left out (a renewal's, the lapse it takes over at); the
   * build also cuts ahead of its own end. `hold`: the snapshot waits for the current one to lapse.
   */
  #build (f: FeedState, now: number, reason: BuildReason, cutAt: number, hold: boolean): void {
    f.lastStart = Date.now()
    f.dirty = false
    this.#generations.set(f, (this.#generations.get(f) ?? 0) + 1)
    let started = performance.now()
    // Expiry builds and first builds wait for nobody: until they finish, the feed cannot answer.
    const first = f.snapshot === undefined
    const urgent = reason === 'expiry' || first
    const decided = performance.now()
    f.building = (async () => {
      // Before taking a slot: the wait (for the stream consumer) holds up no other build.
      if (first && this.#caughtUp !== undefined) await this.#caughtUp()
      await this.#slots.acquire(urgent)
      try {
        started = performance.now()
        return await this.#buildNow(f, now, reason, started, first, cutAt, hold)
      } finally {
        this.#slots.release()
      }
    })().then((built) => {
      f.failures = 0
      f.retryAt = 0
      f.lastError = null
      // A first build's wait for the stream consumer is not counted: no later build has it.
      if (built) f.buildMs = nextEstimate(f.buildMs, performance.now() - (first ? started : decided))
    }, (e: unknown) => {
      f.failures++
      f.lastError = e
      f.dirty = true
      // Backoff doubles from 100 ms up to the rebuild interval; the last good snapshot keeps serving.
      f.retryAt = Date.now() + Math.min(Math.max(this.#config.feedRebuildMs, RETRY_MIN_MS), RETRY_MIN_MS * 2 ** Math.min(f.failures - 1, 16))
      this.#metrics?.observeBuild(reason, 'failed', (performance.now() - started) / 1000)
      this.#log.error({ err: e, workspace: f.workspaceId, feed: f.feedId, failures: f.failures }, 'feed build failed; serving the last good snapshot')
    }).finally(() => {
      f.building = null
      this.#tick(f)
    })
  }

  /** Builds and swaps (or holds as `next`); false when nothing changed and the snapshot stays. */
  async #buildNow (f: FeedState, now: number, reason: BuildReason, started: number, first: boolean, cutAt: number, hold: boolean): Promise<boolean> {
    const ws = this.#workspace(f.workspaceId)
    const gen = this.#generations.get(f)!
    await ws.catchUp(this.#store.rules, now, first || this.#superseded.catchingUp(f, f.building), this.#log)
    const rules = ws.rules.table!
    if (ws.name === null) ws.name = (await this.#store.workspaces.get(ws.id))?.name ?? ws.id
    if (f.feedId !== WORKSPACE_FEED && f.list === null) {
      // Only the admin reload and #discoverList create list feeds, both with their list.
      throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error(`list feed ${f.feedId} without its list`) })
    }
    // Cut ahead of the build's end, so its snapshot is valid once swapped in (rebuild-schedule.ts).
    const selected = performance.now()
    const cutoff = Math.max(Date.now() + cutAfter(f.selectMs, f.buildMs), cutAt)
    const from = `${rules.fingerprint}|${f.list?.updatedAt ?? ''}|${ws.name}|${this.#geoVersion}|${f.shards.counts().join(',')}|${f.list === null ? ws.guardsJson : ''}`
    const newest = f.next?.snapshot ?? f.snapshot
    // Same inputs, and no rule of them lapses between the newest snapshot's cut and this one: the same content.
    if (newest !== undefined && from === f.builtFrom && cutoff < newest.expiresAt) {
      this.#metrics?.observeBuild(reason, 'unchanged', (performance.now() - started) / 1000)
      return false
    }
    // Held for a lapse: its content starts there (Last-Modified, dialect_a's `generated`).
    const current = f.snapshot
    const at = hold && current !== undefined ? Math.max(now, current.expiresAt) : now
    // In slices, while no refresh changes the table: a workspace of millions of rules does not
    // hold up the polls of every other feed.
    const list = f.list
    const def = { workspaceId: ws.id, workspaceName: ws.name, list }
    // Recorded with what it was built from, so no node moves the version back (rebuild-schedule.ts).
    const keeper = this.#lastModified.forBuild({ rulesRevision: ws.rulesRevision, adminRevision: this.#adminView?.revision ?? 0, ...geoBasis(this.#geo), expiryCutoff: cutoff }, {
      onBehind: () => { this.#markDirty(f, 'change') },
      onStale: () => { this.#restamp(f, gen) },
    })
    const build = (targets: FeedTargets, special?: 'detect' | 'drop'): Promise<BuildResult> => buildSnapshot(def, targets, {
      tasks: this.#pool,
      lastModified: keeper,
      now: at,
      shards: f.shards.counts(),
      ...(special !== undefined ? { special } : {}),
      ...(f.caches !== undefined ? { caches: f.caches } : {}),
      ...(this.#gzipLevel !== undefined ? { gzipLevel: this.#gzipLevel } : {}),
    })
    const settings = list === null ? ws.guards : list.defaults.guards
    const released = hasGuards(settings) ? undefined : f.guard.reset()
    if (released !== undefined) this.#guardState(f, released)
    const result = hasGuards(settings)
      ? await guardedBuild({ guard: f.guard, settings, list, meta: metaOf(def), now: at, cutoff, read: (fn) => ws.rules.read(fn), compute: (t) => this.#pool.compute(t), build, shards: f.shards.counts(), onState: (s) => { this.#guardState(f, s) }, restore: () => this.#store.feedVersions.loadPublished({ workspaceId: f.workspaceId, listId: f.feedId }), geo: this.#geo ?? undefined })
      : await build(await ws.rules.read((table) => runSliced(feedTargets(table, list, cutoff))))
    f.selectMs = nextEstimate(f.selectMs, performance.now() - selected)
    const built: NextSnapshot = { snapshot: result.snapshot, versions: keeper.built()! }
    f.caches = result.caches
    f.builtFrom = from
    // A renewal done before the lapse it is for waits for it; anything else goes in now (a
    // change, or a renewal late enough that the current snapshot lapsed meanwhile).
    if (hold && f.snapshot !== undefined && Date.now() < f.snapshot.expiresAt) f.next = built
    else this.#swap(f, built)
    if (result.invalid > 0) this.#log.warn({ workspace: ws.id, feed: f.feedId, invalid: result.invalid }, 'feed: unreadable rule targets left out')
    this.#metrics?.observeBuild(reason, 'built', (performance.now() - started) / 1000)
    return true
  }

  /** A guard's new state: logged, counted in /metrics, and recorded with the list (guards.ts). */
  #guardState (f: FeedState, state: PublishState): void {
    if (state.held !== null) this.#log.warn({ workspace: f.workspaceId, feed: f.feedId, guards: state.held.guards, digest: state.held.digest }, 'feed build held by a publish guard')
    let held = 0
    for (const ws of this.#workspaces.values()) for (const g of ws.feeds.values()) if (g.guard.state.held !== null) held++
    this.#metrics?.setHeld?.(held)
    if (f.feedId !== WORKSPACE_FEED) this.#store.lists.setPublishState(f.feedId, state).catch((e: unknown) => { this.#log.warn({ err: e, feed: f.feedId }, 'publish state not recorded') })
    persistGuard(f.guard, this.#store.feedVersions, { workspaceId: f.workspaceId, listId: f.feedId }, state, Date.now()).catch((e: unknown) => { this.#log.warn({ err: e, feed: f.feedId }, 'published rules not recorded') })
  }
}
