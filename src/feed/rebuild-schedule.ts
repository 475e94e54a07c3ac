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
 * When a dirty feed rebuilds next: the first boundary of `intervalMs` at least an interval after
 * `lastStart` (SPEC §8: at most one rebuild per interval), less a timer's lateness allowance of
 * 2.5 % of the interval (at most 1 s) so that a build a timer started a few milliseconds past its
 * boundary still rebuilds at the next one. A build that started off a boundary (a first build on
 * demand, an expiry, a late timer) skips to the boundary after; from there on every node is on the
 * same boundaries.
 *
 * @example
 *   nextRebuildAt(60_004, 30_000) // 90_000
 *   nextRebuildAt(61_500, 30_000) // 120_000
 */
export function nextRebuildAt (lastStart: number, intervalMs: number): number {
  if (intervalMs <= 0 || !Number.isFinite(lastStart)) return lastStart + intervalMs
  const earliest = lastStart + intervalMs - Math.min(intervalMs * 0.025, 1000)
  return Math.ceil(earliest / intervalMs) * intervalMs
}

/** The geo part of a basis: the newest database build, and the databases' identity. */
export function geoBasis (geo: GeoIndex | null): Pick<FeedVersionBasis, 'geoEpoch' | 'geoDigest'> {
  const sources = geo?.sources ?? []
  return {
    geoEpoch: sources.reduce((max, s) => Math.max(max, s.buildEpoch), 0),
    geoDigest: sources.map((s) => `${s.kind}:${s.databaseType}:${s.buildEpoch}:${s.nodeCount}`).join(','),
  }
}
