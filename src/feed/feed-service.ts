/**
 * Keeps the snapshots of the feeds in use built and fresh, and answers the HTTP side from memory.
 * This module is the service's face (what src/http and src/main call) and its wiring; the work is
 * in three parts, each with one concern, over one FeedRegistry of per-feed state (feed-state.ts):
 *
 *   catalog.ts ──onPoll──► FeedSync (feed-sync.ts)            workspaces, lists, rules revisions, demand
 *                              │ markDirty / tick / publish
 *                              ▼
 *                          FeedScheduler (feed-scheduler.ts)  timers, lapses, the swap, onSwap
 *                              │ build      ▲ swap / markDirty / restamp / tick (BuildHooks)
 *                              ▼            │
 *                          FeedBuilder (feed-builder.ts)      slots, rules caught up, guards, render
 *
 * Which feeds are built (DECISIONS §6, README "Decisions beyond the spec"): a feed is built on its
 * first request, at once, with every signal acknowledged before that request (so a new user's
 * first fetch shows their first signal), and kept fresh while it is served. A feed not served for
 * an hour is let go: its snapshot is dropped and the next request builds it again. When a feed is
 * served is recorded on its feed-version records, at most once every few minutes, so that a
 * restart builds the feeds served in the hour before it ahead of reporting ready, and leaves the
 * others (a workspace's hundreds of unpolled lists) to their first request.
 *
 * `getSnapshot` is synchronous and never returns a snapshot past its expiresAt: it returns the
 * successor built ahead when there is one, else null and starts the rebuild, which
 * `awaitSnapshot` waits for.
 */
import { ThreatfeedError, isThreatfeedError } from '../errors.js'
import type { GeoIndex } from '../geo/geo-index.js'
import type { Logger } from '../log.js'
import type { Store } from '../store/types.js'
import { StoreCatalog, type PolledCatalog } from './catalog.js'
import { feedHoldOf, type FeedHold } from './explain.js'
import { FeedBuilder, type FeedPoolLike } from './feed-builder.js'
import { FeedScheduler } from './feed-scheduler.js'
import { FeedRegistry, type FeedState } from './feed-state.js'
import { FeedSync } from './feed-sync.js'
import { FetchRecorder } from './fetch-recorder.js'
import { LastModifiedKeeper } from './last-modified.js'
import type { FeedMetrics } from './metrics.js'
import { awaitShardCount } from './shards.js'
import type { FeedId, FeedSnapshot } from './snapshot-types.js'
import { Supersession } from './supersession.js'
import { copyBasis, pollKey, restoreServedCopy, ServedCopies, type ServedCopyBounds } from './served-copy.js'

export type { FeedPoolLike }

export interface FeedServiceConfig {
  /** Least time between two rebuilds of one feed (THREATFEED_FEED_REBUILD_MS). */
  feedRebuildMs: number
  /** How often the store's revisions are polled (THREATFEED_POLL_MS), when the service polls with a catalog of its own. */
  pollMs: number
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
  /**
   * Bounds of the served copies (served-copy.ts: THREATFEED_SERVED_COPY_BYTES and
   * THREATFEED_SERVED_COPY_FEED_BYTES); absent or a total of 0: no copy is saved or restored.
   */
  servedCopy?: ServedCopyBounds
}

const IDLE_MS = 3_600_000

/**
 * @example
 *   const feeds = new FeedService({ store, pool, config, log, metrics: registerFeedMetrics(metrics), geo })
 *   await feeds.start()
 *   const snapshot = feeds.getSnapshot(workspaceId, '*', Date.now()) ?? await feeds.awaitSnapshot(workspaceId, '*')
 */
export class FeedService {
  readonly #store: Store
  readonly #log: FeedServiceOptions['log']
  readonly #awaitMs: number
  readonly #registry = new FeedRegistry()
  readonly #catalog: PolledCatalog
  /** The catalog this service made for itself (no catalog given), started and stopped with it. */
  readonly #ownCatalog: StoreCatalog | null
  readonly #builder: FeedBuilder
  readonly #scheduler: FeedScheduler
  readonly #sync: FeedSync
  #unsubscribe: (() => void) | null = null
  #started = false
  #ready = false
  #initial: Promise<void> | null = null
  readonly #served: ServedCopies
  readonly #idleMs: number
  #restoring: Promise<void> = Promise.resolve()
  /** True while served copies are read at start: a waiting poll looks again every 25 ms, not only when the build ends. */
  #restoringNow = false

