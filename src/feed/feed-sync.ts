/**
 * Keeps the feed service's set of feeds in step with the catalog and with demand, on each poll of
 * the one catalog (catalog.ts, which polls store.revisions()):
 * - workspaces and lists, when the catalog's view changed (admin-sync.ts): feeds appear, change
 *   and disappear with them;
 * - the rules: only workspaces whose own rules revision moved are marked dirty;
 * - demand: a feed not served for idleMs is let go (its snapshot dropped, rebuilt on its next
 *   request), and when each feed was served is recorded at most every few minutes
 *   (fetch-recorder.ts), so that a restart wants the feeds served in the idleMs before it
 *   (wantRecent) and leaves the others to their first request;
 * - several nodes: a feed with a change pending or a build under way looks for a newer version
 *   another node recorded (supersession.ts, through the scheduler's catchUp).
 */
import type { Logger } from '../log.js'
import type { FeedFetch, Store } from '../store/types.js'
import { syncAdmin } from './admin-sync.js'
import type { CatalogPoll, CatalogView, PolledCatalog } from './catalog.js'
import type { FeedScheduler } from './feed-scheduler.js'
import type { FeedRegistry, FeedState, WorkspaceState } from './feed-state.js'
import { RECORD_MS, type FetchRecorder } from './fetch-recorder.js'
import type { LastModifiedKeeper } from './last-modified.js'
import type { FeedMetrics } from './metrics.js'
import { WORKSPACE_FEED } from './snapshot-types.js'
import { workspaceRevisions } from './workspace-revisions.js'

export interface FeedSyncOptions {
  readonly store: Pick<Store, 'rules' | 'feedVersions'>
  readonly catalog: PolledCatalog
  readonly registry: FeedRegistry
  readonly scheduler: FeedScheduler
  readonly lastModified: LastModifiedKeeper
  readonly fetches: FetchRecorder
  readonly metrics: FeedMetrics | undefined
  readonly log: Pick<Logger, 'debug'>
  /** A feed not served for this long is let go. */
  readonly idleMs: number
}

export class FeedSync {
  readonly #o: FeedSyncOptions
  /** The catalog view the feeds reflect. */
  #adminView: CatalogView | null = null
  #rulesRevision = 0
  #polling = false

  constructor (options: FeedSyncOptions) {
    this.#o = options
  }

  /** The admin revision of the catalog view the feeds reflect (0 before one). */
  get adminRevision (): number {
    return this.#adminView?.revision ?? 0
  }

  /** At start, once the catalog is loaded: its workspaces and lists, and the feeds served in the idleMs before. */
  async load (): Promise<void> {
    this.#rulesRevision = this.#o.catalog.rulesRevision
    this.applyAdmin()
    await this.#wantRecent()
  }

