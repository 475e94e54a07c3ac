/**
 * Which shard counts N a feed keeps built (README "Shards"). The list's stored N is always built;
 * any other N is built from the first request that asks for it until the feed is let go (an hour
 * unpolled). Shards are variants of the snapshot, answered like every other one: a poll of a shard
 * is a map lookup. Only the first request for a new N waits, for one build.
 *
 * At most KEPT extra counts per feed: a client walking through every N cannot make a feed render
 * 64 shard sets; the least recently asked count goes, and a build for a new count once the set is
 * full waits for the rebuild interval like any other change.
 */
import { ThreatfeedError } from '../errors.js'
import { MAX_SHARDS } from './render/shard-networks.js'
import type { FeedSnapshot, ShardRef } from './snapshot-types.js'

const KEPT = 4

export class ShardDemand {
  /** Shard counts asked for, least recently asked first. */
  readonly #counts: number[] = []

  /**
   * Notes a request for N. Answers 'new' when N was not kept (a build must add it), 'evicting'
   * when keeping it drops another (the build waits for the rebuild interval), else 'kept'.
   */
  ask (of: number): 'new' | 'evicting' | 'kept' {
    const i = this.#counts.indexOf(of)
    if (i >= 0) {
      this.#counts.splice(i, 1)
      this.#counts.push(of)
      return 'kept'
    }
    this.#counts.push(of)
    if (this.#counts.length <= KEPT) return 'new'
    this.#counts.shift()
    return 'evicting'
  }

  counts (): readonly number[] {
    return this.#counts
  }

  clear (): void {
    this.#counts.length = 0
  }
}

/**
 * Waits until the feed's snapshot holds the shards of N: `current` answers the feed's snapshot
 * (waiting for a first build), `building` the build in flight, if any.
 */
export async function awaitShardCount (of: number, current: () => Promise<FeedSnapshot>, building: () => Promise<void> | null, waitMs: number): Promise<FeedSnapshot> {
  const deadline = Date.now() + waitMs
  for (;;) {
    const s = await current()
    if (s.shardCounts.includes(of)) return s
    const left = deadline - Date.now()
    if (left <= 0) throw new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: new Error(`the shards of ${of} were not built in time`) })
    const b = building()
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, b === null ? Math.min(left, 25) : left)
      if (b !== null) void b.finally(() => { clearTimeout(t); resolve() })
    })
  }
}

/** '1'…'n': what `shard` accepts given N, and `of` accepts (n = MAX_SHARDS). */
export function shardValues (n: number): readonly string[] {
  return Array.from({ length: n }, (_, i) => String(i + 1))
}

/**
 * The shard asked for (the feed routes' `shard=I&of=N`, `feed get --shard I --of N`): I of N, or
 * I of the list's stored N. `of` alone, `shard` with no N, or I > N is TF_ERR_FEED_BAD_PARAM (a
 * 400) whose details.supported lists the values that would do. Values are 1…MAX_SHARDS already.
 */
export function resolveShard (shard: number | null, of: number | null, stored: number | undefined): ShardRef | null {
  if (shard === null && of === null) return null
  if (shard === null) {
    throw new ThreatfeedError('TF_ERR_FEED_BAD_PARAM', [`of=${of} without shard: ask for shard=I&of=${of}, 1 ≤ I ≤ ${of}`], {
      details: { parameter: 'shard', supported: shardValues(of!) },
    })
  }
  const n = of ?? stored ?? null
  if (n === null) {
    throw new ThreatfeedError('TF_ERR_FEED_BAD_PARAM', [`shard=${shard} without of, and the feed stores no shard count: ask for shard=I&of=N, 1 ≤ I ≤ N ≤ ${MAX_SHARDS}`], {
      details: { parameter: 'of', supported: shardValues(MAX_SHARDS) },
    })
  }
  if (shard > n) {
    throw new ThreatfeedError('TF_ERR_FEED_BAD_PARAM', [`shard=${shard} of ${n}: 1 ≤ shard ≤ of`], {
      details: { parameter: 'shard', value: String(shard), supported: shardValues(n) },
    })
  }
  return { index: shard, of: n }
}
