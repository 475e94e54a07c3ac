/**
 * When each feed in use is rebuilt, and which of its snapshots is served: the feed's timer, the
 * triggers that mark it dirty, the successor built ahead of a lapse and swapped in at it, and the
 * swap itself, which the front-end threads hear of (onSwap). The build is FeedBuilder's
 * (feed-builder.ts); this module decides when one starts and what its snapshot becomes.
 *
 * A feed in use is rebuilt (each at most once per THREATFEED_FEED_REBUILD_MS, except at expiry —
 * the interval bounds the CPU a stream of changes costs, SPEC §8) when:
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
 *   catalog poll ──► revisions ──► markDirty(feed) ──► tick(feed) ──► timer at the next boundary of the interval,
 *   (feed-sync.ts)                                ▲                 a lead before the newest snapshot's expiresAt,
 *                                                 │                 or at the current one's (swap in `next`)
 *   expiry timer / current(stale) ────────────────┘                ──► build ──► swap (or hold as `next`) ──► tick
 */
import type { FeedBuilder } from './feed-builder.js'
import type { FeedState, NextSnapshot } from './feed-state.js'
import type { BuildReason, FeedMetrics } from './metrics.js'
import { leadOf, nextRebuildAt } from './rebuild-schedule.js'
import type { FeedId, FeedSnapshot } from './snapshot-types.js'
import type { Supersession } from './supersession.js'

/** Node timers hold at most 2^31 - 1 ms; a later instant is re-armed when reached. */
const MAX_TIMER_MS = 0x7fffffff

export type SwapListener = (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null) => void

export interface FeedSchedulerOptions {
  readonly builder: FeedBuilder
  /** Least time between two rebuilds of one feed (THREATFEED_FEED_REBUILD_MS). */
  readonly feedRebuildMs: number
  readonly superseded: Supersession<FeedState>
  readonly metrics: FeedMetrics | undefined
}

export class FeedScheduler {
  readonly #builder: FeedBuilder
  readonly #feedRebuildMs: number
  readonly #superseded: Supersession<FeedState>
  readonly #metrics: FeedMetrics | undefined
  readonly #swapListeners = new Set<SwapListener>()
  #stopped = false

  constructor (options: FeedSchedulerOptions) {
    this.#builder = options.builder
    this.#feedRebuildMs = options.feedRebuildMs
    this.#superseded = options.superseded
    this.#metrics = options.metrics
  }

  /** True once stop() was called: no build starts, no timer is armed. */
  get stopped (): boolean {
    return this.#stopped
  }

  stop (): void {
    this.#stopped = true
  }

