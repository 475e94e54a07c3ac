/**
 * Feed figures for /metrics (DECISIONS §6): snapshot age and entries per feed, build durations and
 * outcomes. Registered on the HTTP side's Metrics object (src/http/metrics.ts: gauge(), histogram(),
 * counter()), seen here through a structural interface because feed/ may not import http/.
 */
import type { FeedSnapshot } from './snapshot-types.js'

type Labels = Record<string, string | number>

export interface GaugeLike { set (labels: Labels, value: number): void, remove (labels: Labels): void }
export interface HistogramLike { observe (labels: Labels, value: number): void }
export interface CounterLike { inc (labels: Labels, value?: number): void }

/** What src/http/metrics.ts `Metrics` offers (structurally). */
export interface MetricsSink {
  gauge (name: string, help: string, labelNames?: string[]): GaugeLike
  histogram (name: string, help: string, buckets: number[], labelNames?: string[]): HistogramLike
  counter (name: string, help: string, labelNames?: string[]): CounterLike
}

export type BuildReason = 'start' | 'change' | 'expiry' | 'demand' | 'geo' | 'retry'
export type BuildOutcome = 'built' | 'unchanged' | 'failed'

export interface FeedMetrics {
  observeBuild (reason: BuildReason, outcome: BuildOutcome, seconds: number): void
  setSnapshot (s: FeedSnapshot): void
  setAge (workspaceId: string, feedId: string, seconds: number): void
  removeFeed (workspaceId: string, feedId: string): void
  /** Feeds whose latest build a publish guard holds (a count, not a label per feed). */
  setHeld? (count: number): void
}

/**
 * @example
 *   const feedMetrics = registerFeedMetrics(metrics) // metrics: src/http/metrics.ts Metrics
 *   new FeedService({ store, pool, config, log, metrics: feedMetrics })
 */
export function registerFeedMetrics (sink: MetricsSink): FeedMetrics {
  const age = sink.gauge('threatfeed_feed_snapshot_age_seconds', 'Seconds since the feed snapshot being served was built', ['workspace', 'feed'])
  const entries = sink.gauge('threatfeed_feed_entries', 'Networks in the feed by action and family', ['workspace', 'feed', 'action', 'family'])
  const builds = sink.counter('threatfeed_feed_builds_total', 'Feed snapshot builds by trigger and outcome', ['reason', 'outcome'])
  const durations = sink.histogram('threatfeed_feed_build_duration_seconds', 'Feed snapshot build time (rules to swapped snapshot)',
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], ['outcome'])
  const held = sink.gauge('threatfeed_feed_held', 'Feeds whose latest build a publish guard holds')
  return {
    setHeld (count) {
      held.set({}, count)
    },
    observeBuild (reason, outcome, seconds) {
      builds.inc({ reason, outcome })
      if (outcome !== 'unchanged') durations.observe({ outcome }, seconds)
    },
    setSnapshot (s) {
      for (const action of ['block', 'allow'] as const) {
        for (const family of ['v4', 'v6'] as const) {
          entries.set({ workspace: s.workspaceId, feed: s.feedId, action, family }, s.networks[action][family])
        }
      }
    },
    setAge (workspace, feed, seconds) {
      age.set({ workspace, feed }, seconds)
    },
    removeFeed (workspace, feed) {
      age.remove({ workspace, feed })
      for (const action of ['block', 'allow']) for (const family of ['v4', 'v6']) entries.remove({ workspace, feed, action, family })
    },
  }
}
