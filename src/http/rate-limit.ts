/**
 * Per-key token bucket for the signal interface (DECISIONS §2: per key, configurable, generous by
 * default). Feeds are not rate limited: a fleet often shares one key, answers come from memory,
 * and SPEC §7.2 lists no 429 for feeds.
 */
export class RateLimiter {
  readonly #rate: number
  readonly #burst: number
  readonly #buckets = new Map<string, { tokens: number, at: number }>()

  constructor (perSecond: number, burst: number) {
    this.#rate = perSecond
    this.#burst = burst
  }

  /** Takes one token for `id`; returns 0 when allowed, else the whole seconds to wait (Retry-After). */
  take (id: string, now = performance.now()): number {
    let b = this.#buckets.get(id)
    if (b === undefined) {
      if (this.#buckets.size > 100_000) this.#buckets.clear()
      b = { tokens: this.#burst, at: now }
      this.#buckets.set(id, b)
    }
    b.tokens = Math.min(this.#burst, b.tokens + ((now - b.at) / 1000) * this.#rate)
    b.at = now
    if (b.tokens >= 1) {
      b.tokens -= 1
      return 0
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / this.#rate))
  }
}
