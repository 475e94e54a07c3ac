/** The feed service reads every workspace's rules revision in one call per poll where the store offers it (RuleStore#revisionsOf). */
import t from 'tap'
import { FeedService } from '../../src/feed/feed-service.js'
import { createPool } from '../../src/pool/pool.js'
import { FAULTY_WORKER } from '../fixtures/pool/faults.js'
import type { Store } from '../../src/store/types.js'
import { addRules, rule, silentLog, tempStore, testGeo } from './fixtures.js'

const geo = await testGeo()
const pool = createPool({ workers: 1, taskTimeoutMs: 5000, filename: FAULTY_WORKER })
t.teardown(() => pool.destroy())

t.test('a change in one of many workspaces costs one revision read per poll, not one per workspace', async (t) => {
  const tmp = await tempStore()
  t.teardown(() => tmp.cleanup())
  const counts = { revisionOf: 0, revisionsOf: 0 }
  const readOneByOne: string[] = []
  const rules = tmp.store.rules
  const counted = new Proxy(rules, {
    get (target, prop, receiver) {
      if (prop === 'revisionOf') return async (id: string) => { counts.revisionOf++; readOneByOne.push(id); return target.revisionOf(id) }
      if (prop === 'revisionsOf') {
        return async (ids: readonly string[]) => {
          counts.revisionsOf++
          return new Map(await Promise.all(ids.map(async (id) => [id, await target.revisionOf(id)] as const)))
        }
      }
      const value = Reflect.get(target, prop, receiver) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  const store = new Proxy(tmp.store, {
    get: (target, prop) => {
      if (prop === 'rules') return counted
      const value = Reflect.get(target, prop) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  }) as Store
  const workspaces = await Promise.all(Array.from({ length: 6 }, (_, i) => tmp.store.workspaces.create({ name: `w${i}`, subscription: 'active' })))
  const feeds = new FeedService({ store, pool, config: { feedRebuildMs: 60_000, pollMs: 20 }, log: silentLog, geo, awaitMs: 8000 })
  await feeds.start()
  t.teardown(() => feeds.stop())
  for (const w of workspaces) await feeds.awaitSnapshot(w.id, '*')
  counts.revisionOf = 0
  counts.revisionsOf = 0
  readOneByOne.length = 0
  await addRules(tmp.store, [rule(workspaces[0]!.id, '192.0.2.0/24')])
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.ok(counts.revisionsOf >= 1, `the poll read the revisions at once (${counts.revisionsOf} calls)`)
  // The changed workspace's own rebuild reads its revision (if a minute boundary falls in the
  // wait); no other workspace's is read one by one.
  t.same(readOneByOne.filter((id) => id !== workspaces[0]!.id), [], 'and no other workspace one by one')
})