  /** What one catalog poll brings (subscribed with PolledCatalog#onPoll). */
  async poll (poll: CatalogPoll): Promise<void> {
    const { registry, scheduler, metrics } = this.#o
    if (this.#polling || scheduler.stopped) return
    this.#polling = true
    try {
      this.applyAdmin()
      if (!poll.ok) throw poll.error
      if (poll.rules !== this.#rulesRevision) {
        // Only workspaces whose own rules moved: one read, where refetching every
        // workspace's rules cost 0.4–0.8 s of this thread per 100,000 rules (bench/snapshot.ts).
        const revisions = await workspaceRevisions(this.#o.store.rules, [...registry.workspaces.keys()])
        for (const ws of registry.workspaces.values()) {
          const revision = revisions.get(ws.id) ?? ws.revision
          if (revision === ws.revision) continue
          ws.revision = revision
          for (const f of ws.feeds.values()) scheduler.markDirty(f, 'change')
        }
        // Only once every workspace was looked at: a read failing half-way leaves the change to
        // the next poll, instead of marking it seen for workspaces nobody checked.
        this.#rulesRevision = poll.rules
      }
    } catch (e) {
      this.#o.log.debug({ err: e }, 'feed service: revision poll failed')
    } finally {
      this.#polling = false
    }
    const now = Date.now()
    const due: FeedFetch[] = []
    for (const ws of registry.workspaces.values()) {
      for (const f of ws.feeds.values()) {
        if (f.wanted && f.fetchedAt < now - this.#o.idleMs && f.building === null) this.#release(ws, f)
        if (f.snapshot === undefined) continue
        if (f.dirty || f.building !== null) void scheduler.catchUp(f)
        metrics?.setAge(ws.id, f.feedId, (now - f.snapshot.builtAt) / 1000)
        if (f.fetchedAt - f.recordedAt >= RECORD_MS) due.push({ workspaceId: ws.id, listId: f.feedId, at: f.fetchedAt })
      }
    }
    if (due.length > 0) {
      void this.#o.fetches.record(due, now, (d) => {
        const f = registry.feed(d.workspaceId, d.listId)
        if (f !== undefined) f.recordedAt = Math.max(f.recordedAt, d.at)
      })
    }
  }

  /** Workspaces and lists from the catalog, when its view changed: feeds appear, change and disappear with them. */
  applyAdmin (): void {
    const view = this.#o.catalog.view
    if (view === null || view === this.#adminView) return
    this.#adminView = view
    const { registry, scheduler } = this.#o
    syncAdmin(view, {
      workspaces: registry.workspaces,
      workspace: (id) => registry.workspace(id),
      dropWorkspace: (ws) => { this.#dropWorkspace(ws) },
      dropFeed: (ws, f) => { this.#dropFeed(ws, f) },
      // A changed list or workspace (a build accepted, guards changed) may be what a failing or
      // held build lacked: built now, not after the failure backoff (up to the rebuild interval).
      markDirty: (f, reason) => { f.retryAt = 0; scheduler.markDirty(f, reason) },
      tick: (f) => { scheduler.tick(f) },
    })
  }

  /** A feed nobody asked for in idleMs: its snapshot goes, and its next request builds it afresh. */
  #release (ws: WorkspaceState, f: FeedState): void {
    const { scheduler } = this.#o
    f.wanted = false
    scheduler.clearTimer(f)
    f.snapshot = undefined
    f.restored = null
    f.next = null
    scheduler.publish(ws.id, f.feedId, null)
    f.caches = undefined
    f.builtFrom = ''
    f.dirty = true
    f.reason = 'demand'
    f.failures = 0
    f.retryAt = 0
    f.shards.clear()
    this.#o.metrics?.removeFeed(ws.id, f.feedId)
  }

  #dropWorkspace (ws: WorkspaceState): void {
    for (const f of ws.feeds.values()) this.#dropFeed(ws, f)
    this.#o.registry.workspaces.delete(ws.id)
  }

  #dropFeed (ws: WorkspaceState, f: FeedState): void {
    this.#o.scheduler.clearTimer(f)
    f.next = null
    f.restored = null
    f.missing = f.feedId !== WORKSPACE_FEED
    ws.feeds.delete(f.feedId)
    this.#o.lastModified.forget(ws.id, f.feedId)
    this.#o.metrics?.removeFeed(ws.id, f.feedId)
  }

  /** The feeds served within idleMs before the start (as recorded in the store) are wanted. */
  async #wantRecent (): Promise<void> {
    const { registry, store } = this.#o
    for (const fetch of await store.feedVersions.fetchedSince(Date.now() - this.#o.idleMs)) {
      const ws = registry.workspaces.get(fetch.workspaceId)
      // An inactive workspace's keys get 402: nobody can be served its feeds.
      const f = ws?.active === true ? ws.feeds.get(fetch.listId) : undefined
      if (f === undefined) continue
      f.wanted = true
      f.reason = 'start'
      f.fetchedAt = Math.max(f.fetchedAt, fetch.at)
      f.recordedAt = f.fetchedAt
    }
  }
}
