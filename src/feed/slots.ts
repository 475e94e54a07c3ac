/**
 * How many feed builds run at once (FeedServiceOptions.buildConcurrency): a counting semaphore
 * whose urgent waiters (expiry and first builds, which leave a feed unable to answer) go first.
 */
export class Slots {
  #free: number
  readonly #waiting: Array<() => void> = []

  constructor (n: number) {
    this.#free = Math.max(1, n)
  }

  async acquire (urgent: boolean): Promise<void> {
    if (this.#free > 0) {
      this.#free--
      return
    }
    await new Promise<void>((resolve) => { if (urgent) this.#waiting.unshift(resolve); else this.#waiting.push(resolve) })
  }

  /** Hands the slot to the next waiter, or frees it. */
  release (): void {
    const next = this.#waiting.shift()
    if (next !== undefined) next()
    else this.#free++
  }
}
