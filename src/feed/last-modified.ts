/**
 * Last-Modified from feed version records (DECISIONS §5): the start of the current content's run
 * per (list, family, action), kept by the store so that every node and every restart agree.
 *
 * During a store outage feeds keep being built from memory (DECISIONS §5), so a version must be
 * answerable without the store: the last version seen for each key is remembered, and a content
 * the store could not record starts its run now, in memory. When the store is back, the next
 * build records it there (with that build's time: the one place where two nodes may disagree, by
 * the length of the outage at most).
 *
 * Several nodes: each build records what it was built from (forBuild), and the store keeps the
 * version of the newest basis. A build that finds a newer one recorded serves its content with
 * that version's time until it catches up, and is told so (onBehind) to rebuild at the next
 * boundary.
 */
import type { FeedKey, FeedVersion, FeedVersionBasis, FeedVersionStore } from '../store/types.js'

/** What one build recorded: its basis and, per key, the content it built (supersession.ts compares them with the store). */
export interface BuiltVersions {
  readonly basis: FeedVersionBasis
  readonly keys: ReadonlyMap<string, { readonly key: FeedKey, readonly contentHash: string }>
}

export interface LastModifiedOptions {
  /** Longest wait for the store before falling back to memory (a store outage must not stall builds). */
  timeoutMs: number
  onStoreError?: (e: unknown) => void
}

function keyString (k: FeedKey): string {
  return `${k.workspaceId}\0${k.listId}\0${k.family}\0${k.action}`
}

export class LastModifiedKeeper {
  readonly #store: FeedVersionStore
  readonly #opts: LastModifiedOptions
  readonly #seen: Map<string, FeedVersion>
  readonly #basis: FeedVersionBasis | undefined
  readonly #onBehind: (() => void) | undefined
  readonly #built = new Map<string, { key: FeedKey, contentHash: string }>()

  constructor (store: FeedVersionStore, opts: LastModifiedOptions, shared?: { seen: Map<string, FeedVersion>, basis: FeedVersionBasis, onBehind: () => void }) {
    this.#store = store
    this.#opts = opts
    this.#seen = shared?.seen ?? new Map()
    this.#basis = shared?.basis
    this.#onBehind = shared?.onBehind
  }

  /**
   * The keeper for one build: the same memory, and every version it records carries `basis`;
   * `onBehind` hears that the store holds a version built from a newer basis.
   */
  forBuild (basis: FeedVersionBasis, onBehind: () => void): LastModifiedKeeper {
    return new LastModifiedKeeper(this.#store, this.#opts, { seen: this.#seen, basis, onBehind })
  }

  /**
   * The version of `contentHash` under `key`, from the store when it answers in time.
   *
   * @example
   *   const { since } = await keeper.observe({ workspaceId, listId: '*', family: 'v4', action: 'block' }, hash, Date.now())
   */
  async observe (key: FeedKey, contentHash: string, now: number): Promise<FeedVersion> {
    const id = keyString(key)
    if (this.#basis !== undefined) this.#built.set(id, { key, contentHash })
    let timer: NodeJS.Timeout | undefined
    try {
      const v = await Promise.race([
        this.#store.observe(key, contentHash, now, this.#basis),
        new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`feed version store did not answer within ${this.#opts.timeoutMs} ms`)), this.#opts.timeoutMs)
          timer.unref()
        }),
      ])
      if (v.contentHash !== contentHash) {
        // A newer build is recorded: serve this content with its time until the rebuild.
        this.#onBehind?.()
        return { contentHash, since: v.since }
      }
      this.#seen.set(id, v)
      return v
    } catch (e) {
      this.#opts.onStoreError?.(e)
      const seen = this.#seen.get(id)
      if (seen !== undefined && seen.contentHash === contentHash) return seen
      const v: FeedVersion = { contentHash, since: now }
      this.#seen.set(id, v)
      return v
    } finally {
      clearTimeout(timer)
    }
  }

  /**
   * What observe() will most likely answer, from memory and at once: the remembered time when the
   * content is the one seen last, else `now` (a new run). Lets rendering start before the store
   * answers; a build re-renders what depends on the time when the guess was wrong.
   */
  predict (key: FeedKey, contentHash: string, now: number): number {
    const seen = this.#seen.get(keyString(key))
    return seen !== undefined && seen.contentHash === contentHash ? seen.since : now
  }

  /** A build's keeper (forBuild): what it observed, for comparing with the store later; null otherwise. */
  built (): BuiltVersions | null {
    return this.#basis === undefined ? null : { basis: this.#basis, keys: this.#built }
  }

  /** Forgets the versions of a feed that no longer exists. */
  forget (workspaceId: string, listId: string): void {
    const prefix = `${workspaceId}\0${listId}\0`
    for (const k of this.#seen.keys()) if (k.startsWith(prefix)) this.#seen.delete(k)
  }
}
