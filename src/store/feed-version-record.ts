/**
 * The one implementation of how a feed-version record moves forward, shared by both stores (each
 * runs it inside its own compare-and-set: an LMDB write transaction, a MongoDB conditional update).
 *
 * Order of bases: lexicographic on (rulesRevision, adminRevision, geoEpoch, expiryCutoff). Two
 * builds can each be behind in a different component (newer rules read with an older cutoff); a
 * total order still means a record never moves back to a state it has left, which is what keeps
 * every node on one `since` — the build that lost rebuilds soon anyway, since whatever it lagged
 * in (a revision its poll has not seen yet, a lapse before its snapshot's expiresAt) is due.
 */
import { deserialize, serialize } from 'node:v8'
import { copyPublishState } from './guard-settings.js'
import {
  FEED_CHANGE_BUCKET_MS, FEED_CHANGE_DAYS_MS, FEED_VERSION_HISTORY,
  type FeedKey, type FeedVersion, type FeedVersionBasis, type FeedVersionRecord, type PublishedRecord,
} from './types.js'

/** Negative when `a` is older than `b`, 0 when as new, positive when newer. */
export function compareBasis (a: FeedVersionBasis, b: FeedVersionBasis): number {
  return (a.rulesRevision - b.rulesRevision) ||
    (a.adminRevision - b.adminRevision) ||
    (a.geoEpoch - b.geoEpoch) ||
    (a.expiryCutoff - b.expiryCutoff)
}

/** The record's version alone (what Last-Modified needs). */
export function versionOf (r: FeedVersion): FeedVersion {
  return { contentHash: r.contentHash, since: r.since }
}

/**
 * What observe() stores, or null when the stored record stays: its hash is `contentHash`, or it
 * was built from a basis at least as new as `basis` (with a basis given).
 */
export function nextFeedVersion (key: FeedKey, current: FeedVersionRecord | null, contentHash: string, now: number, basis: FeedVersionBasis | undefined): FeedVersionRecord | null {
  if (current === null) {
    return { workspaceId: key.workspaceId, contentHash, since: now, basis: basis ?? null, state: 'published', history: [], changes: countChange([], now) }
  }
  if (current.contentHash === contentHash) return null
  if (basis !== undefined && current.basis !== null && compareBasis(basis, current.basis) <= 0) return null
  return {
    ...current,
    workspaceId: key.workspaceId,
    contentHash,
    since: now,
    basis: basis ?? null,
    state: current.state ?? 'published',
    history: [versionOf(current), ...(current.history ?? [])].slice(0, FEED_VERSION_HISTORY),
    changes: countChange(current.changes ?? [], now),
  }
}

/** Adds one change at `now` to hourly counts, dropping hours older than FEED_CHANGE_DAYS_MS. */
function countChange (changes: ReadonlyArray<readonly [number, number]>, now: number): Array<[number, number]> {
  const hour = Math.floor(now / FEED_CHANGE_BUCKET_MS) * FEED_CHANGE_BUCKET_MS
  const kept = changes.filter(([at]) => at > now - FEED_CHANGE_DAYS_MS).map(([at, n]): [number, number] => [at, n])
  const last = kept[kept.length - 1]
  if (last !== undefined && last[0] === hour) last[1]++
  else if (last === undefined || last[0] < hour) kept.push([hour, 1])
  // A clock that went back lands in a past hour: counted there, order kept.
  else {
    const i = kept.findIndex(([at]) => at >= hour)
    if (kept[i]![0] === hour) kept[i]![1]++
    else kept.splice(i, 0, [hour, 1])
  }
  return kept
}

/** A record read from a store that may predate bases, history and state (older records). */
export function normalizeRecord (key: FeedKey, r: Partial<FeedVersionRecord> & FeedVersion): FeedVersionRecord {
  return {
    workspaceId: key.workspaceId,
    contentHash: r.contentHash,
    since: r.since,
    basis: r.basis ?? null,
    state: r.state ?? 'published',
    history: r.history ?? [],
    changes: r.changes ?? [],
  }
}

/**
 * A published record as both stores keep it: one byte string (V8's structured clone copies the
 * encoded rules as they are; the state is small JSON-shaped data).
 */
export function encodePublished (r: PublishedRecord): Buffer {
  return serialize({ state: copyPublishState(r.state), rules: r.rules, savedAt: r.savedAt })
}

export function decodePublished (raw: Uint8Array): PublishedRecord {
  const r = deserialize(raw) as PublishedRecord
  return { state: r.state, rules: r.rules ?? null, savedAt: r.savedAt }
}