  constructor (opts: FeedServiceOptions) {
    this.#store = opts.store
    this.#log = opts.log
    this.#awaitMs = opts.awaitMs ?? 10_000
    this.#ownCatalog = opts.catalog === undefined ? new StoreCatalog(opts.store, { pollMs: opts.config.pollMs }) : null
    this.#catalog = opts.catalog ?? this.#ownCatalog!
    const lastModified = new LastModifiedKeeper(opts.store.feedVersions, {
      timeoutMs: opts.storeTimeoutMs ?? 2000,
      onStoreError: (e) => { this.#log.warn({ err: e }, 'feed versions unavailable; Last-Modified kept in memory') },
    })
    // Feeds another node switched first (several nodes, supersession.ts).
    const superseded = new Supersession<FeedState>(opts.store.feedVersions, opts.config.feedRebuildMs)
    // The builder calls back into the scheduler, made next: only once a build runs.
    this.#builder = new FeedBuilder({
      store: opts.store,
      pool: opts.pool,
      log: opts.log,
      metrics: opts.metrics,
      gzipLevel: opts.gzipLevel,
      feedRebuildMs: opts.config.feedRebuildMs,
      concurrency: opts.buildConcurrency ?? 2,
      caughtUp: opts.caughtUp,
      registry: this.#registry,
      lastModified,
      superseded,
      adminRevision: () => this.#sync.adminRevision,
      hooks: {
        swap: (f, built) => { this.#scheduler.swap(f, built) },
        markDirty: (f, reason) => { this.#scheduler.markDirty(f, reason) },
        restamp: (f, gen) => { this.#scheduler.restamp(f, gen) },
        tick: (f) => { this.#scheduler.tick(f) },
      },
    })
    this.#scheduler = new FeedScheduler({ builder: this.#builder, feedRebuildMs: opts.config.feedRebuildMs, superseded, metrics: opts.metrics })
    this.#sync = new FeedSync({
      store: opts.store,
      catalog: this.#catalog,
      registry: this.#registry,
      scheduler: this.#scheduler,
      lastModified,
      fetches: new FetchRecorder(opts.store.feedVersions, this.#log),
      metrics: opts.metrics,
      log: opts.log,
      idleMs: opts.idleMs ?? IDLE_MS,
    })
    if (opts.geo !== undefined) this.#builder.installGeo(opts.geo)
    this.#idleMs = opts.idleMs ?? IDLE_MS
    this.#served = new ServedCopies(opts.store, opts.servedCopy ?? { feedBytes: 0, totalBytes: 0 }, opts.log)
    // Each published build leaves its copy: what a restart answers from (served-copy.ts).
    this.#scheduler.onSwap((workspaceId, feedId, snapshot) => {
      const f = this.#registry.feed(workspaceId, feedId)
      if (snapshot !== null && f !== undefined) this.#saveCopy(f, snapshot)
    })
  }

