/**
 * The settings of feed consumer tracking (issue 20): THREATFEED_CONSUMER_TRACKING,
 * THREATFEED_CONSUMER_STALE and THREATFEED_TRUSTED_PROXIES, validated at start; and the
 * stale rule's arithmetic on records (the HTTP tests cover it end to end).
 */
import t from 'tap'
import { loadConfig } from '../../src/config.js'
import { consumerStatus } from '../../src/feed/consumer-status.js'
import { INTERVAL_BUCKETS_MS, intervalBucket, medianInterval } from '../../src/store/consumer-record.js'
import { consumerTally } from '../store/contract-consumers.js'

t.test('defaults: tracking on, stale after 15 minutes, no trusted proxy', async (t) => {
  const c = loadConfig({})
  t.equal(c.consumerTracking, true)
  t.equal(c.consumerStaleMs, 900_000)
  t.same(c.trustedProxies, [])
})

t.test('values are read; proxies are kept as canonical networks', async (t) => {
  const c = loadConfig({ THREATFEED_CONSUMER_TRACKING: 'off', THREATFEED_CONSUMER_STALE: '1h', THREATFEED_TRUSTED_PROXIES: '127.0.0.1, 10.1.2.3/8 ::ffff:192.0.2.0/120,2001:DB8::/32' })
  t.equal(c.consumerTracking, false)
  t.equal(c.consumerStaleMs, 3_600_000)
  t.same(c.trustedProxies, ['127.0.0.1/32', '10.0.0.0/8', '192.0.2.0/24', '2001:db8::/32'])
})

t.test('a bad value names the variable', async (t) => {
  const bad: Array<{ description: string, env: Record<string, string>, message: RegExp }> = [
    { description: 'tracking neither on nor off', env: { THREATFEED_CONSUMER_TRACKING: 'yes' }, message: /THREATFEED_CONSUMER_TRACKING must be one of on, off, got "yes"/ },
    { description: 'stale without a unit', env: { THREATFEED_CONSUMER_STALE: '900' }, message: /THREATFEED_CONSUMER_STALE must be a duration such as 90s, 15m, 12h or 7d, got "900"/ },
    { description: 'stale under a second', env: { THREATFEED_CONSUMER_STALE: '500ms' }, message: /THREATFEED_CONSUMER_STALE must be between 1s and 30d, got 500ms/ },
    { description: 'stale over 30 days', env: { THREATFEED_CONSUMER_STALE: '31d' }, message: /THREATFEED_CONSUMER_STALE must be between 1s and 30d, got 31d/ },
    { description: 'a proxy that is a name', env: { THREATFEED_TRUSTED_PROXIES: 'nginx.local' }, message: /THREATFEED_TRUSTED_PROXIES must be a list of CIDRs or addresses separated by commas, got "nginx.local"/ },
    { description: 'a prefix too long', env: { THREATFEED_TRUSTED_PROXIES: '10.0.0.0/33' }, message: /THREATFEED_TRUSTED_PROXIES .* got "10.0.0.0\/33"/ },
    { description: 'an octet out of range', env: { THREATFEED_TRUSTED_PROXIES: '127.0.0.1,10.0.0.256' }, message: /got "10.0.0.256"/ },
    { description: 'a range', env: { THREATFEED_TRUSTED_PROXIES: '10.0.0.1-10.0.0.9' }, message: /got "10.0.0.1-10.0.0.9"/ },
  ]
  for (const c of bad) t.throws(() => loadConfig(c.env), { code: 'TF_ERR_CONFIG', message: c.message }, c.description)
})

t.test('interval buckets: each interval in the first bucket that holds it; the median within 25 %', async (t) => {
  for (const ms of [1, 1000, 1001, 60_000, 61_000, 3_600_000, 86_400_000, 10 * 86_400_000]) {
    const k = intervalBucket(ms)
    t.ok(k === INTERVAL_BUCKETS_MS.length || INTERVAL_BUCKETS_MS[k]! >= ms, `${ms} fits bucket ${k}`)
    t.ok(k === 0 || INTERVAL_BUCKETS_MS[k - 1]! < ms, `${ms} not in the bucket before`)
  }
  t.equal(medianInterval({}), null)
  const median = medianInterval({ [intervalBucket(60_000)]: 5, [intervalBucket(3_600_000)]: 2 })!
  t.ok(median >= 60_000 && median <= 75_000, `median ${median} of mostly one-minute polls`)
})

t.test('the stale rule: the larger of the setting and three median intervals, or three 4xx in a row', async (t) => {
  const now = 10 * 3_600_000
  const hourly = consumerTally('ws', { lastSeen: now - 2 * 3_600_000, intervals: { [intervalBucket(3_600_000)]: 10 }, held: { at: now - 2 * 3_600_000, etag: '"e"', since: 0 } })
  const s = consumerStatus(hourly, null, now, 900_000)
  t.equal(s.stale, false, 'an hourly EDL is not stale after two hours')
  t.ok(s.staleAfterMs >= 3 * 3_600_000)
  t.equal(s.pollsPerHour, Math.round(3_600_000 / s.medianIntervalMs!))
  t.equal(consumerStatus({ ...hourly, lastSeen: now - 5 * 3_600_000 }, null, now, 900_000).reason, 'silent', 'stale after five')
  const failing = consumerTally('ws', { lastSeen: now, recentFails: [now, now - 1, now - 2], held: { at: now - 3, etag: '"e"', since: 0 } })
  t.equal(consumerStatus(failing, null, now, 900_000).reason, 'failing')
  t.equal(consumerStatus({ ...failing, held: { at: now - 1.5, etag: '"e"', since: 0 } }, null, now, 900_000).stale, false, 'a success among the last three')
  t.same(consumerStatus(failing, { contentHash: 'h', since: 1500 }, now, 900_000).behind, { behind: true, versions: null }, 'a version started after the one held')
  t.same(consumerStatus({ ...failing, held: { at: 1, etag: '"e"', since: 1000 } }, { contentHash: 'h', since: 1999 }, now, 900_000).behind, { behind: false, versions: 0 }, 'the same second: current')
  /** n earlier runs, newest first, a second apart, the newest at `newest`. */
  const history = (n: number, newest = 10_000): Array<{ contentHash: string, since: number }> => Array.from({ length: n }, (_, i) => ({ contentHash: `h${i}`, since: newest - 1000 * i }))
  const behind = (held: number, record: { contentHash: string, since: number, history: Array<{ contentHash: string, since: number }> }): unknown => consumerStatus({ ...failing, held: { at: 1, etag: '"e"', since: held } }, record, now, 900_000).behind
  const cases = [
    { description: 'the run before the current one: one behind', held: 10_000, record: { contentHash: 'h', since: 11_000, history: history(3) }, expected: { behind: true, versions: 1 } },
    { description: 'three runs back: three behind', held: 8000, record: { contentHash: 'h', since: 11_000, history: history(5) }, expected: { behind: true, versions: 3 } },
    { description: 'older than a full history: at least that many, not counted', held: 0, record: { contentHash: 'h', since: 50_000, history: history(32, 49_000) }, expected: { behind: true, versions: null } },
    { description: 'holds the current run', held: 11_000, record: { contentHash: 'h', since: 11_000, history: history(3) }, expected: { behind: false, versions: 0 } },
  ]
  for (const c of cases) t.same(behind(c.held, c.record), c.expected, c.description)
})
