/**
 * The MongoDB review points (issue 18) that need no server, through fakes of the driver's
 * collections and session: creations write the workspace (no write skew with a delete), every
 * workspace's revision in one query, changed rules read with a projection. The rest (lease,
 * ordering guard, two consumers) is in the store contract, which runs on a real replica set.
 */
import t from 'tap'
import type { ClientSession, MongoClient } from 'mongodb'
import type { Collections } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoStore } from '../../../src/store/mongo/mongo-store.js'

interface Call { collection: string, op: string, filter: unknown, options: Record<string, unknown> | undefined, inSession: boolean }

/** A store over fake collections that record every call; `workspaceLive` says whether the workspace filter matches. */
function fakeStore (opts: { workspaceLive: boolean, metaDocs?: Array<{ _id: string, value: number }> }) {
  const calls: Call[] = []
  const session = {
    startTransaction () {},
    async commitTransaction () {},
    async abortTransaction () {},
    inTransaction: () => false,
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
    get: (_target, op: string) => (filter: unknown, second?: unknown, third?: unknown) => {
      const options = (op === 'updateOne' || op === 'findOneAndUpdate' ? third : second) as Record<string, unknown> | undefined
      calls.push({ collection: name, op, filter, options, inSession: (options?.session as ClientSession | undefined) === (session as unknown) })
      if (op === 'find') return cursor(name === 'meta' ? opts.metaDocs ?? [] : [])
      if (op === 'updateOne') return Promise.resolve({ matchedCount: name === 'workspaces' && !opts.workspaceLive ? 0 : 1, modifiedCount: 1 })
      if (op === 'countDocuments') return Promise.resolve(0)
      return Promise.resolve(null)
    },
  })
  const names = ['workspaces', 'keys', 'lists', 'accessRules', 'expressionRules', 'stream', 'checkpoints', 'feedVersions', 'meta', 'tombstones', 'leases']
  const c = Object.fromEntries(names.map((n) => [n, collection(n)])) as unknown as Collections
  return { store: new MongoStore(new MongoContext(client, c)), calls }
}

const WS = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'

t.test('key and list creation write the live workspace in their transaction, so a concurrent delete conflicts', async (t) => {
  const creations: Array<{ description: string, create: (s: MongoStore) => Promise<unknown>, inserted: string }> = [
    { description: 'keys.create', create: (s: MongoStore) => s.keys.create({ workspaceId: WS, hash: 'a'.repeat(64), scopes: ['feeds:read'] }), inserted: 'keys' },
    { description: 'lists.create', create: (s: MongoStore) => s.lists.create({ workspaceId: WS, name: 'l', description: '', defaults: {}, selector: {} }), inserted: 'lists' },
  ]
  for (const c of creations) {
    const live = fakeStore({ workspaceLive: true })
    await c.create(live.store)
    const write = live.calls.find((x) => x.collection === 'workspaces')
    t.equal(write?.op, 'updateOne', `${c.description}: the workspace document is written, not only read`)
    t.same(write?.filter, { _id: WS, deletedAt: null }, `${c.description}: only while live`)
    t.ok(write?.inSession, `${c.description}: in the creation's transaction`)
    t.ok(live.calls.some((x) => x.collection === c.inserted && x.op === 'insertOne' && x.inSession), `${c.description}: inserted in the same transaction`)

    const deleted = fakeStore({ workspaceLive: false })
    await t.rejects(c.create(deleted.store), { code: 'TF_ERR_WORKSPACE_NOT_FOUND' }, `${c.description}: a deleted workspace`)
    t.notOk(deleted.calls.some((x) => x.op === 'insertOne'), `${c.description}: nothing inserted for a deleted workspace`)
  }
})

t.test('every workspace\'s rules revision in one query', async (t) => {
  const { store, calls } = fakeStore({ workspaceLive: true, metaDocs: [{ _id: `revision:rules:${WS}`, value: 7 }] })
  const other = '1e2d3c4b-5a69-4788-9766-554433221100'
  const revisions = await store.rules.revisionsOf([WS, other])
  t.same([...revisions], [[WS, 7], [other, 0]], 'a workspace never written is at 0')
  t.same(calls.map((c) => `${c.collection}.${c.op}`), ['meta.find'], 'one query')
  t.same(calls[0]?.filter, { _id: { $in: [`revision:rules:${WS}`, `revision:rules:${other}`] } })
})

t.test('changed rules are read with a projection (no index-only fields)', async (t) => {
  const { store, calls } = fakeStore({ workspaceLive: true })
  await store.rules.accessRulesChangedSince(WS, 5, 1000, () => {})
  const read = calls.find((c) => c.collection === 'accessRules' && c.op === 'find' && (c.filter as { seq?: unknown }).seq !== undefined)
  t.same(read?.options?.projection, { identity: 0, targetKey: 0 })
})

t.test('the first connection is retried for connectRetryMs, with a call per failed attempt (docker compose start-up)', async (t) => {
  const { openMongoStore } = await import('../../../src/store/mongo/mongo-store.js')
  const attempts: number[] = []
  const started = Date.now()
  await t.rejects(openMongoStore('mongodb://127.0.0.1:1/?directConnection=true', { connectRetryMs: 4000, onConnectRetry: (n) => { attempts.push(n) } }), { code: 'TF_ERR_STORE_UNAVAILABLE' })
  const ms = Date.now() - started
  t.ok(attempts.length >= 1, `retried (${attempts.length} logged attempts)`)
  t.same(attempts, attempts.map((_, i) => i + 1), 'numbered from 1')
  t.ok(ms >= 2500 && ms < 7000, `kept trying for about the time given (${ms} ms)`)
})
