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

/**
 * Expiry under churn (bench/soak: rules lapsing every few hundred microseconds, builds of 1–2 s).
 * A snapshot is valid until the first expiry of a rule it holds, so a build that read the rules as
 * of its start produced, under churn, a snapshot whose first lapse came a few ms after that start:
 * already lapsed when the build ended. Swapping it in started the next build, which ended the same
 * way, and polls waited for builds until their deadline, then answered 500. Two rules fix that:
 *
 * - a build is cut ahead of the instant it reads the rules (`cutAfter`): rules lapsing before the
 *   build is expected to end plus the lead of one more build are left out. Its snapshot is then
 *   valid when swapped in, and stays valid while its successor is built;
 * - a snapshot's successor is started ahead of the snapshot's first lapse (`leadOf` the expected
 *   duration of a whole build, slot wait and rule catch-up included), cut at that lapse or later,
 *   and swapped in at that lapse (FeedService keeps it as the feed's `next` meanwhile), so a poll
 *   finds a valid snapshot as long as builds take at most about twice what they took lately.
 *
 *   snapshot A  ──────────────────────────────────────┤ A.expiresAt: first lapse of a rule in A
 *   build of B         ├── read ── compute ── render ──┤ held     ├─► B swapped in
 *                      ▲ A.expiresAt − leadOf(build)      B is cut at max(read + cutAfter(…), A.expiresAt)
 *
 * A quiet feed (lapses far apart) keeps each rule exactly to its expiry: B is swapped in at the
 * lapse. Under churn the builds follow each other and a rule leaves up to one cut (about three
 * build times, at most LEAD_MAX_MS) ahead of its expiry — never after it (DECISIONS §5).
 */
export const LEAD_MIN_MS = 200
export const LEAD_MAX_MS = 30_000

/** How far ahead of a lapse a build of that expected duration starts: twice it, bounded. */
export function leadOf (estimateMs: number): number {
  return Math.min(LEAD_MAX_MS, Math.max(LEAD_MIN_MS, 2 * estimateMs))
}

/**
 * How far past the instant a build reads the rules it is cut: the rest of this build (`selectMs`,
 * from reading to swap) and the lead of the next one (`buildMs`, a whole build), which can start
 * only once this one is done.
 *
 * @example
 *   cutAfter(1000, 1300) // 3600
 */
export function cutAfter (selectMs: number, buildMs: number): number {
  return Math.min(LEAD_MAX_MS, selectMs + leadOf(buildMs))
}

/**
 * The expected duration of a feed's builds after one took `sampleMs`: up at once to a longer one
 * (a busy pool is the next build's too), down by a quarter of the way to a shorter one (one quick
 * build is no promise). A process stopped in mid-build (SIGSTOP) counts at most LEAD_MAX_MS / 2.
 *
 * @example
 *   nextEstimate(0, 1200)    // 1200
 *   nextEstimate(1200, 400)  // 1000
 */
export function nextEstimate (estimateMs: number, sampleMs: number): number {
  const sample = Math.min(Math.max(sampleMs, 0), LEAD_MAX_MS / 2)
  return sample >= estimateMs ? sample : estimateMs + (sample - estimateMs) / 4
}

/** The geo part of a basis: the newest database build, and the databases' identity. */
export function geoBasis (geo: GeoIndex | null): Pick<FeedVersionBasis, 'geoEpoch' | 'geoDigest'> {
  const sources = geo?.sources ?? []
  return {
    geoEpoch: sources.reduce((max, s) => Math.max(max, s.buildEpoch), 0),
    geoDigest: sources.map((s) => `${s.kind}:${s.databaseType}:${s.buildEpoch}:${s.nodeCount}`).join(','),
  }
}