  /** Calls `listener` in the same tick as each snapshot swap or drop (the front-end threads' hook, feed/snapshot-port.ts). */
  onSwap (listener: SwapListener): () => void {
    this.#swapListeners.add(listener)
    return () => { this.#swapListeners.delete(listener) }
  }

  /** Tells the swap listeners a feed's snapshot was dropped (null) or replaced. */
  publish (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null): void {
    for (const l of this.#swapListeners) l(workspaceId, feedId, snapshot)
  }

  /**
   * The snapshot if valid at `now`; otherwise starts what is due and answers the served copy
   * restored at start while it is valid (unless `built`), else null.
   */
  current (f: FeedState, now: number, built = false): FeedSnapshot | null {
    this.promote(f, now)
    const s = f.snapshot
    if (s !== undefined && now < s.expiresAt && !this.#superseded.holds(f, f.building)) return s
    f.wanted = true
    this.tick(f)
    const r = f.restored
    return !built && s === undefined && r !== null && now < r.expiresAt ? r : null
  }

  /** Starts answering from a served copy (a restart), on every thread, until the first build swaps in. */
  restore (f: FeedState, copy: FeedSnapshot): void {
    if (f.snapshot !== undefined || this.#stopped) return
    f.restored = copy
    this.publish(f.workspaceId, f.feedId, copy)
  }

  markDirty (f: FeedState, reason: BuildReason): void {
    f.dirty = true
    f.reason = reason
    this.tick(f)
  }

  clearTimer (f: FeedState): void {
    if (f.timer !== null) clearTimeout(f.timer)
    f.timer = null
    f.timerAt = Infinity
  }

  /**
   * Swaps in the successor whose time came, starts a build when one is due, and arms the feed's
   * timer for whichever of the two comes next.
   */
  tick (f: FeedState): void {
    if (this.#stopped || f.missing || !f.wanted) return
    this.promote(f)
    const now = Date.now()
    let due = Infinity
    if (f.building === null && this.#builder.geo !== null) {
      const newest = f.next?.snapshot ?? f.snapshot
      // The successor of the newest snapshot is built ahead of its first lapse (rebuild-schedule.ts).
      const renewAt = newest === undefined ? Infinity : Math.max(newest.expiresAt - leadOf(f.buildMs), f.retryAt)
      const changeAt = newest === undefined ? Math.max(now, f.retryAt) : f.dirty ? Math.max(nextRebuildAt(f.lastStart, this.#feedRebuildMs), f.retryAt) : Infinity
      due = Math.min(renewAt, changeAt)
      if (due <= now) {
        const renewing = newest !== undefined && renewAt <= now
        const reason: BuildReason = f.failures > 0 ? 'retry' : newest === undefined ? (f.reason === 'start' ? 'start' : 'demand') : changeAt <= now ? f.reason : 'expiry'
        // A renewal is cut at the lapse it replaces the snapshot at; it alone waits for that lapse
        // (a change shows as soon as it is built).
        this.#builder.build(f, now, reason, renewing ? newest.expiresAt : -Infinity, renewing && changeAt > now)
        due = Infinity
      }
    }
    // The current snapshot's lapse is when the successor waiting for it takes over.
    if (f.next !== null && f.snapshot !== undefined) due = Math.min(due, f.snapshot.expiresAt)
    if (due === Infinity || (f.timer !== null && f.timerAt <= due)) return
    this.clearTimer(f)
    f.timerAt = due
    f.timer = setTimeout(() => {
      f.timer = null
      f.timerAt = Infinity
      this.tick(f)
    }, Math.min(Math.max(due - now, 0), MAX_TIMER_MS))
    f.timer.unref()
  }

  /**
   * The successor built ahead (`next`) becomes the current snapshot once the current one lapsed:
   * at that instant by the feed's timer, or by the first lookup after it, whichever comes first.
   * A lookup's `now` is its request's arrival: once that is past the lapse, so is the clock, and
   * one that is not (a request that arrived before the lapse) is still answered by the current one.
   */
  promote (f: FeedState, now = Date.now()): void {
    const n = f.next
    if (n === null) return
    const clock = Date.now()
    if (f.snapshot !== undefined && Math.min(now, clock) < f.snapshot.expiresAt) return
    f.next = null
    // Lapsed as well (the process was paused past both): the build it leads to is due at once.
    if (clock < n.snapshot.expiresAt) this.swap(f, n)
  }

  /** The swap: one assignment, so a reader sees the old snapshot or the new one, never a mix. */
  swap (f: FeedState, built: NextSnapshot): void {
    f.snapshot = built.snapshot
    f.restored = null
    f.next = null
    this.publish(f.workspaceId, f.feedId, built.snapshot)
    this.#superseded.built(f, built.versions)
    this.#metrics?.setSnapshot(built.snapshot)
    this.#metrics?.setAge(f.workspaceId, f.feedId, 0)
  }

  /** Another node may have switched first (supersession.ts): wait for, or start, the build that catches up. */
  catchUp (f: FeedState): Promise<void> {
    return this.#superseded.catchUp(f, {
      building: () => f.building,
      rebuildNow: () => {
        this.#outOfTurn(f)
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
  restamp (f: FeedState, gen: number): void {
    if (this.#builder.generation(f) !== gen || f.snapshot === undefined) return
    if (f.building !== null) {
      // Build `gen` itself, not swapped yet: it swaps the version it served; restamp after it.
      void f.building.finally(() => { this.restamp(f, gen) })
      return
    }
    f.builtFrom = ''
    if (f.dirty) return
    this.#outOfTurn(f)
  }

  /** A build now, outside the boundaries, without moving them: the next change still builds on one. */
  #outOfTurn (f: FeedState): void {
    const last = f.lastStart
    f.dirty = true
    f.lastStart = -Infinity
    this.tick(f)
    f.lastStart = last
  }
}
