/**
 * `{list}` of GET /v1/threat/feeds/{list} → the access-rules list (SPEC §4.4, DECISIONS §2, §4).
 *
 * - By UUID first, then by name, always within the caller's workspace: another workspace's list
 *   answers 404 exactly like a list that does not exist, so ids cannot be probed.
 * - A name held by several lists is 409 (names need not be unique; address the list by UUID).
 *
 * A feed poll must not touch the store, so every list lives in memory, indexed per workspace,
 * from the catalog (feed/catalog.ts) and again whenever its view changes (the Authenticator does
 * the same for keys): a list created, renamed or deleted from the CLI in another process is seen
 * within one poll interval (DECISIONS §1: 1 s). During a store outage the last index keeps
 * answering.
 */
import { ThreatfeedError } from '../errors.js'
import type { AccessList } from '../store/types.js'
import { StoreCatalog, type CatalogReader, type CatalogStore, type CatalogView } from '../feed/catalog.js'

interface WorkspaceLists {
  readonly byId: ReadonlyMap<string, AccessList>
  readonly byName: ReadonlyMap<string, readonly AccessList[]>
}

/** Every list, per workspace. Built once per reload, never mutated. */
export type ListIndex = ReadonlyMap<string, WorkspaceLists>

const EMPTY: WorkspaceLists = { byId: new Map(), byName: new Map() }
const UUID_LENGTH = 36

/**
 * Indexes lists by workspace, id and name.
 *
 * @example
 *   const index = indexLists(await store.lists.list())
 */
export function indexLists (lists: readonly AccessList[]): ListIndex {
  const index = new Map<string, { byId: Map<string, AccessList>, byName: Map<string, AccessList[]> }>()
  for (const list of lists) {
    let ws = index.get(list.workspaceId)
    if (ws === undefined) {
      ws = { byId: new Map(), byName: new Map() }
      index.set(list.workspaceId, ws)
    }
    ws.byId.set(list.id, list)
    const named = ws.byName.get(list.name)
    if (named === undefined) ws.byName.set(list.name, [list])
    else named.push(list)
  }
  return index
}

/**
 * Decodes the raw path segment (uWS hands it over percent-encoded); null when malformed, which
 * the caller answers as 404 since no list can have that name.
 */
export function decodeListRef (raw: string): string | null {
  if (!raw.includes('%')) return raw
  try {
    return decodeURIComponent(raw)
  } catch {
    return null
  }
}

/**
 * Finds the list `ref` (UUID or name, already decoded) of one workspace. Throws
 * TF_ERR_LIST_NOT_FOUND (404) or TF_ERR_LIST_AMBIGUOUS (409).
 *
 * @example
 *   resolveList(index, principal.workspace.id, 'tor-exits') // AccessList
 */
export function resolveList (index: ListIndex, workspaceId: string, ref: string): AccessList {
  const ws = index.get(workspaceId) ?? EMPTY
  // Ids are lowercase UUIDs; a client may well send one in capitals.
  const byId = ws.byId.get(ref) ?? (ref.length === UUID_LENGTH ? ws.byId.get(ref.toLowerCase()) : undefined)
  if (byId !== undefined) return byId
  const named = ws.byName.get(ref)
  if (named === undefined) throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
  if (named.length > 1) {
    throw new ThreatfeedError('TF_ERR_LIST_AMBIGUOUS', [], { details: { name: ref, matches: named.length } })
  }
  return named[0]!
}

export interface ListDirectoryOptions {
  /** How often a catalog of its own (given a store) polls the admin revision; a failed first load is retried as often. */
  readonly pollMs: number
  /** Longest wait of resolveLoaded() for a first load (default 10 s, as long as a feed build may take). */
  readonly awaitMs?: number
  /** Called when a reload fails; the previous index keeps serving. */
  readonly onError?: (e: unknown) => void
}

/**
 * The in-memory list index over the catalog.
 *
 * @example
 *   const lists = new ListDirectory(catalog, { pollMs: 250 })
 *   await lists.start()
 *   const list = lists.resolve(workspaceId, 'tor-exits')
 */
export class ListDirectory {
  readonly #catalog: CatalogReader
  /** The catalog this directory made for itself (given a store), started and stopped with it. */
  readonly #own: StoreCatalog | null
  readonly #pollMs: number
  readonly #awaitMs: number
  /** The view #index was built from. */
  #view: CatalogView | null = null
  #index: ListIndex = new Map()

  /** `source`: the shared catalog, or a store to poll every `pollMs` with a catalog of its own. */
  constructor (source: CatalogReader | CatalogStore, options: ListDirectoryOptions) {
    this.#own = 'revisions' in source ? new StoreCatalog(source, { pollMs: options.pollMs, onError: options.onError }) : null
    this.#catalog = this.#own ?? source as CatalogReader
    this.#pollMs = options.pollMs
    this.#awaitMs = options.awaitMs ?? 10_000
  }

  /** Resolves after a first load. */
  async start (): Promise<void> {
    if (this.#own !== null) await this.#own.start()
    else if (this.#catalog.view === null) await this.#catalog.refresh()
  }

  stop (): void {
    this.#own?.stop()
  }

  /** True once a first index is in memory: resolve() can answer synchronously. */
  get loaded (): boolean {
    return this.#catalog.view !== null
  }

  /** Reloads when the admin revision moved (or always when forced). Concurrent calls share one load. */
  refresh (force = false): Promise<void> {
    return this.#catalog.refresh(force)
  }

  /** Synchronous lookup; throws 404/409 errors (see resolveList), or TF_ERR_FEED_UNAVAILABLE (500) before the first load. */
  resolve (workspaceId: string, ref: string): AccessList {
    const view = this.#catalog.view
    if (view === null) throw new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE')
    if (view !== this.#view) {
      this.#index = indexLists(view.lists)
      this.#view = view
    }
    return resolveList(this.#index, workspaceId, ref)
  }

  /**
   * resolve() once a first index is loaded: a request that arrives before it waits, retrying a
   * failed load every poll interval, up to awaitMs; then TF_ERR_FEED_UNAVAILABLE (500, SPEC §7.2).
   */
  async resolveLoaded (workspaceId: string, ref: string): Promise<AccessList> {
    const deadline = Date.now() + this.#awaitMs
    let failure: unknown
    while (this.#catalog.view === null) {
      try {
        await this.refresh()
      } catch (e) {
        failure = e
        const left = deadline - Date.now()
        if (left <= 0) throw new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: failure })
        await new Promise((resolve) => setTimeout(resolve, Math.min(left, this.#pollMs)))
      }
    }
    return this.resolve(workspaceId, ref)
  }
}
