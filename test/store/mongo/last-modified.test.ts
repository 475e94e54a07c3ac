/**
 * Issue 33, item 7: Last-Modified across nodes. A feed's new run was stamped with the clock of
 * the node that won the compare-and-set; a node whose clock is behind the one that stamped the
 * run before made Last-Modified go backwards. With no server: a fake of the three calls observe
 * makes on the feed_versions collection.
 */
import t from 'tap'
import type { MongoClient } from 'mongodb'
import type { Collections, FeedVersionDoc } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoFeedVersionStore } from '../../../src/store/mongo/feed-version-store.js'
import type { FeedKey } from '../../../src/store/types.js'

function fakeStore () {
  const docs = new Map<string, FeedVersionDoc>()
  const c = {
    feedVersions: {
      async findOne (f: { _id: string }) { return structuredClone(docs.get(f._id) ?? null) },
      async insertOne (d: FeedVersionDoc) { docs.set(d._id, structuredClone(d)) },
      async updateOne (f: { _id: string, contentHash: string, since: number }, u: { $set: Partial<FeedVersionDoc> }) {
        const d = docs.get(f._id)
        if (d === undefined || d.contentHash !== f.contentHash || d.since !== f.since) return { matchedCount: 0 }
        docs.set(f._id, { ...d, ...structuredClone(u.$set) })
        return { matchedCount: 1 }
      },
    },
  }
  return new MongoFeedVersionStore(new MongoContext({} as MongoClient, c as unknown as Collections))
}

const key: FeedKey = { workspaceId: '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c', listId: '*', family: 'v4', action: 'block' }
const T = 1_700_000_000_000

t.test('a new run starts at max(now, previous + 1 s): Last-Modified never goes back across nodes', async (t) => {
  const cases = [
    { description: 'the next node\'s clock is 800 ms behind', previousAt: T, now: T - 800, expected: T + 1000 },
    { description: 'within the same second', previousAt: T, now: T + 300, expected: T + 1000 },
    { description: 'a clock ahead by a minute, then a correct one', previousAt: T + 60_000, now: T + 1000, expected: T + 61_000 },
    { description: 'well after the run before: its own time', previousAt: T, now: T + 5000, expected: T + 5000 },
  ]
  for (const c of cases) {
    const store = fakeStore()
    t.equal((await store.observe(key, 'A', c.previousAt)).since, c.previousAt, `${c.description}: first run`)
    const v = await store.observe(key, 'B', c.now)
    t.equal(v.since, c.expected, c.description)
    t.ok(Math.floor(v.since / 1000) > Math.floor(c.previousAt / 1000), `${c.description}: a later HTTP-date`)
  }
})
