/**
 * The background housekeeping of a running server: every interval, lapsed rules are swept from
 * the rule store and the signal stream is trimmed to its retention. The store owns the passes
 * (RuleStore#sweepLapsed, StoredSignalStream#trim: each bounded, each safe while other processes
 * do the same); this only schedules them, one pass at a time with a pause in between as long as
 * the pass took, so that housekeeping holds LMDB's one writer at most half the time and ingest's
 * commits interleave. A run ends after `maxRunMs` even with work left (lapses arriving faster
 * than it sweeps, a backlog after downtime): the next run, an interval later, goes on, so runs
 * never follow each other back to back (one soak run lasted 540 s).
 *
 * With a `sweeper` (the embedded store's consumer thread) the sweep is not scheduled here: the
 * sweeper sweeps in the transactions it applies records in, and in passes of its own between
 * them (StreamConsumer#setSweep), from start() to stop(); the runs here only trim. Swept from the
 * server's thread, a pass's JavaScript held up every request for its length and each pass waited
 * for the write lock and flushed on its own: at 2,400 lapses/s the runs ended at their bound with
 * work left and ingest's p99 rose 1.66× (bench/NOTES.md, "Sweep: in the consumer's transactions").
 */
import type { HousekeepingCounters, Store } from '../store/types.js'

export interface HousekeeperOptions {
  readonly store: Store
  /** Between the end of one run and the start of the next. */
  readonly intervalMs: number
  /** Records accepted longer ago than this (and applied by every consumer) are trimmed. */
  readonly retentionMs: number
  readonly log: HousekeeperLog
  /** Rules (or expiry-log references) per sweep pass, records per trim pass. */
  readonly passLimit?: number
  /** A run ends after this long with work left (default: the interval, at most MAX_RUN_MS). */
  readonly maxRunMs?: number
  /** Sweeps in its own transactions instead (Consumer#setSweep): given the pass limit at start(), null at stop(). */
  readonly sweeper?: { setSweep (limit: number | null): void }
}

/** What it logs with (a pino Logger is one). */
export interface HousekeeperLog {
  info (fields: object, msg: string): void
  warn (fields: object, msg: string): void
}

export interface RunResult {
  rulesSwept: number
  tombstonesDropped: number
  staleCleaned: number
  recordsTrimmed: number
}

/** Small enough that a pass takes a few milliseconds of the write lock. */
const DEFAULT_PASS_LIMIT = 2000

/** The longest run by default: at 2,000 references a pass and half the time paused, some
 *  hundreds of thousands of lapses a run. */
const MAX_RUN_MS = 30_000

/** The longest pause between two passes. */
const MAX_PAUSE_MS = 250

/**
 * @example
 *   const housekeeper = new Housekeeper({ store, intervalMs: 60_000, retentionMs: 7 * 86_400_000, log })
 *   housekeeper.start()
 *   await housekeeper.stop()
 */
export class Housekeeper {
  readonly #opts: HousekeeperOptions
  readonly #limit: number
  readonly #maxRunMs: number
  #timer: NodeJS.Timeout | null = null
  #running: Promise<RunResult> | null = null
  #stopped = false
  /** The store's counters as the last run saw them, and when: what the sweeper did since is logged. */
  #seen: HousekeepingCounters
  #seenAt = performance.now()

  constructor (opts: HousekeeperOptions) {
    this.#opts = opts
    this.#limit = opts.passLimit ?? DEFAULT_PASS_LIMIT
    this.#maxRunMs = opts.maxRunMs ?? Math.min(opts.intervalMs, MAX_RUN_MS)
    this.#seen = { ...opts.store.housekeeping }
  }

  /** Runs once now (what lapsed while the server was down goes first), then every interval. */
  start (): void {
    if (this.#stopped || this.#timer !== null || this.#running !== null) return
    this.#opts.sweeper?.setSweep(this.#limit)
    this.#schedule(0)
  }

  /** One run of both, now (waiting for a run under way first). */
  async runOnce (): Promise<RunResult> {
    while (this.#running !== null) await this.#running.catch(() => undefined)
    this.#running = this.#run()
    try {
      return await this.#running
    } finally {
      this.#running = null
    }
  }

  /** No new pass starts; resolves when the one under way has finished. */
  async stop (): Promise<void> {
    this.#stopped = true
    this.#opts.sweeper?.setSweep(null)
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    await this.#running?.catch(() => undefined)
  }

  #schedule (ms: number): void {
    this.#timer = setTimeout(() => {
      this.#timer = null
      this.runOnce().catch(() => undefined).finally(() => {
        if (!this.#stopped) this.#schedule(this.#opts.intervalMs)
      })
    }, ms)
    this.#timer.unref()
  }