  #saveCopy (f: FeedState, snapshot: FeedSnapshot): void {
    const ws = this.#registry.workspaces.get(f.workspaceId)
    if (ws === undefined || snapshot.restored === true) return
    this.#served.published(snapshot, copyBasis(f.list?.updatedAt ?? null, ws.name ?? snapshot.name, ws.guardsJson), f.polls, Date.now() - this.#idleMs)
  }

  /** Loads workspaces and lists, builds the feeds served in the last idleMs, then polls for changes. */
  async start (): Promise<void> {
    if (this.#started) return
    this.#started = true
    this.#unsubscribe = this.#catalog.onPoll((poll) => { void this.#sync.poll(poll) })
    try {
      if (this.#ownCatalog !== null) await this.#ownCatalog.start()
      else if (this.#catalog.view === null) await this.#catalog.refresh()
      await this.#sync.load()
      // Before the first builds: their rule reads hold the event loop for long stretches, and a
      // copy is worth having before the node listens (main.ts starts HTTP after this resolves).
      this.#restoringNow = true
      this.#restoring = this.#restoreCopies().finally(() => { this.#restoringNow = false })
      await this.#restoring
    } catch (e) {
      // The store is down at start: the next poll retries the load.
      this.#log.warn({ err: e }, 'feed service: store unavailable at start; retrying')
    }
    if (this.#builder.geo !== null) this.#startInitial()
  }

  /** Stops polling and timers; waits for builds in flight. The pool and the store are the caller's. */
  async stop (): Promise<void> {
    await this.#restoring
    this.#scheduler.stop()
    this.#unsubscribe?.()
    this.#ownCatalog?.stop()
    const pending: Promise<void>[] = []
    for (const ws of this.#registry.workspaces.values()) {
      for (const f of ws.feeds.values()) {
        this.#scheduler.clearTimer(f)
        if (f.building !== null) pending.push(f.building)
      }
    }
    await Promise.allSettled(pending)
    await this.#served.flush()
  }

  /**
   * A poll answered from a representation of the feed (at most about once a second per
   * representation and thread: the route throttles): what the feed's served copy keeps.
   */
  notePoll (workspaceId: string, feedId: FeedId, variantKey: string, gzip: boolean, at: number): void {
    const f = this.#registry.feed(workspaceId, feedId)
    if (f === undefined) return
    const k = pollKey(variantKey, gzip)
    const seen = f.polls.get(k)
    if (seen === undefined || seen < at) f.polls.set(k, at)
    // A representation first polled since the copy was saved: the copy gains it now, not at the
    // next change (a feed's first build is published before any poll of it is told).
    if (seen === undefined && f.snapshot !== undefined) this.#saveCopy(f, f.snapshot)
  }

  /** Resolves once the served copies asked for so far are saved (tests). */
  flushServedCopies (): Promise<void> {
    return this.#served.flush()
  }

  /**
   * At start: each feed's served copy that may still be served answers its polls until the
   * feed's first build lands (served-copy.ts). Copies of feeds this node does not know (a list
   * deleted) are left to the total bound's eviction.
   */
  async #restoreCopies (): Promise<void> {
    if (!this.#served.enabled) return
    let entries
    try {
      entries = await this.#served.load()
    } catch (e) {
      this.#log.warn({ err: e }, 'served copies not listed; feeds wait for their first build')
      return
    }
    const started = performance.now()
    let restored = 0
    for (const e of entries) {
      const ws = this.#registry.workspaces.get(e.workspaceId)
      const f = ws?.active === true ? ws.feeds.get(e.listId) : undefined
      if (f === undefined || f.snapshot !== undefined) continue
      try {
        const r = await restoreServedCopy(this.#store, e, Date.now(), this.#log)
        if (r === null) continue
        for (const [k, at] of r.polls) if ((f.polls.get(k) ?? 0) < at) f.polls.set(k, at)
        this.#scheduler.restore(f, r.snapshot)
        restored++
      } catch (err) {
        this.#log.warn({ err, workspace: e.workspaceId, feed: e.listId }, 'served copy not restored')
      }
    }
    this.#log.info({ copies: entries.length, restored, ms: Math.round(performance.now() - started) }, 'served copies restored')
  }

  /** True once a geo index is set and the feeds served in the idleMs before the start are built (for /readyz). */
  ready (): boolean {
    return this.#ready
  }

  /** Replaces the geo index (a reload): every feed is rebuilt within the rebuild interval. */
  setGeo (index: GeoIndex): void {
    this.#builder.installGeo(index)
    if (!this.#started) return
    if (this.#initial === null) {
      this.#startInitial()
      return
    }
    for (const ws of this.#registry.workspaces.values()) for (const f of ws.feeds.values()) this.#scheduler.markDirty(f, 'geo')
  }

  /**
   * The current snapshot of a feed, or null when there is none valid at `now` (not built yet,
   * or past its expiresAt); a build is then under way and awaitSnapshot() waits for it.
   * `feedId` is '*' for the workspace feed, else a list id.
   */
  getSnapshot (workspaceId: string, feedId: FeedId, now = Date.now()): FeedSnapshot | null {
    const feed = this.#registry.known(workspaceId, feedId)
    if (feed === undefined) return null
    feed.fetchedAt = now
    return this.#scheduler.current(feed, now)
  }

  /**
   * The current snapshot, waiting for a build if needed. Rejects with TF_ERR_LIST_NOT_FOUND for a
   * list that does not exist in the workspace, TF_ERR_FEED_UNAVAILABLE (a 500: SPEC §7.2 has no
   * 503) when no valid snapshot could be built in time, TF_ERR_FEED_HELD (503) at once when a
   * publish guard holds the feed's first build.
   */
  async awaitSnapshot (workspaceId: string, feedId: FeedId, now?: number, built = false): Promise<FeedSnapshot> {
    const deadline = Date.now() + this.#awaitMs
    const feed = this.#registry.known(workspaceId, feedId) ?? await this.#discover(workspaceId, feedId)
    feed.fetchedAt = Date.now()
    let overtime = false
    for (;;) {
      const s = this.#scheduler.current(feed, now ?? Date.now(), built)
      if (s !== null) return s
      if (feed.missing) throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
      // Held before it ever published, and no build under way that could change that: waiting
      // would bring nothing until an operator accepts the build (a 503 that says so).
      if (feed.building === null && isThreatfeedError(feed.lastError) && feed.lastError.code === 'TF_ERR_FEED_HELD') throw feed.lastError
      const left = deadline - Date.now()
      if (this.#scheduler.stopped) throw new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: feed.lastError ?? undefined })
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
        const t = setTimeout(resolve, Math.min(left, feed.building === null || (this.#restoringNow && !built) ? 25 : left))
        if (feed.building !== null) void feed.building.finally(() => { clearTimeout(t); resolve() })
      })
      // A caller-given `now` is honoured once; later rounds are about the new snapshot.
      now = undefined
    }
  }

  /** Calls `listener` in the same tick as each snapshot swap or drop (the front-end threads' hook, feed/snapshot-port.ts). */
  onSwap (listener: (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null) => void): () => void {
    return this.#scheduler.onSwap(listener)
  }

  /** What a publish guard holds back of a feed, as explain reports it; undefined when nothing is held. */
  holdOf (workspaceId: string, feedId: FeedId): FeedHold | undefined {
    const held = this.#registry.feed(workspaceId, feedId)?.guard.state.held
    return held == null ? undefined : feedHoldOf(held)
  }

  /** The current snapshot, if one is valid at `now`: no build, and not counted as a poll (explain). */
  peekSnapshot (workspaceId: string, feedId: FeedId, now = Date.now()): FeedSnapshot | null {
    const f = this.#registry.feed(workspaceId, feedId)
    if (f === undefined) return null
    this.#scheduler.promote(f, now)
    const s = f.snapshot
    return s !== undefined && now < s.expiresAt ? s : null
  }

  /** A snapshot holding the shards of `of` (shards.ts): a new count is built at once, unless it evicts another. */
  async awaitShards (workspaceId: string, feedId: FeedId, of: number): Promise<FeedSnapshot> {
    const feed = this.#registry.known(workspaceId, feedId) ?? await this.#discover(workspaceId, feedId)
    if (feed.shards.ask(of) === 'new') feed.lastStart = -Infinity
    this.#scheduler.markDirty(feed, 'change')
    return awaitShardCount(of, () => this.awaitSnapshot(workspaceId, feedId), () => feed.building, this.#awaitMs)
  }

  /**
   * A poll's tag matched nothing in `snapshot`: when another node recorded newer content, the
   * snapshot this node builds of it (the client may hold it already); else the current one.
   */
  async fresher (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot): Promise<FeedSnapshot> {
    const f = this.#registry.known(workspaceId, feedId)
    if (f?.snapshot === snapshot) await this.#scheduler.catchUp(f)
    return this.awaitSnapshot(workspaceId, feedId)
  }

  /** A list created since the last admin reload (TF_ERR_LIST_NOT_FOUND when it is no list of the workspace). */
  #discover (workspaceId: string, listId: string): Promise<FeedState> {
    return this.#registry.discover(this.#store.lists, workspaceId, listId)
  }

  #startInitial (): void {
    this.#initial = (async () => {
      const builds: Promise<void>[] = []
      for (const ws of this.#registry.workspaces.values()) {
        for (const f of ws.feeds.values()) {
          this.#scheduler.tick(f)
          if (f.building !== null) builds.push(f.building)
        }
      }
      await Promise.allSettled(builds)
      this.#ready = true
      this.#log.info({ feeds: builds.length }, 'feed snapshots built')
    })()
  }
}
