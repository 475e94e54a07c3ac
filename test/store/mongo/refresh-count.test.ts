/**
 * Issue 33, item 6: a feed's rule refresh on MongoDB counted every live rule of the workspace
 * (countDocuments over its index range) and the cache then walked its whole table to compare,
 * on the main thread — on every refresh, though only a delete can make the two differ. Each
 * transaction that deletes access rules now raises the workspace's removals count, read first
 * by the catch-up; a caller that saw the same count gets `live: null` and nothing is counted.
 *
 * Fakes of the driver's collections that record each call and answer the few reads made.
 */
import t from 'tap'
import type { ClientSession, MongoClient } from 'mongodb'
import type { Collections } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoStore } from '../../../src/store/mongo/mongo-store.js'

const WS = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'

interface Call { collection: string, op: string, args: unknown[] }

function fakeStore (meta: Map<string, number>) {
  const calls: Call[] = []
  let inTxn = false
  const session = {
    startTransaction () { inTxn = true },
    async commitTransaction () { inTxn = false },
    async abortTransaction () { inTxn = false },
    inTransaction: () => inTxn,
    async endSession () {},
  }
  const client = { startSession: () => session } as unknown as MongoClient
  const cursor = <T>(docs: T[]) => ({
    sort () { return this },
    limit () { return this },
    batchSize () { return this },
    async toArray () { return docs },
    async * [Symbol.asyncIterator] () { yield * docs },
  })
  const collection = (name: string) => new Proxy({}, {
    get: (_target, op: string) => (...args: unknown[]) => {
      calls.push({ collection: name, op, args })
      const filter = args[0] as { _id?: string }
      if (op === 'find') return cursor([])
      if (op === 'findOne') return Promise.resolve(name === 'meta' && meta.has(filter._id!) ? { _id: filter._id, value: meta.get(filter._id!) } : null)
      if (op === 'countDocuments') return Promise.resolve(0)
      if (op === 'deleteOne' || op === 'deleteMany') return Promise.resolve({ deletedCount: 1 })
      if (op === 'bulkWrite') {
        const ops = args[0] as Array<{ updateOne?: { filter: { _id: string } }, deleteMany?: unknown, deleteOne?: unknown }>
        if (name === 'meta') for (const o of ops) if (o.updateOne !== undefined) meta.set(o.updateOne.filter._id, (meta.get(o.updateOne.filter._id) ?? 0) + 1)
        return Promise.resolve({ deletedCount: ops.filter((o) => o.deleteMany !== undefined || o.deleteOne !== undefined).length })
      }
      if (op === 'updateOne') return Promise.resolve({ matchedCount: 1, modifiedCount: 1 })
      return Promise.resolve(null)
    },
  })
  const names = ['workspaces', 'keys', 'lists', 'accessRules', 'expressionRules', 'stream', 'checkpoints', 'feedVersions', 'meta', 'tombstones', 'leases']
  const c = Object.fromEntries(names.map((n) => [n, collection(n)])) as unknown as Collections
  return { store: new MongoStore(new MongoContext(client, c)), calls, session: session as unknown as ClientSession }
}

const counts = (calls: Call[]): number => calls.filter((c) => c.collection === 'accessRules' && c.op === 'countDocuments').length

t.test('a refresh with no delete since the last counts nothing; one after a delete counts', async (t) => {
  const meta = new Map<string, number>()
  const { store, calls } = fakeStore(meta)
  const first = await store.rules.accessRulesChangedSince(WS, -1, 1000, () => {})
  t.equal(first.removals, 0, 'the removals count, 0 before any delete')
  calls.length = 0
  const quiet = await store.rules.accessRulesChangedSince(WS, 5, 1000, () => {}, undefined, first.removals)
  t.equal(quiet.live, null, 'no delete since: live is not counted')
  t.equal(counts(calls), 0, 'no countDocuments')

  const deletes: Array<[string, () => Promise<unknown>]> = [
    ['deleteByRef', () => store.rules.deleteByRef(WS, 'access_rule', 'r-1')],
    ['deleteAccessByTarget', () => store.rules.deleteAccessByTarget(WS, { type: 'ip', value: '192.0.2.1/32' })],
    ['a stream batch with a delete', () => store.applyRuleBatch({ ops: [{ op: 'deleteAccessByTarget', workspaceId: WS, target: { type: 'ip', value: '192.0.2.2/32' } }] })],
  ]
  let seen = quiet.removals
  for (const [name, del] of deletes) {
    await del()
    calls.length = 0
    const after = await store.rules.accessRulesChangedSince(WS, 5, 1000, () => {}, undefined, seen)
    t.equal(after.removals, seen! + 1, `${name}: raised the removals count`)
    t.equal(counts(calls), 1, `${name}: the next refresh counts`)
    t.equal(after.live, 0)
    seen = after.removals
  }
  calls.length = 0
  await store.rules.deleteByRef(WS, 'waf_rule', 'w-1')
  const expression = await store.rules.accessRulesChangedSince(WS, 5, 1000, () => {}, undefined, seen)
  t.equal(expression.live, null, 'an expression rule deleted: access rules not counted')
})
