/**
 * One feed's build, from the decision to run it to its snapshot: the build slot (slots.ts), the
 * wait for the stream consumer before a first build, the workspace's rules caught up, the publish
 * guards, the render in the pool, and on failure the backoff. What a finished build becomes — swapped
 * in, or held as the feed's `next` until the current snapshot lapses — and when the next one runs
 * are the scheduler's (feed-scheduler.ts), called back through BuildHooks.
 *
 * Store outages: each workspace's rules are kept as last fetched, and a build that cannot reach
 * the store rebuilds from them, filtered by expiry at build time — so feeds keep answering and a
 * rule still disappears at its expiry (chosen over keeping per-rule networks in the snapshot: the
 * rules are far smaller, and the build path stays the one path). Last-Modified falls back to memory
 * too (last-modified.ts).
 *
 * A build is skipped when its inputs (rules fingerprint, list, workspace name, geo version, shard
 * counts, guards) are those of the newest snapshot and no rule of them lapses before the cut: the
 * same content would come out.
 */
import { ThreatfeedError, isThreatfeedError } from '../errors.js'
import type { GeoIndex, GeoIndexData } from '../geo/geo-index.js'
import type { Logger } from '../log.js'
import type { PublishState, Store } from '../store/types.js'
import { buildSnapshot, feedTargets, metaOf, type BuildResult, type FeedTargets, type FeedTasks } from './build-snapshot.js'
import type { FeedRegistry, FeedState, NextSnapshot } from './feed-state.js'
import { hasGuards } from './guards.js'
import { guardedBuild } from './guards-run.js'
import { persistGuard } from './guards-persist.js'
import type { LastModifiedKeeper } from './last-modified.js'
import type { BuildReason, FeedMetrics } from './metrics.js'
import { cutAfter, geoBasis, nextEstimate } from './rebuild-schedule.js'
import { runSliced } from './slices.js'
import { Slots } from './slots.js'
import { WORKSPACE_FEED } from './snapshot-types.js'
import type { Supersession } from './supersession.js'

/** The pool as the service uses it (src/pool/pool.ts FeedPool fits). */
export interface FeedPoolLike extends FeedTasks {
  setGeo (data: GeoIndexData): void
}

/** What a build calls back into the scheduler for (feed-scheduler.ts implements them). */
export interface BuildHooks {
  /** The built snapshot goes in now. */
  swap (f: FeedState, built: NextSnapshot): void
  /** A trigger the snapshot under way does not reflect (the store's versions moved past it). */
  markDirty (f: FeedState, reason: BuildReason): void
  /** Build `gen` served a version the store recorded otherwise (last-modified.ts onStale). */
  restamp (f: FeedState, gen: number): void
  /** After each build, failed or not: what is due next. */
  tick (f: FeedState): void
}

export interface FeedBuilderOptions {
  readonly store: Store
  readonly pool: FeedPoolLike
  readonly log: Pick<Logger, 'warn' | 'error'>
  readonly metrics: FeedMetrics | undefined
  readonly gzipLevel: number | undefined
  /** Least time between two rebuilds of one feed: the ceiling of the failure backoff. */
  readonly feedRebuildMs: number
  /** Builds run at once. */
  readonly concurrency: number
  /** Resolves once the signals acknowledged so far are applied; a first build waits for it. */
  readonly caughtUp: (() => Promise<unknown>) | undefined
  readonly registry: FeedRegistry
  readonly lastModified: LastModifiedKeeper
  readonly superseded: Supersession<FeedState>
  /** The catalog revision the feeds reflect (recorded with each version). */
  readonly adminRevision: () => number
  readonly hooks: BuildHooks
}

const RETRY_MIN_MS = 100

export class FeedBuilder {
  readonly #o: FeedBuilderOptions
  readonly #slots: Slots
  /** Builds started per feed: which build a late store answer is about (FeedScheduler#restamp). */
  readonly #generations = new WeakMap<FeedState, number>()
  #geo: GeoIndex | null = null
  #geoVersion = 0

  constructor (options: FeedBuilderOptions) {
    this.#o = options
    this.#slots = new Slots(options.concurrency)
  }

  /** The geo index builds use; null until one is set (no build runs before). */
  get geo (): GeoIndex | null {
    return this.#geo
  }

  /** Replaces the geo index, in the pool's workers too; a build after it differs from one before. */
  installGeo (index: GeoIndex): void {
    this.#geo = index
    this.#geoVersion++
    this.#o.pool.setGeo(index.toTransferable())
  }

  /** The number of the feed's latest build. */
  generation (f: FeedState): number {
    return this.#generations.get(f) ?? 0
  }