  /** Sweep and trim passes taken in turn, so that a sweep with a long way to go (a backlog of
   *  lapses after downtime, or lapses faster than one pass a turn) never holds the trim back. */
  async #run (): Promise<RunResult> {
    const result: RunResult = { rulesSwept: 0, tombstonesDropped: 0, staleCleaned: 0, recordsTrimmed: 0 }
    const { store, log } = this.#opts
    const started = performance.now()
    let sweepPasses = 0
    let trimPasses = 0
    let sweepMore = this.#opts.sweeper === undefined
    let trimMore = true
    let timedOut = false
    while ((sweepMore || trimMore) && !this.#stopped) {
      if (performance.now() - started >= this.#maxRunMs) {
        timedOut = true
        break
      }
      const passStarted = performance.now()
      if (sweepMore) {
        try {
          const pass = await store.rules.sweepLapsed(Date.now(), this.#limit)
          result.rulesSwept += pass.removed
          result.tombstonesDropped += pass.tombstonesDropped
          result.staleCleaned += pass.staleCleaned
          sweepMore = pass.more
          sweepPasses++
        } catch (e) {
          sweepMore = false
          log.warn({ err: e }, 'sweep failed; retrying at the next interval')
        }
      }
      if (trimMore && !this.#stopped) {
        try {
          const pass = await store.stream.trim(Date.now() - this.#opts.retentionMs, this.#limit)
          result.recordsTrimmed += pass.records
          trimMore = pass.more
          trimPasses++
        } catch (e) {
          trimMore = false
          log.warn({ err: e }, 'stream trim failed; retrying at the next interval')
        }
      }
      await pause(Math.min(MAX_PAUSE_MS, performance.now() - passStarted))
    }
    const ms = Math.round(performance.now() - started)
    if (this.#opts.sweeper !== undefined) this.#sweeperDid(result)
    if (result.rulesSwept + result.tombstonesDropped + result.staleCleaned > 0) {
      const sweep = this.#opts.sweeper === undefined ? { passes: sweepPasses, ms } : { passes: this.#sweeperPasses, ms: this.#sweeperMs, by: 'consumer' }
      log.info({ rules: result.rulesSwept, tombstones: result.tombstonesDropped, stale: result.staleCleaned, ...sweep, ...(timedOut && sweepMore ? { more: true } : {}) }, 'sweep: lapsed rules removed')
    }
    if (result.recordsTrimmed > 0) {
      log.info({ records: result.recordsTrimmed, passes: trimPasses, ms, ...(timedOut && trimMore ? { more: true } : {}) }, 'stream trimmed')
    }
    if (timedOut) log.warn({ ms, maxRunMs: this.#maxRunMs, sweepMore, trimMore }, 'housekeeping run ended with work left; the next run goes on')
    return result
  }

  #sweeperPasses = 0
  #sweeperMs = 0

  /** What the sweeper did since the last run, from the store's counters (main.ts adds its
   *  passes to them), counted in this run's result: one log line a run, as when it swept here.
   *  `ms` is then the time the line covers. */
  #sweeperDid (result: RunResult): void {
    const now = { ...this.#opts.store.housekeeping }
    result.rulesSwept += now.rulesSwept - this.#seen.rulesSwept
    result.tombstonesDropped += now.tombstonesDropped - this.#seen.tombstonesDropped
    result.staleCleaned += now.staleCleaned - this.#seen.staleCleaned
    this.#sweeperPasses = now.sweepPasses - this.#seen.sweepPasses
    this.#sweeperMs = Math.round(performance.now() - this.#seenAt)
    this.#seen = now
    this.#seenAt = performance.now()
  }
}

/** At least a turn of the event loop; `ms` more when the pass took that long. */
function pause (ms: number): Promise<void> {
  return new Promise((resolve) => { if (ms >= 1) setTimeout(resolve, ms); else setImmediate(resolve) })
}
