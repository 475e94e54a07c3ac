/**
 * Issue 33, item 9: the admin API's rule listing on MongoDB read every rule of the workspace for
 * each page (unindexed, then sorted in memory). RuleStore#rulesNewestFirst reads newest first
 * through the workspace_created index and stops once the caller has its page.
 * A fake of the collection that yields documents in the order asked and counts what it yielded.
 */
import t from 'tap'
import type { MongoClient } from 'mongodb'
import { INDEXES, type AccessRuleDoc, type Collections } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoStore } from '../../../src/store/mongo/mongo-store.js'
import type { Rule } from '../../../src/store/types.js'

const WS = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'
const doc = (i: number): AccessRuleDoc => ({
  _id: `id-${String(i).padStart(5, '0')}`, workspaceId: WS, identity: `t:ip:10.0.${i >> 8}.${i & 255}/32`, targetKey: '', ruleRef: null,
  target: { type: 'ip', value: `10.0.${i >> 8}.${i & 255}/32` }, action: 'block', name: null, confidence: null, severity: null,
  labels: [], reason: null, expiresAt: null, createdAt: 1000 + Math.floor(i / 2), updatedAt: 0, seq: i,
})

t.test('a page of rules is read newest first through an index, and the read stops with the page', async (t) => {
  const docs = Array.from({ length: 10_000 }, (_, i) => doc(i))
  const seen: Array<{ filter: unknown, sort: unknown }> = []
  let yielded = 0
  const accessRules = {
    find (filter: { $or?: Array<{ createdAt: number | { $lt: number }, _id?: { $lt: string } }> }) {
      const call = { filter, sort: null as unknown }
      seen.push(call)
      const before = filter.$or
      const older = (d: AccessRuleDoc): boolean => before === undefined || d.createdAt < (before[0]!.createdAt as { $lt: number }).$lt || (d.createdAt === before[1]!.createdAt && d._id < before[1]!._id!.$lt)
      const cursor = {
        sort (s: unknown) { call.sort = s; return cursor },
        batchSize () { return cursor },
        async * [Symbol.asyncIterator] () {
          const sorted = docs.filter(older).sort((a, b) => b.createdAt - a.createdAt || (a._id < b._id ? 1 : -1))
          for (const d of sorted) { yielded++; yield d }
        },
      }
      return cursor
    },
  }
  const client = {} as unknown as MongoClient
  const store = new MongoStore(new MongoContext(client, { accessRules } as unknown as Collections))
  const page = async (before: { at: number, id: string } | undefined): Promise<Rule[]> => {
    const kept: Rule[] = []
    await store.rules.rulesNewestFirst(WS, 'access_rule', before, (r) => { kept.push(r); return kept.length < 101 })
    return kept
  }
  const first = await page(undefined)
  t.equal(yielded, 101, 'the page and one more read, not the 10,000')
  t.same(first.slice(0, 3).map((r) => r.id), ['id-09999', 'id-09998', 'id-09997'])
  t.same(seen[0]?.sort, { createdAt: -1, _id: -1 })
  yielded = 0
  const last = first[99]!
  const second = await page({ at: last.createdAt, id: last.id })
  t.equal(second[0]!.id, first[100]!.id, 'the next page starts after the cursor')
  t.equal(yielded, 101)
  const indexes = INDEXES.find(([name]) => name === 'accessRules')![1]
  t.ok(indexes.some((i) => JSON.stringify(i.key) === JSON.stringify({ workspaceId: 1, createdAt: -1, _id: -1 })), 'an index serves the filter and the sort')
})
