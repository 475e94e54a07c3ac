/**
 * Callers waiting for the consumer to reach a stream position (read-your-writes, tests, the
 * import command): shared by the consumer that applies records in this thread and by the one
 * whose work runs on a thread of its own, which hears of each new position by message.
 */
export class PositionWaiters {
  #waiters: Array<{ seq: number, resolve: () => void }> = []
  /** The position last announced. */
  #position = 0

  /**
   * Resolves true once a position at or past `seq` is announced (at once if it was already),
   * false after `timeoutMs`.
   *
   * @example
   *   waitFor (seq, timeoutMs) { return this.#waiters.wait(seq, timeoutMs) }
   */
  wait (seq: number, timeoutMs: number): Promise<boolean> {
    if (this.#position >= seq) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter)
        resolve(false)
      }, timeoutMs)
      const waiter = { seq, resolve: () => { clearTimeout(timer); resolve(true) } }
      this.#waiters.push(waiter)
    })
  }

  /** The consumer stands at `position`: every wait for a position up to it is over. */
  reached (position: number): void {
    this.#position = position
    if (this.#waiters.length === 0) return
    const due = this.#waiters.filter((w) => w.seq <= position)
    this.#waiters = this.#waiters.filter((w) => w.seq > position)
    for (const w of due) w.resolve()
  }
}
