/**
 * How far behind the stream consumer is and whether its applies are failing, for /readyz and
 * /metrics (README "Decisions beyond the spec", Operations). Kept by the consumer object in the
 * server's thread: StreamConsumer feeds it directly; ThreadedConsumer from the thread's messages.
 *
 * The age of the oldest unapplied record is known for the records this process appended (their
 * offers carry acceptedAt) and for those of a pass that failed (the consumer reports the first
 * record's acceptedAt with the error); records another process appended are read and applied in
 * the next poll and, unless that fails, never wait long enough to matter.
 */

export interface ConsumerHealth {
  /** Records known to be on the stream and not applied yet. */
  readonly backlog: number
  /** Seconds since the oldest unapplied record was accepted; 0 when none is known. */
  readonly oldestUnappliedSeconds: number
  /** Passes that failed since the start. */
  readonly applyErrors: number
  /** Passes that failed since the last one that succeeded. */
  readonly consecutiveFailures: number
  /** When the current run of failures began (epoch ms); null while applies succeed. */
  readonly failingSince: number | null
  readonly lastError: { readonly message: string, readonly at: number } | null
}

/** A consumer failing for longer than this is wedged: /readyz answers 503. */
export const FAILING_NOT_READY_MS = 10_000
/** An unapplied record older than this breaks read-your-writes for good: /readyz answers 503. */
export const OLDEST_NOT_READY_MS = 30_000

/** Batches remembered for their acceptedAt; past that the oldest ones are kept (they decide the age). */
const MAX_PENDING = 10_000

export class HealthTracker {
  /** Offered batches not applied yet, oldest first: last seq, acceptedAt. */
  readonly #pending: Array<{ last: number, acceptedAt: number }> = []
  #position = 0
  #errors = 0
  #consecutive = 0
  #failingSince: number | null = null
  #lastError: { message: string, at: number } | null = null
  /** The first record of the pass that failed last (its seq and acceptedAt). */
  #failedFirst: { seq: number, acceptedAt: number } | null = null

  /** A batch this process appended, ending at `last`. */
  offered (last: number, acceptedAt: number): void {
    if (last <= this.#position || this.#pending.length >= MAX_PENDING) return
    this.#pending.push({ last, acceptedAt })
  }

  /** A pass succeeded; the consumer is at `position`. */
  applied (position: number): void {
    this.#position = position
    this.#consecutive = 0
    this.#failingSince = null
    let drop = 0
    while (drop < this.#pending.length && this.#pending[drop]!.last <= position) drop++
    if (drop > 0) this.#pending.splice(0, drop)
    if (this.#failedFirst !== null && this.#failedFirst.seq <= position) this.#failedFirst = null
  }

  /**
   * A pass failed at `at`. `first` is its first record (seq and acceptedAt) when the consumer
   * knows it.
   */
  failed (message: string, at: number, first: { seq: number, acceptedAt: number } | null): void {
    this.#errors++
    this.#consecutive++
    this.#failingSince ??= at
    this.#lastError = { message, at }
    if (first !== null && first.seq > this.#position) this.#failedFirst = first
  }

  snapshot (backlog: number, now: number): ConsumerHealth {
    let oldest = Infinity
    if (backlog > 0) {
      const p = this.#pending[0]
      if (p !== undefined) oldest = p.acceptedAt
      if (this.#failedFirst !== null) oldest = Math.min(oldest, this.#failedFirst.acceptedAt)
    }
    return {
      backlog,
      oldestUnappliedSeconds: oldest === Infinity ? 0 : Math.max(0, (now - oldest) / 1000),
      applyErrors: this.#errors,
      consecutiveFailures: this.#consecutive,
      failingSince: this.#failingSince,
      lastError: this.#lastError,
    }
  }
}

/**
 * The consumer's part of /readyz: true, or why a load balancer should stop sending signals here
 * (feeds keep answering from memory either way). Not ready when applies have failed without a
 * success for over 10 s, or when a record has waited over 30 s.
 *
 * @example
 *   checks.consumer = consumerReadiness(consumer.health(), Date.now())
 */
export function consumerReadiness (h: ConsumerHealth, now: number): true | string {
  const failingMs = h.failingSince === null ? 0 : now - h.failingSince
  const behind = `backlog ${h.backlog} records, oldest unapplied ${Math.round(h.oldestUnappliedSeconds)} s`
  if (failingMs > FAILING_NOT_READY_MS) {
    return `stream consumer failing for ${Math.round(failingMs / 1000)} s (${h.consecutiveFailures} attempts): ${h.lastError?.message ?? 'unknown error'}; ${behind}`
  }
  if (h.oldestUnappliedSeconds * 1000 > OLDEST_NOT_READY_MS) return `stream consumer behind: ${behind}`
  return true
}
