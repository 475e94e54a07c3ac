/**
 * One applier at a time: the stream consumer of each node asks this before a pass, and only the
 * holder of the store's lease `applier:<consumer>` applies; the others follow the shared
 * checkpoint (consumer.ts), so a slice is read, decoded and written once, not once per node.
 *
 *   holder:    claim ─ renew every RENEW_MS ─ renew ─ … (dies)          lease lapses at +TTL_MS
 *   follower:  claim refused ─ every RENEW_MS ─ … ─────────────────────────────► claim taken, applies
 *
 * Handover after a crash takes at most TTL_MS + RENEW_MS + a poll (3.5 s with the defaults, under
 * the 5 s promised); a clean stop releases the lease, and the next follower's claim takes it. The
 * holder stops applying RENEW_MS before its lease could lapse (on its monotonic clock), so a renewal
 * that fails or comes late never leaves two appliers — and if one ever did (a process paused past
 * its lease), the checkpoint compare-and-set still applies each slice once (batch-types.ts).
 */
import { hostname } from 'node:os'
import { randomUUID } from 'node:crypto'
import { threadId } from 'node:worker_threads'
import type { LeaseStore } from '../store/types.js'

export const LEASE_TTL_MS = 2500
export const LEASE_RENEW_MS = 750

export interface ApplierLeaseOptions {
  readonly ttlMs?: number
  readonly renewMs?: number
  /** Who this is in the lease record; unique per consumer instance by default. */
  readonly owner?: string
}

export class ApplierLease {
  readonly #store: LeaseStore
  readonly #name: string
  readonly #owner: string
  readonly #ttlMs: number
  readonly #renewMs: number
  /**
   * Until when this process may apply, on its monotonic clock (performance.now()): the server
   * times the lease ($$NOW); here only a duration since the claim counts, and a wall clock
   * stepped back must not stretch it (issue 33).
   */
  #heldUntil = -Infinity
  #lastClaim = -Infinity

  constructor (store: LeaseStore, consumer: string, options: ApplierLeaseOptions = {}) {
    this.#store = store
    this.#name = `applier:${consumer}`
    this.#owner = options.owner ?? `${hostname()}/${process.pid}/${threadId}/${randomUUID()}`
    this.#ttlMs = options.ttlMs ?? LEASE_TTL_MS
    this.#renewMs = options.renewMs ?? LEASE_RENEW_MS
  }

  get owner (): string {
    return this.#owner
  }

  /**
   * True when this process may apply now: it holds the lease, claimed or renewed when due. A
   * store that fails to answer keeps the last answer until the lease would lapse.
   *
   * @example
   *   if (!await lease.mayApply()) position = await store.stream.getCheckpoint(name) // follow
   */
  async mayApply (): Promise<boolean> {
    const started = performance.now()
    if (started - this.#lastClaim >= this.#renewMs) {
      this.#lastClaim = started
      try {
        const lease = await this.#store.claim(this.#name, this.#owner, this.#ttlMs)
        this.#heldUntil = lease.owner === this.#owner ? started + this.#ttlMs - this.#renewMs : -Infinity
      } catch {
        // The store is away: applying fails too; the deadline ends this holder's turn meanwhile.
      }
    }
    return performance.now() < this.#heldUntil
  }

  /** Gives the lease up (a clean stop), so that another node takes over at its next claim. */
  async release (): Promise<void> {
    this.#heldUntil = -Infinity
    await this.#store.release(this.#name, this.#owner).catch(() => undefined)
  }
}
