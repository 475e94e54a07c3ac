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
 * When a dirty feed rebuilds next: the boundary that ends the interval-long window its last build
 * started in. SPEC §8's "at most one rebuild per interval" is counted in these windows, which are
 * the same on every node, so the fleet still changes content at most once per interval. A build
 * that started off a boundary (a first build on demand, an expiry, a late timer) must not push
 * the next one two boundaries away: that node would serve the old content for an interval after
 * the others switched, past the "interval + 1 s" a change has to show in (DECISIONS §5).
 *
 * @example
 *   nextRebuildAt(60_000, 30_000) // 90_000
 *   nextRebuildAt(61_500, 30_000) // 90_000
 *   nextRebuildAt(89_999, 30_000) // 90_000
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
