/**
 * Issue 33, item 7: a node's clock against the store server's — measured from MongoDB's `hello`,
 * logged past half a second, exported as a metric.
 */
import t from 'tap'
import type { MongoClient } from 'mongodb'
import { Metrics, registerClockSkewMetric } from '../../src/http/metrics.js'
import { CLOCK_SKEW_WARN_MS, ClockSkewWatch } from '../../src/store/clock-skew.js'
import type { Collections } from '../../src/store/mongo/collections.js'
import { MongoContext } from '../../src/store/mongo/mongo-context.js'
import { MongoStore } from '../../src/store/mongo/mongo-store.js'

/** A MongoStore whose server answers `hello` with its clock `offsetMs` ahead of ours, after `rttMs`. */
function storeWithServerClock (offsetMs: number, rttMs: number): MongoStore {
  const client = {
    db: () => ({
      async command (cmd: Record<string, unknown>) {
        if (cmd.hello !== 1) throw new Error(`fake: unexpected command ${JSON.stringify(cmd)}`)
        await new Promise((resolve) => setTimeout(resolve, rttMs / 2))
        const localTime = new Date(Date.now() + offsetMs)
        await new Promise((resolve) => setTimeout(resolve, rttMs / 2))
        return { isWritablePrimary: true, setName: 'rs0', localTime }
      },
    }),
  } as unknown as MongoClient
  return new MongoStore(new MongoContext(client, {} as Collections))
}

t.test('the skew is measured against the server\'s time, logged past the limit, and exported', async (t) => {
  const cases = [
    { description: 'in step', offsetMs: 0, warned: false },
    { description: 'the server 2 s ahead', offsetMs: 2000, warned: true },
    { description: 'the server 900 ms behind', offsetMs: -900, warned: true },
    { description: 'within the limit', offsetMs: CLOCK_SKEW_WARN_MS - 200, warned: false },
  ]
  for (const c of cases) {
    const warnings: object[] = []
    const watch = new ClockSkewWatch(storeWithServerClock(c.offsetMs, 40), { warn: (fields) => { warnings.push(fields) } })
    const skew = await watch.check()
    t.ok(skew !== null && Math.abs(skew - c.offsetMs) <= 30, `${c.description}: measured ${skew} ms`)
    t.equal(warnings.length, c.warned ? 1 : 0, `${c.description}: ${c.warned ? 'logged' : 'not logged'}`)
    const metrics = new Metrics({ processMetrics: false })
    registerClockSkewMetric(metrics, () => watch.skewMs)
    const text = await metrics.registry.metrics()
    const value = Number(/^threatfeed_store_clock_skew_seconds (\S+)$/m.exec(text)?.[1])
    t.ok(Math.abs(value - c.offsetMs / 1000) <= 0.03, `${c.description}: the metric (${value} s)`)
  }
})

t.test('a store that does not answer leaves no stale value', async (t) => {
  const failing = { clockSkew: async () => { throw new Error('no primary') } }
  const watch = new ClockSkewWatch(failing, { warn: () => { t.fail('nothing to warn about') } })
  t.equal(await watch.check(), null)
  t.equal(watch.skewMs, null)
})
