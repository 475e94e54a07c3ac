/**
 * Several nodes (issue 18): a node whose snapshot of a feed is superseded — another node recorded,
 * for one of the snapshot's keys, other content built from a newer basis — does not keep serving
 * it until its next boundary. Polls that reach it wait for the build that replaces it: the build
 * under way, or a catch-up build started at once from freshly read rules (at most one per rebuild
 * interval per feed, outside the boundaries; it reproduces a version the fleet already published,
 * so the fleet still changes content at most once per interval). A poller hopping from a node that
 * switched to one that had not is then answered the same content — a 304 for the tag it holds —
 * instead of the old body and, on the hop after, the new one again.
 *
 * A node looks at the records on each poll of the store for the feeds where another node may have
 * switched first (a change pending here, or a build under way), and when a poll's tag matches
 * nothing here (the client may hold content from another node). Only then: the steady poll path
 * reads nothing.
 */
import { compareBasis } from '../store/feed-version-record.js'
import type { FeedVersionStore } from '../store/types.js'
import type { BuiltVersions } from './last-modified.js'

/** What catchUp() needs of the feed service, for one feed. */
export interface CatchUpHooks {
  /** The feed's build under way, or null. */
  building (): Promise<void> | null
  /** Starts a build now, outside the boundaries; the build, or null when none could start. */
  rebuildNow (): Promise<void> | null
}

/**
 * @example
 *   const superseded = new Supersession<FeedState>(store.feedVersions, 30_000)
 *   superseded.built(feed, keeper.built()!)            // after each swap
 *   await superseded.catchUp(feed, hooks)              // on a poll, or on a tag matching nothing
 *   superseded.holds(feed, feed.building)              // true: answer after the build
 */
export class Supersession<F extends object> {
  readonly #store: FeedVersionStore
  readonly #intervalMs: number
  readonly #built = new WeakMap<F, BuiltVersions>()
  readonly #checks = new WeakMap<F, Promise<boolean>>()
  readonly #holds = new WeakMap<F, Promise<void>>()
  readonly #catchUps = new WeakMap<F, { at: number, build: Promise<void> }>()

  constructor (store: FeedVersionStore, intervalMs: number) {
    this.#store = store
    this.#intervalMs = intervalMs
  }

  /** What the feed's current snapshot was built from and recorded (LastModifiedKeeper#built). */
  built (feed: F, versions: BuiltVersions): void {
    this.#built.set(feed, versions)
  }

  /**
   * Whether the store holds, for a key of the feed's snapshot, other content from a newer basis.
   * One read per key; concurrent asks share it. A store that fails answers false: the snapshot
   * keeps serving, as during any outage.
   */
  behind (feed: F): Promise<boolean> {
    const pending = this.#checks.get(feed)
    if (pending !== undefined) return pending
    const built = this.#built.get(feed)
    if (built === undefined) return Promise.resolve(false)
    const now = Date.now()
    const check = Promise.all([...built.keys.values()].map(async ({ key, contentHash }) => {
      const r = await this.#store.record(key)
      // Content whose run starts later (a successor built ahead of a lapse, rebuild-schedule.ts)
      // is served nowhere yet: this node is not behind for it.
      return r !== null && r.contentHash !== contentHash && r.basis !== null && compareBasis(r.basis, built.basis) > 0 && r.since <= now
    })).then((behind) => behind.includes(true), () => false).finally(() => { this.#checks.delete(feed) })
    this.#checks.set(feed, check)
    return check
  }

  /**
   * When the feed is behind: its polls wait for the build under way, or for a catch-up build
   * started now (none when one ran within the interval: a node that cannot reproduce the newer
   * content, say from an older geo database, does not rebuild in a loop).
   */
  async catchUp (feed: F, hooks: CatchUpHooks): Promise<void> {
    if (!await this.behind(feed)) return
    let build = hooks.building()
    if (build === null) {
      const now = Date.now()
      const last = this.#catchUps.get(feed)
      if (last !== undefined && now - last.at < this.#intervalMs) return
      build = hooks.rebuildNow()
      if (build === null) return
      this.#catchUps.set(feed, { at: now, build })
    }
    this.#holds.set(feed, build)
  }

  /** True while the feed's polls wait: `building` (the build under way) replaces a superseded snapshot. */
  holds (feed: F, building: Promise<void> | null): boolean {
    return building !== null && this.#holds.get(feed) === building
  }

  /** True when `building` is a catch-up build: it reads the rules afresh rather than trust the last poll. */
  catchingUp (feed: F, building: Promise<void> | null): boolean {
    return building !== null && this.#catchUps.get(feed)?.build === building
  }
}
