/**
 * The consumer record's arithmetic, shared by both stores and the HTTP side: its id, the poll
 * interval buckets, and the merge of a tally into a record (ConsumerStore#merge).
 *
 * Every field merges with an operation that is commutative and associative — add, least,
 * greatest, latest-by-time, the three most recent — so several server processes that each flush
 * their own view of one consumer, in any order, leave the same record. The MongoDB store says the
 * same with update operators ($inc, $min, $max, $push with $sort and $slice); the embedded store
 * runs mergeConsumer inside its write transaction.
 */
import { createHash } from 'node:crypto'
import type { ConsumerDrops, FeedConsumer, FeedConsumerIdentity, FeedConsumerTally } from './types.js'

/** Longest User-Agent kept (UTF-16 code units): appliances send short ones, and a record must stay small. */
export const MAX_USER_AGENT = 256

/** Consumers one key may have tracked by default (THREATFEED_CONSUMERS_PER_KEY). */
export const DEFAULT_CONSUMERS_PER_KEY = 1000
/** Consumers one server process tracks in memory at most, all keys together. */
export const MAX_TRACKED_CONSUMERS = 100_000

/** No drops. */
export function noDrops (): ConsumerDrops {
  return { evicted: 0, refused: 0, removed: 0 }
}

/** `into` with `d` added to it. */
export function addDrops (into: ConsumerDrops, d: Readonly<ConsumerDrops>): ConsumerDrops {
  into.evicted += d.evicted
  into.refused += d.refused
  into.removed += d.removed
  return into
}

/**
 * Upper bounds of the poll-interval buckets: 1 s × 1.25^k up to about a day, so a median read
 * from them is within 25 % (the stale rule takes three of them, 15 minutes at least).
 */
export const INTERVAL_BUCKETS_MS: readonly number[] = Array.from({ length: 52 }, (_, k) => Math.round(1000 * 1.25 ** k))
const LOG_RATIO = Math.log(1.25)

/** The bucket of a poll interval: the first whose upper bound holds it; past the last, one more. */
export function intervalBucket (ms: number): number {
  if (ms <= 1000) return 0
  const last = INTERVAL_BUCKETS_MS.length
  if (ms > INTERVAL_BUCKETS_MS[last - 1]!) return last
  let k = Math.ceil(Math.log(ms / 1000) / LOG_RATIO)
  // Rounding of the bounds and of the logarithm: settle on the exact first bound ≥ ms.
  while (k > 0 && INTERVAL_BUCKETS_MS[k - 1]! >= ms) k--
  while (k < last && INTERVAL_BUCKETS_MS[k]! < ms) k++
  return k
}

/** The upper bound of the bucket holding the median interval; null with no interval seen. */
export function medianInterval (intervals: Readonly<Record<string, number>>): number | null {
  let total = 0
  for (const n of Object.values(intervals)) total += n
  if (total === 0) return null
  let seen = 0
  const last = INTERVAL_BUCKETS_MS.length
  for (let k = 0; k <= last; k++) {
    seen += intervals[k] ?? 0
    if (seen * 2 >= total) return k < last ? INTERVAL_BUCKETS_MS[k]! : INTERVAL_BUCKETS_MS[last - 1]! * 1.25
  }
  return null
}

/**
 * The id of a consumer: a digest of who polls what, so that every process names it alike.
 *
 * @example
 *   consumerId({ workspaceId, keyId, address: '192.0.2.7', userAgent: 'PAN-OS', client: '', listId: '*', variant: 'plain|v4|block|' })
 */
export function consumerId (c: Omit<FeedConsumerIdentity, 'id' | 'family' | 'action'>): string {
  return createHash('sha256')
    .update(JSON.stringify([c.workspaceId, c.keyId, c.address, c.userAgent, c.client, c.listId, c.variant]))
    .digest('hex')
    .slice(0, 32)
}

/** A record with nothing counted yet. */
export function emptyTally (now: number): FeedConsumerTally {
  return {
    polls: 0,
    ok: 0,
    notModified: 0,
    clientErrors: 0,
    serverErrors: 0,
    firstSeen: now,
    lastSeen: now,
    last: { at: now, status: 0 },
    last200At: null,
    held: null,
    recentFails: [],
    intervals: {},
  }
}

const maxOrNull = (a: number | null, b: number | null): number | null => a === null ? b : b === null ? a : Math.max(a, b)

/**
 * `stored` with `tally` added (a new object; either may be the other's view of the same
 * consumer). With no stored record, the tally's own.
 *
 * @example
 *   mergeConsumer(null, tally) // the tally as a record
 */
export function mergeConsumer (stored: FeedConsumer | null, tally: FeedConsumer): FeedConsumer {
  if (stored === null) return { ...tally, recentFails: latestFails(tally.recentFails, []), intervals: { ...tally.intervals } }
  const intervals = { ...stored.intervals }
  for (const [k, n] of Object.entries(tally.intervals)) intervals[k] = (intervals[k] ?? 0) + n
  return {
    ...stored,
    polls: stored.polls + tally.polls,
    ok: stored.ok + tally.ok,
    notModified: stored.notModified + tally.notModified,
    clientErrors: stored.clientErrors + tally.clientErrors,
    serverErrors: stored.serverErrors + tally.serverErrors,
    firstSeen: Math.min(stored.firstSeen, tally.firstSeen),
    lastSeen: Math.max(stored.lastSeen, tally.lastSeen),
    last: tally.last.at >= stored.last.at ? tally.last : stored.last,
    last200At: maxOrNull(stored.last200At, tally.last200At),
    held: stored.held === null || (tally.held !== null && tally.held.at >= stored.held.at) ? tally.held ?? stored.held : stored.held,
    recentFails: latestFails(stored.recentFails, tally.recentFails),
    intervals,
  }
}

/** The three most recent of two lists of fail times, most recent first. */
export function latestFails (a: readonly number[], b: readonly number[]): number[] {
  return [...a, ...b].sort((x, y) => y - x).slice(0, 3)
}
