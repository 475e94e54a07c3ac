import t from 'tap'
import { Metrics } from '../../src/http/metrics.js'
import { registerFeedMetrics } from '../../src/feed/metrics.js'
import type { FeedSnapshot } from '../../src/feed/snapshot-types.js'

t.test('feed metrics appear in the Prometheus text: age, entries, build durations and outcomes', async (t) => {
  const metrics = new Metrics()
  const feed = registerFeedMetrics(metrics)
  const snapshot = { workspaceId: 'w1', feedId: '*', networks: { block: { v4: 131072, v6: 3 }, allow: { v4: 1, v6: 0 } } } as unknown as FeedSnapshot
  feed.setSnapshot(snapshot)
  feed.setAge('w1', '*', 12.5)
  feed.observeBuild('change', 'built', 0.42)
  feed.observeBuild('expiry', 'failed', 0.01)
  feed.observeBuild('change', 'unchanged', 0.001)
  const text = (await metrics.render()).body
  t.match(text, /threatfeed_feed_snapshot_age_seconds\{workspace="w1",feed="\*"\} 12\.5/)
  t.match(text, /threatfeed_feed_entries\{workspace="w1",feed="\*",action="block",family="v4"\} 131072/)
  t.match(text, /threatfeed_feed_builds_total\{reason="change",outcome="built"\} 1/)
  t.match(text, /threatfeed_feed_builds_total\{reason="expiry",outcome="failed"\} 1/)
  t.match(text, /threatfeed_feed_builds_total\{reason="change",outcome="unchanged"\} 1/)
  t.match(text, /threatfeed_feed_build_duration_seconds_count\{outcome="built"\} 1/)
  feed.removeFeed('w1', '*')
  const after = (await metrics.render()).body
  t.notMatch(after, /threatfeed_feed_snapshot_age_seconds\{workspace="w1"/)
  t.notMatch(after, /threatfeed_feed_entries\{workspace="w1"/)
})
