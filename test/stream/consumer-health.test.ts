import t from 'tap'
import { HealthTracker, consumerReadiness, type ConsumerHealth } from '../../src/stream/consumer-health.js'

const NOW = 1_800_000_000_000
const healthy: ConsumerHealth = { backlog: 0, oldestUnappliedSeconds: 0, applyErrors: 0, consecutiveFailures: 0, failingSince: null, lastError: null }

t.test('what makes /readyz 503', async (t) => {
  const failing = (ms: number): ConsumerHealth => ({
    backlog: 4000, oldestUnappliedSeconds: ms / 1000, applyErrors: 7, consecutiveFailures: 3, failingSince: NOW - ms, lastError: { message: 'rule store unavailable: MDB_MAP_FULL', at: NOW - 100 },
  })
  const cases: Array<{ description: string, input: ConsumerHealth, expected: true | string }> = [
    { description: 'idle', input: healthy, expected: true },
    { description: 'behind but young', input: { ...healthy, backlog: 60_000, oldestUnappliedSeconds: 29 }, expected: true },
    { description: 'a record waiting over 30 s', input: { ...healthy, backlog: 60_000, oldestUnappliedSeconds: 31 }, expected: 'stream consumer behind: backlog 60000 records, oldest unapplied 31 s' },
    { description: 'failing for 9 s', input: failing(9000), expected: true },
    { description: 'failing for 11 s', input: failing(11_000), expected: 'stream consumer failing for 11 s (3 attempts): rule store unavailable: MDB_MAP_FULL; backlog 4000 records, oldest unapplied 11 s' },
    { description: 'failed long ago, applying since', input: { ...healthy, applyErrors: 7, lastError: { message: 'x', at: NOW - 60_000 } }, expected: true },
  ]
  for (const c of cases) t.equal(consumerReadiness(c.input, NOW), c.expected, c.description)
})

t.test('the tracker: failures, recovery, and the oldest unapplied record', async (t) => {
  const h = new HealthTracker()
  h.offered(10, NOW - 5000)
  h.offered(20, NOW - 3000)
  t.same(h.snapshot(20, NOW), { ...healthy, backlog: 20, oldestUnappliedSeconds: 5 }, 'two batches wait; the first is the oldest')
  h.applied(10)
  t.equal(h.snapshot(10, NOW).oldestUnappliedSeconds, 3, 'the first applied: the second is the oldest')
  h.failed('disk full', NOW - 2000, { seq: 11, acceptedAt: NOW - 4000 })
  h.failed('disk full', NOW - 1000, { seq: 11, acceptedAt: NOW - 4000 })
  t.same(h.snapshot(10, NOW), {
    backlog: 10, oldestUnappliedSeconds: 4, applyErrors: 2, consecutiveFailures: 2, failingSince: NOW - 2000, lastError: { message: 'disk full', at: NOW - 1000 },
  }, 'a failed pass read from the stream: its first record decides the age')
  h.applied(20)
  t.same(h.snapshot(0, NOW), { ...healthy, applyErrors: 2, lastError: { message: 'disk full', at: NOW - 1000 } }, 'applied: nothing waits, the failures are history')
  h.offered(15, NOW)
  t.equal(h.snapshot(0, NOW).oldestUnappliedSeconds, 0, 'an offer at or below the position is not waiting')
})
