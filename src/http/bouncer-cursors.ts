/**
 * Where each CrowdSec bouncer is in its set's history (docs/bouncers.md): a cursor per bouncer,
 * a bouncer being a consumer in the sense of consumer tracking — key, address, User-Agent.
 *
 * A cursor names a content version (the unquoted tag of the set's `plain|both|ACTION` variant, a
 * digest of the networks, the same on every node and after a restart) plus what this node needs
 * to re-announce in time: when the earliest duration it announced runs out. The version is also
 * counted for the consumer (ConsumerTracker), which writes it to the store with the consumer's
 * record: another node, or this one after a restart, reads it back (`restore`).
 *
 * Bound: per key at most `perKey` cursors (THREATFEED_CONSUMERS_PER_KEY), least recently polled
 * out first; all keys together at most `total` (a bouncer past it is answered as one without a
 * cursor: every current decision, which is harmless, never a missed one within its durations).
 */

export interface Cursor {
  /** The set the version belongs to: `workspace\nfeedId\naction`. */
  set: string
  /** The version last sent (unquoted tag). */
  tag: string
  /** When the earliest duration announced to this bouncer runs out (ms); 0: unknown, re-announce. */
  until: number
  /** Its previous pull (ms). */
  at: number
  /** The retime log (feed/bouncer-retimes.ts) it has seen: its epoch and last sequence. */
  epoch: number
  retime: number
}

export class BouncerCursors {
  readonly #perKey: number
  readonly #total: number
  /** key id → (address \n User-Agent → cursor), in order of last pull (a Map keeps insertion order). */
  readonly #keys = new Map<string, Map<string, Cursor>>()
  #size = 0

  constructor (options: { perKey: number, total: number }) {
    this.#perKey = options.perKey
    this.#total = options.total
  }

  get size (): number {
    return this.#size
  }

  get (keyId: string, bouncer: string): Cursor | undefined {
    return this.#keys.get(keyId)?.get(bouncer)
  }

  /** Stores a cursor as the bouncer's most recent; false when the bounds refused it. */
  set (keyId: string, bouncer: string, cursor: Cursor): boolean {
    let k = this.#keys.get(keyId)
    if (k === undefined) {
      if (this.#size >= this.#total) return false
      k = new Map()
      this.#keys.set(keyId, k)
    }
    if (k.delete(bouncer)) this.#size--
    else if (k.size >= this.#perKey || this.#size >= this.#total) {
      if (k.size === 0) return false
      // The key's least recently polled makes room.
      k.delete(k.keys().next().value!)
      this.#size--
    }
    k.set(bouncer, cursor)
    this.#size++
    return true
  }
}
