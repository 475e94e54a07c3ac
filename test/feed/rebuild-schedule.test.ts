import t from 'tap'
import { cutAfter, LEAD_MAX_MS, LEAD_MIN_MS, leadOf, nextEstimate, nextRebuildAt } from '../../src/feed/rebuild-schedule.js'
import { LastModifiedKeeper } from '../../src/feed/last-modified.js'
import type { FeedVersionBasis, FeedVersionStore } from '../../src/store/types.js'

t.test('rebuilds fall on the wall-clock boundaries of the interval, the same on every node', async (t) => {
  const cases = [
    { description: 'on a boundary: the next one', lastStart: 60_000, interval: 30_000, expected: 90_000 },
    { description: 'a timer a little late: still the next one', lastStart: 60_700, interval: 30_000, expected: 90_000 },
    { description: 'a timer 800 ms late: still the next one', lastStart: 60_800, interval: 30_000, expected: 90_000 },
    { description: 'a timer 30 ms late on a 1 s interval (the cluster test\'s): the next one', lastStart: 1_700_000_001_030, interval: 1000, expected: 1_700_000_002_000 },
    { description: 'mid-interval (a first build on demand, an expiry): the next boundary', lastStart: 61_500, interval: 30_000, expected: 90_000 },
    { description: 'just before a boundary: that boundary', lastStart: 89_999, interval: 30_000, expected: 90_000 },
    { description: 'never built', lastStart: -Infinity, interval: 30_000, expected: -Infinity },
    { description: 'no interval', lastStart: 1234, interval: 0, expected: 1234 },
    { description: 'a 250 ms interval', lastStart: 1_700_000_000_003, interval: 250, expected: 1_700_000_000_250 },
  ]
  for (const c of cases) {
    const next = nextRebuildAt(c.lastStart, c.interval)
    t.equal(next, c.expected, c.description)
    if (!Number.isFinite(c.lastStart) || c.interval <= 0) continue
    t.ok(next % c.interval === 0 && Math.floor(next / c.interval) > Math.floor(c.lastStart / c.interval), `${c.description}: on a boundary, in a later window than the last build (at most one per interval, SPEC §8)`)
    // A change that arrives after that build marks the feed dirty; the service builds it at
    // max(next, arrival) (feed-service.ts #tick): within the interval of its arrival (DECISIONS §5).
    for (const after of [1, c.interval / 2, next - c.lastStart - 1, next - c.lastStart + 1]) {
      const arrival = c.lastStart + after
      t.ok(Math.max(next, arrival) - arrival <= c.interval, `${c.description}: a change ${after} ms after the build is built within the interval of its arrival (${Math.max(next, arrival) - arrival} ms)`)
    }
  }
  // Two nodes whose last builds started a moment apart at one boundary rebuild together.
  t.equal(nextRebuildAt(30_010, 30_000), nextRebuildAt(30_600, 30_000))
  t.equal(nextRebuildAt(30_000, 30_000), nextRebuildAt(59_999, 30_000), 'a node that built at the boundary and one that built on demand later in the window rebuild together')
})

t.test('expiry under churn: how far ahead a build starts and is cut, from what builds took', async (t) => {
  const leads = [
    { description: 'nothing measured yet', estimate: 0, expected: LEAD_MIN_MS },
    { description: 'a quick build: the floor', estimate: 30, expected: LEAD_MIN_MS },
    { description: 'twice the expected duration', estimate: 1300, expected: 2600 },
    { description: 'bounded', estimate: 60_000, expected: LEAD_MAX_MS },
  ]
  for (const c of leads) t.equal(leadOf(c.estimate), c.expected, `leadOf: ${c.description}`)

  const cuts = [
    { description: 'the soak\'s builds: the rest of this one, then the lead of the next', selectMs: 1000, buildMs: 1300, expected: 3600 },
    { description: 'a quick feed', selectMs: 20, buildMs: 30, expected: 20 + LEAD_MIN_MS },
    { description: 'bounded', selectMs: 20_000, buildMs: 20_000, expected: LEAD_MAX_MS },
  ]
  for (const c of cuts) t.equal(cutAfter(c.selectMs, c.buildMs), c.expected, `cutAfter: ${c.description}`)
  // Under churn a snapshot lapses just past its cut, and its successor starts once it is built:
  // cut that far past the read, the snapshot outlives its successor's build of up to twice the estimate.
  for (const c of cuts.slice(0, 2)) t.ok(cutAfter(c.selectMs, c.buildMs) >= c.selectMs + 2 * c.buildMs, `${c.description}: room for this build and a successor twice as slow`)

  const estimates = [
    { description: 'the first sample', estimate: 0, sample: 1200, expected: 1200 },
    { description: 'a slower build: up at once', estimate: 1000, sample: 1600, expected: 1600 },
    { description: 'a quicker build: a quarter of the way down', estimate: 1200, sample: 400, expected: 1000 },
    { description: 'a process stopped in mid-build counts at most half the largest lead', estimate: 500, sample: 600_000, expected: LEAD_MAX_MS / 2 },
    { description: 'a clock that went back counts as nothing', estimate: 800, sample: -50, expected: 600 },
  ]
  for (const c of estimates) t.equal(nextEstimate(c.estimate, c.sample), c.expected, `nextEstimate: ${c.description}`)
})

t.test('a build that finds a newer basis recorded keeps its content, takes the recorded time and hears it is behind', async (t) => {
  const calls: Array<FeedVersionBasis | undefined> = []
  const store = {
    observe: async (_key: unknown, _hash: string, _now: number, basis?: FeedVersionBasis) => { calls.push(basis); return { contentHash: 'newer', since: 5000 } },
  } as unknown as FeedVersionStore
  const keeper = new LastModifiedKeeper(store, { timeoutMs: 1000 })
  let behind = 0
  const basis = { rulesRevision: 3, adminRevision: 1, geoEpoch: 0, geoDigest: '', expiryCutoff: 7000 }
  const key = { workspaceId: 'w', listId: '*', family: 'v4' as const, action: 'block' as const }
  const v = await keeper.forBuild(basis, () => { behind++ }).observe(key, 'older', 7000)
  t.same(v, { contentHash: 'older', since: 5000 })
  t.equal(behind, 1)
  t.same(calls, [basis], 'the basis went to the store')
  t.equal(keeper.predict(key, 'older', 9000), 9000, 'a content the store did not take is not remembered as its version')
})
