/**
 * Networks whose lapse moved later (a rule's expiry extended, a longer-lived rule added under
 * it) while the content stayed: the version history does not see them (same networks, same
 * tag), yet a bouncer told the earlier lapse would drop them while they are live. Recorded per
 * build here, so that each bouncer's next pull re-announces them with their new duration
 * (docs/bouncers.md "Durations").
 *
 * Per feed and action: a log of retimes, each a sequence number and its networks. A cursor holds
 * the log's epoch (this process's log of that feed) and the last sequence it saw; a cursor of
 * another epoch (a restart, another node) or older than the log is answered with every decision.
 *
 * Bound, per feed and action: at most RETIMES_KEPT entries and max(networks of the current
 * version, MIN_RETIMED) networks in all (the delta history's budget): a bouncer further behind
 * gets the whole set, which costs no more.
 */
import type { FeedAction } from '../store/types.js'
import { FEED_ACTIONS } from '../store/types.js'
import { MIN_DIFF_BUDGET } from './delta-history.js'
import type { FeedId, FeedSnapshot, PublishedNetworks, PublishedPrefixes } from './snapshot-types.js'

export const RETIMES_KEPT = 64
const MIN_RETIMED = MIN_DIFF_BUDGET

interface Entry { readonly seq: number, readonly prefixes: PublishedPrefixes, readonly size: number }

class ActionLog {
  readonly epoch: number
  readonly entries: Entry[] = []
  /** The sequence of the latest entry (0: none yet). */
  seq = 0
  size = 0
  last: PublishedNetworks | null = null

  constructor (epoch: number) {
    this.epoch = epoch
  }
}

let epochs = Math.floor(Math.random() * 1e9)

export class BouncerRetimes {
  readonly #feeds = new Map<string, Record<FeedAction, ActionLog>>()

  /** Records the snapshot now served for a feed (null: dropped). Main thread, on every swap. */
  record (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null): void {
    const key = `${workspaceId}\n${feedId}`
    if (snapshot === null) {
      this.#feeds.delete(key)
      return
    }
    let logs = this.#feeds.get(key)
    if (logs === undefined) {
      logs = { block: new ActionLog(++epochs), allow: new ActionLog(++epochs) }
      this.#feeds.set(key, logs)
    }
    for (const action of FEED_ACTIONS) {
      const log = logs[action]
      const now = snapshot.published[action]
      const before = log.last
      log.last = now
      if (before === null || before.lapse === undefined || now.lapse === undefined) continue
      const later = retimed(before, now)
      const size = (later.v4.length >> 1) + later.v6.length / 5
      if (size === 0) continue
      log.entries.push({ seq: ++log.seq, prefixes: later, size })
      log.size += size
      const budget = Math.max(MIN_RETIMED, (now.total.v4.length >> 1) + now.total.v6.length / 5)
      while (log.entries.length > RETIMES_KEPT || log.size > budget) log.size -= log.entries.shift()!.size
    }
  }

  /** The log's epoch and latest sequence for a feed's action: what a cursor is set to when it is sent everything. */
  position (workspaceId: string, feedId: FeedId, action: FeedAction): { epoch: number, seq: number } {
    const log = this.#feeds.get(`${workspaceId}\n${feedId}`)?.[action]
    return log === undefined ? { epoch: 0, seq: 0 } : { epoch: log.epoch, seq: log.seq }
  }

  /**
   * The networks retimed after `seq` of `epoch` (each listed once per entry; a network may come
   * twice); null when the log cannot say (another epoch, or entries dropped since).
   */
  since (workspaceId: string, feedId: FeedId, action: FeedAction, epoch: number, seq: number): PublishedPrefixes[] | null {
    const log = this.#feeds.get(`${workspaceId}\n${feedId}`)?.[action]
    if (log === undefined || log.epoch !== epoch) return null
    if (seq === log.seq) return []
    const first = log.entries[0]
    if (first === undefined || first.seq > seq + 1) return null
    return log.entries.filter((e) => e.seq > seq).map((e) => e.prefixes)
  }
}

/** The prefixes in both whose lapse is later in `b` than in `a`, where `a`'s was finite. One merge walk per family. */
function retimed (a: PublishedNetworks, b: PublishedNetworks): PublishedPrefixes {
  const la = a.lapse!
  const lb = b.lapse!
  const n4a = a.total.v4.length >> 1
  const n4b = b.total.v4.length >> 1
  const walk = (x: Uint32Array, y: Uint32Array, w: number, offA: number, offB: number): Uint32Array => {
    const out: number[] = []
    let i = 0
    let j = 0
    while (i < x.length && j < y.length) {
      let c = 0
      for (let k = 0; k < w && c === 0; k++) c = x[i + k]! - y[j + k]!
      if (c < 0) i += w
      else if (c > 0) j += w
      else {
        const ea = la[offA + i / w]!
        const eb = lb[offB + j / w]!
        if (eb > ea && ea !== Infinity) for (let k = 0; k < w; k++) out.push(y[j + k]!)
        i += w
        j += w
      }
    }
    return Uint32Array.from(out)
  }
  return { v4: walk(a.total.v4, b.total.v4, 2, 0, 0), v6: walk(a.total.v6, b.total.v6, 5, n4a, n4b) }
}
