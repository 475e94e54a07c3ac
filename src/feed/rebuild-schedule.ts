/**
 * What several nodes need to agree on a feed's version: when they rebuild, and what each build
 * records it was built from (store/feed-version-record.ts orders the records by it).
 *
 * Rebuilds fall on the wall-clock boundaries of the rebuild interval (multiples of it since the
 * epoch), so every node behind a balancer changes content at the same moment instead of each at
 * its own phase — a fleet hopping between nodes would otherwise see the old and the new content
 * alternate for up to an interval after each change.
 */
import type { GeoIndex } from '../geo/geo-index.js'
import type { FeedVersionBasis } from '../store/types.js'

/**
 * The first boundary of `intervalMs` after `lastStart`: when a dirty feed rebuilds next.
 * Rebuilds after a first build (on demand, at any moment) or an expiry build may come sooner
 * than a whole interval after it, but at most one falls on each boundary.
 *
 * @example
 *   nextRebuildAt(61_500, 30_000) // 90_000
 */
export function nextRebuildAt (lastStart: number, intervalMs: number): number {
  if (intervalMs <= 0 || !Number.isFinite(lastStart)) return lastStart + intervalMs
  return (Math.floor(lastStart / intervalMs) + 1) * intervalMs
}

/** The geo part of a basis: the newest database build, and the databases' identity. */
export function geoBasis (geo: GeoIndex | null): Pick<FeedVersionBasis, 'geoEpoch' | 'geoDigest'> {
  const sources = geo?.sources ?? []
  return {
    geoEpoch: sources.reduce((max, s) => Math.max(max, s.buildEpoch), 0),
    geoDigest: sources.map((s) => `${s.kind}:${s.databaseType}:${s.buildEpoch}:${s.nodeCount}`).join(','),
  }
}
