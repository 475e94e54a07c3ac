/**
 * Clock skew against the store's server (issue 33). Several nodes on one MongoDB read and write
 * times taken from their own clocks — a rule's expiry, a feed version's Last-Modified — so a node
 * whose clock is off serves lapses early or late and stamps versions out of order. The store
 * answers with its server's time (MongoDB: `hello`'s localTime); the skew is that time less the
 * midpoint of the round trip, so it is known to within half a round trip.
 */
import type { Store } from './types.js'

/** Above this a node's clock is logged as skewed: the promise "within interval + 1 s" (DECISIONS §5) leaves room for half a second. */
export const CLOCK_SKEW_WARN_MS = 500
/** How often it is measured. */
export const CLOCK_SKEW_CHECK_MS = 60_000

export interface ClockSkewLog {
  warn (fields: object, msg: string): void
}

/**
 * @example
 *   const watch = new ClockSkewWatch(store, log)
 *   watch.start() // measures now, then every minute; watch.skewMs feeds the metric
 */
export class ClockSkewWatch {
  readonly #store: Required<Pick<Store, 'clockSkew'>>
  readonly #log: ClockSkewLog
  readonly #intervalMs: number
  #skewMs: number | null = null
  #timer: NodeJS.Timeout | null = null

  constructor (store: Required<Pick<Store, 'clockSkew'>>, log: ClockSkewLog, intervalMs = CLOCK_SKEW_CHECK_MS) {
    this.#store = store
    this.#log = log
    this.#intervalMs = intervalMs
  }

  /** The last measurement (server − this node, ms), null before the first or while it fails. */
  get skewMs (): number | null {
    return this.#skewMs
  }

  /** Measures once; logs a warning when the skew is past CLOCK_SKEW_WARN_MS. */
  async check (): Promise<number | null> {
    try {
      this.#skewMs = Math.round(await this.#store.clockSkew())
    } catch {
      this.#skewMs = null // the store is away: its own errors say so
      return null
    }
    if (Math.abs(this.#skewMs) > CLOCK_SKEW_WARN_MS) {
      this.#log.warn({ skewMs: this.#skewMs, limitMs: CLOCK_SKEW_WARN_MS }, 'this node\'s clock is off from the database server\'s: expiries and Last-Modified depend on it; check NTP')
    }
    return this.#skewMs
  }

  start (): void {
    if (this.#timer !== null) return
    void this.check()
    this.#timer = setInterval(() => { void this.check() }, this.#intervalMs)
    this.#timer.unref()
  }

  stop (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }
}
