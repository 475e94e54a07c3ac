/**
 * Issue 33, item 2: on MongoDB the sweep starved the applier. Every rule write raised the global
 * rules revision inside its transaction, so a long apply conflicted with every short sweep or
 * admin write that committed during it, and lost. With no server: a recording fake of the driver
 * that notes each call, whether it was made in the session, and whether the transaction had
 * committed by then.
 */
import t from 'tap'
import type { ClientSession, MongoClient } from 'mongodb'
import type { Collections } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoRuleStore } from '../../../src/store/mongo/rule-store.js'
import { newHousekeepingCounters, type AccessRuleInput } from '../../../src/store/types.js'

interface Call { collection: string, method: string, filterId: unknown, inSession: boolean, afterCommit: boolean }

function fakeMongo (lapsedIds: string[] = []) {
  const calls: Call[] = []
  let commits = 0
  const session = {
    startTransaction () {},
    async commitTransaction () { commits++ },
    async abortTransaction () {},
    inTransaction: () => false,
    async endSession () {},
  }
  let committedBefore = 0
  const client = { startSession: () => { committedBefore = commits; return session } } as unknown as MongoClient
  const cursor = (docs: unknown[]) => {
    const c = { sort: () => c, limit: () => c, toArray: async () => docs }
    return c
  }
  const collection = (name: string) => new Proxy({}, {
    get (_t, method: string) {
      return (...args: unknown[]) => {
        const options = args.find((a, i) => i > 0 && typeof a === 'object' && a !== null && 'session' in a) as { session?: ClientSession } | undefined
        const filter = args[0] as { _id?: unknown } | unknown[] | undefined
        calls.push({ collection: name, method, filterId: Array.isArray(filter) ? filter.map((op) => (op as { updateOne?: { filter: { _id: unknown } } }).updateOne?.filter._id) : filter?._id, inSession: options?.session === (session as unknown), afterCommit: commits > committedBefore })
        switch (method) {
          case 'find': return cursor(name === 'accessRules' && options === undefined ? lapsedIds.map((_id) => ({ _id })) : [])
          case 'findOne': return Promise.resolve(null)
          case 'estimatedDocumentCount': return Promise.resolve(0)
          case 'bulkWrite': return Promise.resolve({ deletedCount: 0 })
          case 'deleteMany': return Promise.resolve({ deletedCount: 0 })
          case 'deleteOne': return Promise.resolve({ deletedCount: 1 })
          default: return Promise.resolve({})
        }
      }
    },
  })
  const names = ['accessRules', 'expressionRules', 'checkpoints', 'meta', 'tombstones']
  const c = Object.fromEntries(names.map((n) => [n, collection(n)])) as unknown as Collections
  const rules = new MongoRuleStore(new MongoContext(client, c), newHousekeepingCounters(), 1000)
  return { rules, calls }
}

const WS = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'
const input: AccessRuleInput = { kind: 'access_rule', workspaceId: WS, ruleRef: null, labels: {}, reason: null, expiresAt: null, seq: 1, target: { type: 'ip', value: '192.0.2.1/32' }, action: 'block', name: null, confidence: null, severity: null }

t.test('no rule write raises the global rules revision inside its transaction; each raises it after its commit', async (t) => {
  const cases = [
    { description: 'an apply', run: (r: MongoRuleStore) => r.applyRuleBatch({ ops: [{ op: 'upsertAccessRule', input }], checkpoint: { consumer: 'rules', seq: 1, expected: 0 } }), ids: [`revision:rules:${WS}`] },
    // A delete also raises the workspace's removals count (issue 33 item 6), in the same round trip.
    { description: 'a delete', run: (r: MongoRuleStore) => r.deleteByRef(WS, 'access_rule', 'ref-1'), ids: [`revision:rules:${WS}`, `removals:rules:${WS}`] },
  ]
  for (const c of cases) {
    const mongo = fakeMongo()
    await c.run(mongo.rules)
    const global = mongo.calls.filter((x) => x.collection === 'meta' && x.filterId === 'revision:rules')
    t.same(global.map((x) => ({ inSession: x.inSession, afterCommit: x.afterCommit })), [{ inSession: false, afterCommit: true }], `${c.description}: raised once, after the commit`)
    const workspace = mongo.calls.filter((x) => x.collection === 'meta' && x.filterId !== 'revision:rules')
    t.same(workspace.map((x) => ({ method: x.method, inSession: x.inSession, ids: x.filterId })), [{ method: 'bulkWrite', inSession: true, ids: c.ids }], `${c.description}: the workspace revisions in the transaction, in one round trip`)
  }
})

t.test('an apply that asks for a sweep gets one, in a transaction after its own', async (t) => {
  const mongo = fakeMongo()
  const r = await mongo.rules.applyRuleBatch({ ops: [{ op: 'upsertAccessRule', input }], checkpoint: { consumer: 'rules', seq: 1, expected: 0 }, sweep: { now: 1_000_000, limit: 10 } })
  t.same(r.swept, { removed: 0, tombstonesDropped: 0, staleCleaned: 0, more: false }, 'the sweep pass is reported')
  const sweepRead = mongo.calls.findIndex((x) => x.method === 'find' && x.collection === 'accessRules' && !x.inSession)
  const applyCommit = mongo.calls.findIndex((x) => x.afterCommit)
  t.ok(sweepRead > -1 && applyCommit > -1 && sweepRead >= applyCommit, 'the sweep starts once the apply has committed')
})