  /**
   * Starts a build of `f` (its promise in `f.building`). `cutAt`: rules lapsing by then are left
   * out (a renewal's, the lapse it takes over at); the build also cuts ahead of its own end.
   * `hold`: the snapshot waits for the current one to lapse.
   */
  build (f: FeedState, now: number, reason: BuildReason, cutAt: number, hold: boolean): void {
    f.lastStart = Date.now()
    f.dirty = false
    this.#generations.set(f, this.generation(f) + 1)
    let started = performance.now()
    // Expiry builds and first builds wait for nobody: until they finish, the feed cannot answer.
    const first = f.snapshot === undefined
    const urgent = reason === 'expiry' || first
    const decided = performance.now()
    const caughtUp = this.#o.caughtUp
    f.building = (async () => {
      // Before taking a slot: the wait (for the stream consumer) holds up no other build.
      if (first && caughtUp !== undefined) await caughtUp()
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
      f.retryAt = Date.now() + Math.min(Math.max(this.#o.feedRebuildMs, RETRY_MIN_MS), RETRY_MIN_MS * 2 ** Math.min(f.failures - 1, 16))
      this.#o.metrics?.observeBuild(reason, 'failed', (performance.now() - started) / 1000)
      // A first build held by its guard is no failure: the guard's own line said so (#guardState).
      if (isThreatfeedError(e) && e.code === 'TF_ERR_FEED_HELD') return
      this.#o.log.error({ err: e, workspace: f.workspaceId, feed: f.feedId, failures: f.failures }, 'feed build failed; serving the last good snapshot')
    }).finally(() => {
      f.building = null
      this.#o.hooks.tick(f)
    })
  }

  /** Builds and swaps (or holds as `next`); false when nothing changed and the snapshot stays. */
  async #buildNow (f: FeedState, now: number, reason: BuildReason, started: number, first: boolean, cutAt: number, hold: boolean): Promise<boolean> {
    const { store, pool, metrics, hooks } = this.#o
    const ws = this.#o.registry.workspace(f.workspaceId)
    const gen = this.#generations.get(f)!
    await ws.catchUp(store.rules, now, first || this.#o.superseded.catchingUp(f, f.building), this.#o.log)
    const rules = ws.rules.table!
    if (ws.name === null) ws.name = (await store.workspaces.get(ws.id))?.name ?? ws.id
    if (f.feedId !== WORKSPACE_FEED && f.list === null) {
      // Only the admin reload and FeedRegistry#discover create list feeds, both with their list.
      throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error(`list feed ${f.feedId} without its list`) })
    }
    // Cut ahead of the build's end, so its snapshot is valid once swapped in (rebuild-schedule.ts).
    const selected = performance.now()
    const cutoff = Math.max(Date.now() + cutAfter(f.selectMs, f.buildMs), cutAt)
    const from = `${rules.fingerprint}|${f.list?.updatedAt ?? ''}|${ws.name}|${this.#geoVersion}|${f.shards.counts().join(',')}|${f.list === null ? ws.guardsJson : ''}`
    const newest = f.next?.snapshot ?? f.snapshot
    // Same inputs, and no rule of them lapses between the newest snapshot's cut and this one: the same content.
    if (newest !== undefined && from === f.builtFrom && cutoff < newest.expiresAt) {
      metrics?.observeBuild(reason, 'unchanged', (performance.now() - started) / 1000)
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
    const keeper = this.#o.lastModified.forBuild({ rulesRevision: ws.rulesRevision, adminRevision: this.#o.adminRevision(), ...geoBasis(this.#geo), expiryCutoff: cutoff }, {
      onBehind: () => { hooks.markDirty(f, 'change') },
      onStale: () => { hooks.restamp(f, gen) },
    })
    const gzipLevel = this.#o.gzipLevel
    const build = (targets: FeedTargets, special?: 'detect' | 'drop'): Promise<BuildResult> => buildSnapshot(def, targets, {
      tasks: pool,
      lastModified: keeper,
      now: at,
      shards: f.shards.counts(),
      ...(special !== undefined ? { special } : {}),
      ...(f.caches !== undefined ? { caches: f.caches } : {}),
      ...(gzipLevel !== undefined ? { gzipLevel } : {}),
    })
    const settings = list === null ? ws.guards : list.defaults.guards
    const released = hasGuards(settings) ? undefined : f.guard.reset()
    if (released !== undefined) this.#guardState(f, released)
    const result = hasGuards(settings)
      ? await guardedBuild({ workspaceId: f.workspaceId, guard: f.guard, settings, list, meta: metaOf(def), now: at, cutoff, read: (fn) => ws.rules.read(fn), compute: (t) => pool.compute(t), build, shards: f.shards.counts(), onState: (s) => { this.#guardState(f, s) }, restore: () => store.feedVersions.loadPublished({ workspaceId: f.workspaceId, listId: f.feedId }), geo: this.#geo ?? undefined })
      : await build(await ws.rules.read((table) => runSliced(feedTargets(table, list, cutoff))))
    f.selectMs = nextEstimate(f.selectMs, performance.now() - selected)
    const built: NextSnapshot = { snapshot: result.snapshot, versions: keeper.built()! }
    f.caches = result.caches
    f.builtFrom = from
    // A renewal done before the lapse it is for waits for it; anything else goes in now (a
    // change, or a renewal late enough that the current snapshot lapsed meanwhile).
    if (hold && f.snapshot !== undefined && Date.now() < f.snapshot.expiresAt) f.next = built
    else hooks.swap(f, built)
    if (result.invalid > 0) this.#o.log.warn({ workspace: ws.id, feed: f.feedId, invalid: result.invalid }, 'feed: unreadable rule targets left out')
    metrics?.observeBuild(reason, 'built', (performance.now() - started) / 1000)
    return true
  }

  /** A guard's new state: logged, counted in /metrics, and recorded with the list (guards.ts). */
  #guardState (f: FeedState, state: PublishState): void {
    const { store, log } = this.#o
    if (state.held !== null) log.warn({ workspace: f.workspaceId, feed: f.feedId, guards: state.held.guards, digest: state.held.digest }, 'feed build held by a publish guard')
    this.#o.metrics?.setHeld?.(this.#o.registry.held())
    if (f.feedId !== WORKSPACE_FEED) store.lists.setPublishState(f.feedId, state).catch((e: unknown) => { log.warn({ err: e, feed: f.feedId }, 'publish state not recorded') })
    persistGuard(f.guard, store.feedVersions, { workspaceId: f.workspaceId, listId: f.feedId }, state, Date.now()).catch((e: unknown) => { log.warn({ err: e, feed: f.feedId }, 'published rules not recorded') })
  }
}
