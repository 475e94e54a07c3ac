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
 *
 * A store that did not answer in time is not an outage on several nodes: on LMDB it is most often
 * another process holding the write lock (an apply, another node's feed-version write), and the
 * write this build queued still commits once the lock is free — or another node's commits first.
 * Either way the store then holds a version this node does not serve, and nothing would correct
 * it until the content changes (issue 18: one node's Last-Modified 2 s after the others' for the
 * same bytes). So a build that fell back to memory keeps asking (settle(): the pending answer
 * first, then new attempts with backoff, bounded), and when the recorded version of the same
 * content starts in another second than the one served, it takes the recorded one and says so
 * (onStale): the feed re-renders with it, as every other node serves it.
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
  /**
   * After a fallback: the waits before each new attempt (the pending answer is awaited first, for
   * timeoutMs at each step). Default SETTLE_BACKOFF_MS: about 30 s in all, past any lock wait a
   * healthy store has; a longer outage is the store's, and the next build records its version.
   */
  settleBackoffMs?: readonly number[]
}

/** Waits before the attempts of settle(), in ms. */
const SETTLE_BACKOFF_MS: readonly number[] = [250, 500, 1000, 2000, 4000, 8000, 16_000]

/** What a build's keeper tells its feed (forBuild). */
export interface BuildHooks {
  /** The store holds a version built from a newer basis: rebuild at the next boundary. */
  onBehind: () => void
  /**
   * A version this build served from memory (the store did not answer in time) is not the one
   * the store recorded for the same content: re-render with the recorded one, which predict()
   * now answers.
   */
  onStale?: () => void
}

/** The same second: dialect_a's line and Last-Modified show whole seconds. */
function sameSecond (a: number, b: number): boolean {
  return Math.floor(a / 1000) === Math.floor(b / 1000)
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => { setTimeout(resolve, ms).unref() })

function keyString (k: FeedKey): string {
  return `${k.workspaceId}\0${k.listId}\0${k.family}\0${k.action}`
}

export class LastModifiedKeeper {
  readonly #store: FeedVersionStore
  readonly #opts: LastModifiedOptions
  readonly #seen: Map<string, FeedVersion>
  readonly #basis: FeedVersionBasis | undefined
  readonly #hooks: BuildHooks | undefined
  readonly #built = new Map<string, { key: FeedKey, contentHash: string }>()

  constructor (store: FeedVersionStore, opts: LastModifiedOptions, shared?: { seen: Map<string, FeedVersion>, basis: FeedVersionBasis, hooks: BuildHooks }) {
    this.#store = store
    this.#opts = opts
    this.#seen = shared?.seen ?? new Map()
    this.#basis = shared?.basis
    this.#hooks = shared?.hooks
  }

  /**
   * The keeper for one build: the same memory, and every version it records carries `basis`;
   * `hooks` hear that the store holds a version built from a newer basis, or that a version served
   * from memory was not the one recorded.
   */
  forBuild (basis: FeedVersionBasis, hooks: BuildHooks | (() => void)): LastModifiedKeeper {
    return new LastModifiedKeeper(this.#store, this.#opts, { seen: this.#seen, basis, hooks: typeof hooks === 'function' ? { onBehind: hooks } : hooks })
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
    const pending = this.#store.observe(key, contentHash, now, this.#basis)
    try {
      return this.#take(id, contentHash, await this.#within(pending))
    } catch (e) {
      this.#opts.onStoreError?.(e)
      const seen = this.#seen.get(id)
      const served: FeedVersion = seen !== undefined && seen.contentHash === contentHash ? seen : { contentHash, since: now }
      this.#seen.set(id, served)
      void this.#settle(key, id, served, now, pending)
      return served
    }
  }

  /** The store's answer, or a rejection after timeoutMs. */
  async #within (answer: Promise<FeedVersion>): Promise<FeedVersion> {
    let timer: NodeJS.Timeout | undefined
    try {
      return await Promise.race([
        answer,
        new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`feed version store did not answer within ${this.#opts.timeoutMs} ms`)), this.#opts.timeoutMs)
          timer.unref()
        }),
      ])
    } finally {
      clearTimeout(timer)
    }
  }

  /** The version a build serves for `contentHash`, given the store's answer `v`. */
  #take (id: string, contentHash: string, v: FeedVersion): FeedVersion {
    if (v.contentHash !== contentHash) {
      // A newer build is recorded: serve this content with its time until the rebuild.
      this.#hooks?.onBehind()
      return { contentHash, since: v.since }
    }
    this.#seen.set(id, v)
    return v
  }

  /**
   * After a fallback to memory: the store's version of the content `served` stands for, once it
   * answers — the pending answer first (on LMDB the queued write commits when the lock is free),
   * then new attempts after each backoff. A recorded version in another second than the one
   * served replaces it (onStale); a newer content recorded meanwhile is onBehind's. Nothing
   * happens when a later build already moved this key on (the memory holds something else).
   */
  async #settle (key: FeedKey, id: string, served: FeedVersion, now: number, pending: Promise<FeedVersion>): Promise<void> {
    // Whether the answer awaited failed (asked again) or is still to come (waited for again: a
    // second write queued behind the first would only lengthen the queue).
    let failed = false
    const watch = (p: Promise<FeedVersion>): Promise<FeedVersion> => {
      failed = false
      p.catch(() => { failed = true })
      return p
    }
    let answer = watch(pending)
    for (const wait of this.#opts.settleBackoffMs ?? SETTLE_BACKOFF_MS) {
      let v: FeedVersion
      try {
        v = await this.#within(answer)
      } catch {
        await sleep(wait)
        if (failed) answer = watch(this.#store.observe(key, served.contentHash, now, this.#basis))
        continue
      }
      if (this.#seen.get(id) !== served) return
      if (v.contentHash !== served.contentHash) {
        this.#hooks?.onBehind()
        return
      }
      this.#seen.set(id, v)
      if (!sameSecond(v.since, served.since)) this.#hooks?.onStale?.()
      return
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
