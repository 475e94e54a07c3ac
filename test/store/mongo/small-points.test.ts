/**
 * Issue 33, items 6 and 9 (the smaller ones): the live-rule count of a rebuild and fetchedSince
 * served by indexes; revisionsOf in bounded queries, not one $in over every workspace.
 */
import t from 'tap'
import type { MongoClient } from 'mongodb'
import { INDEXES, type Collections } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoRuleStore, REVISIONS_PER_QUERY } from '../../../src/store/mongo/rule-store.js'
import { newHousekeepingCounters } from '../../../src/store/types.js'

t.test('the queries that scanned have indexes', async (t) => {
  const keys = (c: string) => (INDEXES.find(([name]) => name === c)?.[1] ?? []).map((i) => JSON.stringify(i.key))
  const cases = [
    { description: 'the live-rule count of a rebuild (workspace, expiry)', collection: 'accessRules', key: { workspaceId: 1, expiresAt: 1 } },
    { description: 'fetchedSince (feeds served since)', collection: 'feedVersions', key: { fetchedAt: 1 } },
    { description: 'the append-id lookup', collection: 'stream', key: { appendId: 1 } },
  ]
  for (const c of cases) t.ok(keys(c.collection).includes(JSON.stringify(c.key)), c.description)
})

t.test('revisionsOf asks for at most REVISIONS_PER_QUERY workspaces a query', async (t) => {
  const queried: number[] = []
  const meta = {
    find (f: { _id: { $in: string[] } }) {
      queried.push(f._id.$in.length)
      return (async function * () { for (const id of f._id.$in.slice(0, 1)) yield { _id: id, value: 7 } })()
    },
  }
  const rules = new MongoRuleStore(new MongoContext({} as MongoClient, { meta } as unknown as Collections), newHousekeepingCounters(), 1000)
  const ids = Array.from({ length: 2500 }, (_, i) => `ws-${i}`)
  const out = await rules.revisionsOf(ids)
  t.same(queried, [REVISIONS_PER_QUERY, REVISIONS_PER_QUERY, 500])
  t.equal(out.size, 2500, 'every workspace answered')
  t.same([out.get('ws-0'), out.get('ws-1000'), out.get('ws-2000'), out.get('ws-1')], [7, 7, 7, 0])
})
