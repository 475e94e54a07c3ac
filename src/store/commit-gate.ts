/**
 * The append deadline rule (README "Decisions beyond the spec", Signals): a commit that has
 * started cannot be cancelled — LMDB's flush and MongoDB's commitTransaction run to their end —
 * so whether a batch may still be written is decided BEFORE its commit starts, once, by whoever
 * comes first of the two:
 *
 *   the write transaction, as its last step before the commit  → begin(): before the cutoff it
 *                                                                 marks the commit started; at or
 *                                                                 past it (or abandoned) it throws,
 *                                                                 and the transaction rolls back
 *   the caller's timer, at the cutoff                           → abandon(): true if the commit
 *                                                                 had not started (answer 500 now,
 *                                                                 nothing will be written), false
 *                                                                 if it had (wait for it)
 *
 * Both run on the thread that made the append (lmdb-js runs a transaction's callback on the
 * event loop; the MongoDB transaction's callback is ours), so the two never interleave: an
 * append is either abandoned and never written, or started and waited for, never answered 500
 * and written later. A MongoDB transaction retried after a conflict passes begin() again, and
 * past the cutoff that retry is abandoned too.
 */
import { ThreatfeedError } from '../errors.js'

export type CommitGateState = 'waiting' | 'started' | 'abandoned'

export class CommitGate {
  /** Epoch ms: a commit must start before this. */
  readonly cutoff: number
  readonly #now: () => number
  #state: CommitGateState = 'waiting'

  constructor (cutoff: number, now: () => number = Date.now) {
    this.cutoff = cutoff
    this.#now = now
  }

  get state (): CommitGateState {
    return this.#state
  }

  /**
   * Inside the write transaction, right before its commit: throws TF_ERR_STORE_UNAVAILABLE (the
   * transaction rolls back) when the append was abandoned or the cutoff has passed; otherwise the
   * commit counts as started.
   *
   * @example
   *   await env.writeStream((dbs) => { put(dbs); gate.begin() })
   */
  begin (): void {
    if (this.#state !== 'abandoned' && this.#now() < this.cutoff) {
      this.#state = 'started'
      return
    }
    this.#state = 'abandoned'
    throw new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: new Error('the stream commit could not start before its deadline; nothing was written') })
  }

  /** At the cutoff: abandons an append whose commit has not started (true), else false. */
  abandon (): boolean {
    if (this.#state === 'started') return false
    this.#state = 'abandoned'
    return true
  }
}
