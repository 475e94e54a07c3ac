/**
 * Whether this node can take signals now (issue 35: /readyz said ready on a full disk while every
 * signal post answered 500). Two signs, either enough:
 * - the latest stream append failed (the store refused or did not start the commit by the
 *   deadline) and none has succeeded since, for HOLD_MS after that failure — long enough that a
 *   balancer polling readiness sees it, short enough that a store which healed while nothing was
 *   posted is tried again;
 * - the stream's file system has less free space than two of the largest batch bodies, where the
 *   store can tell (the embedded store; LMDB may still reuse free pages of its own file, so this
 *   can say "no" a little early, never late).
 */
import type { ThreatfeedError } from '../errors.js'

/** How long one failed append keeps the node from saying it can take signals, unless one succeeds. */
export const HOLD_MS = 10_000

export class AppendHealth {
  #failedAt = 0
  #failingSince = 0
  #failures = 0
  #cause = ''
  readonly #now: () => number

  constructor (now: () => number = Date.now) {
    this.#now = now
  }

  succeeded (): void {
    this.#failures = 0
    this.#failingSince = 0
  }

  failed (e: ThreatfeedError): void {
    const now = this.#now()
    if (this.#failures === 0) this.#failingSince = now
    this.#failures++
    this.#failedAt = now
    const cause = e.cause instanceof Error ? e.cause.message : ''
    this.#cause = cause === '' ? e.message : `${e.message}: ${cause}`
  }

  /**
   * true, or why signals cannot be taken. `freeBytes`: what the stream's file system has left
   * (null when the store cannot tell); `needBytes`: what it must have.
   */
  readiness (freeBytes: number | null, needBytes: number): true | string {
    const now = this.#now()
    if (this.#failures > 0 && now - this.#failedAt < HOLD_MS) {
      return `signal stream appends failing for ${Math.round((now - this.#failingSince) / 1000)} s (${this.#failures} batches answered 500): ${this.#cause}`
    }
    if (freeBytes !== null && freeBytes < needBytes) {
      return `the signal stream's disk has ${mib(freeBytes)} MiB free, under the ${mib(needBytes)} MiB two of the largest batches may need`
    }
    return true
  }
}

function mib (bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1)
}
