/**
 * The catalog: every workspace, API key and access list, in memory, behind one poller of
 * `store.revisions()` (DECISIONS §1: a change made from the CLI in another process is seen within
 * 1 s). Authentication (http/auth.ts), list resolution (http/list-resolve.ts) and the feed service
 * read the same view, so one admin change costs one reload, not one per reader.
 *
 * A view is immutable and replaced whole (one assignment), so a reader sees the old catalog or
 * the new one, never a mix; readers derive their own indexes from it and rebuild them when the
 * view's identity changes (a pointer compare per request). The view's data is plain
 * structured-cloneable objects, so other threads hold a replica fed over a MessagePort
 * (catalog-port.ts) from this one poller: a revoked key stops working on every thread after one
 * poll and one message.
 *
 *   setInterval(pollMs) ─► refresh() ─► revisions() ─► admin moved? ─► keys + workspaces + lists
 *                                           │                               └─► view = new CatalogView
 *                                           └─► onPoll listeners ({ rules }: the feed service's rebuild trigger)
 */
import type { AccessList, ApiKey, Store, Workspace } from '../store/types.js'

/** What the catalog reads from the store. */
export type CatalogStore = Pick<Store, 'revisions' | 'workspaces' | 'keys' | 'lists'>

/** The catalog as read at one admin revision: plain data, cloneable across threads. */
export interface CatalogData {
  readonly revision: number
  readonly workspaces: readonly Workspace[]
  readonly keys: readonly ApiKey[]
  readonly lists: readonly AccessList[]
}

/** One immutable catalog state. Deleted workspaces and revoked keys are included: readers decide. */
export class CatalogView {
  readonly revision: number
  readonly workspaces: ReadonlyMap<string, Workspace>
  readonly keys: readonly ApiKey[]
  readonly lists: readonly AccessList[]

  constructor (readonly data: CatalogData) {
    this.revision = data.revision
    this.workspaces = new Map(data.workspaces.map((w) => [w.id, w]))
    this.keys = data.keys
    this.lists = data.lists
  }
}

/** What a reader of the catalog needs; the poller below and a thread's replica both offer it. */
export interface CatalogReader {
  /** The latest view; null before a first load. */
  readonly view: CatalogView | null
  /** Re-reads when the admin revision moved (always when forced). Concurrent calls share one load. */
  refresh (force?: boolean): Promise<void>
}

/** What one poll saw: the store's rules revision, or the error that failed it. */
export type CatalogPoll = { readonly ok: true, readonly rules: number } | { readonly ok: false, readonly error: unknown }

/** The catalog with its poll: what the feed service reads (StoreCatalog). */
export interface PolledCatalog extends CatalogReader {
  /** The store's rules revision at the last successful poll (-1 before one). */
  readonly rulesRevision: number
  /** Called after every poll, successful or not; returns the unsubscribe. */
  onPoll (listener: (poll: CatalogPoll) => void): () => void
}

export interface StoreCatalogOptions {
  /** How often the store's revisions are polled (THREATFEED_POLL_MS). */
  readonly pollMs: number
  /** Called when a poll fails; the previous view keeps serving. */
  readonly onError?: (e: unknown) => void
}

/**
 * The catalog kept current by polling the store.
 *
 * @example
 *   const catalog = new StoreCatalog(store, { pollMs: 250 })
 *   await catalog.start()
 *   const auth = new Authenticator(catalog, { pollMs: 250 })
 */
export class StoreCatalog implements PolledCatalog {
  readonly #store: CatalogStore
  readonly #pollMs: number
  readonly #onError: (e: unknown) => void
  readonly #listeners = new Set<(poll: CatalogPoll) => void>()
  readonly #watchers = new Set<(view: CatalogView) => void>()
  #view: CatalogView | null = null
  #rules = -1
  #timer: NodeJS.Timeout | null = null
  #loading: Promise<void> | null = null

  constructor (store: CatalogStore, options: StoreCatalogOptions) {
    this.#store = store
    this.#pollMs = options.pollMs
    this.#onError = options.onError ?? (() => {})
  }

  get view (): CatalogView | null {
    return this.#view
  }

  get rulesRevision (): number {
    return this.#rules
  }

  /** Starts polling, then resolves after a first load (rejects when it fails; the poll retries). */
  async start (): Promise<void> {
    if (this.#timer === null) {
      this.#timer = setInterval(() => { void this.#poll() }, this.#pollMs)
      this.#timer.unref()
    }
    await this.refresh()
  }

  stop (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }

  /** Not called after the refresh() calls of readers: only the poller's. */
  onPoll (listener: (poll: CatalogPoll) => void): () => void {
    this.#listeners.add(listener)
    return () => { this.#listeners.delete(listener) }
  }

  /** Called with each new view, whoever's refresh read it (catalog-port.ts forwards them to threads). */
  onChange (listener: (view: CatalogView) => void): () => void {
    this.#watchers.add(listener)
    return () => { this.#watchers.delete(listener) }
  }

  refresh (force = false): Promise<void> {
    this.#loading ??= this.#load(force).finally(() => { this.#loading = null })
    return this.#loading
  }

  async #load (force: boolean): Promise<void> {
    const { admin, rules } = await this.#store.revisions()
    this.#rules = rules
    if (!force && this.#view !== null && admin === this.#view.revision) return
    // The revision is read before the data: a write in between makes the data newer than the
    // revision recorded, never older, and the next poll reads again.
    const [workspaces, keys, lists] = await Promise.all([this.#store.workspaces.list(), this.#store.keys.list(), this.#store.lists.list()])
    const view = new CatalogView({ revision: admin, workspaces, keys, lists })
    this.#view = view
    for (const watcher of this.#watchers) watcher(view)
  }

  async #poll (): Promise<void> {
    let poll: CatalogPoll
    try {
      await this.refresh()
      poll = { ok: true, rules: this.#rules }
    } catch (e) {
      this.#onError(e)
      poll = { ok: false, error: e }
    }
    for (const listener of this.#listeners) listener(poll)
  }
}
