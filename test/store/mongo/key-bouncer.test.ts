/**
 * The key's bouncer setting on MongoDB without a server (the contract suite runs it on a real
 * replica set): through a fake of the driver's collections and session that applies $set and
 * $unset to one stored key — the setting is written and cleared in a transaction, only on a live
 * key, moves the admin revision, and reads back as the embedded store returns it.
 */
import t from 'tap'
import type { MongoClient } from 'mongodb'
import type { Collections, KeyDoc } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoStore } from '../../../src/store/mongo/mongo-store.js'

const ID = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'

function fakeStore (doc: KeyDoc) {
  const bumps: string[] = []
  const session = {
    startTransaction () {},
    async commitTransaction () {},
    async abortTransaction () {},
    inTransaction: () => false,
    async endSession () {},
  }
  const client = { startSession: () => session } as unknown as MongoClient
  const matches = (filter: Record<string, unknown>): boolean => Object.entries(filter).every(([k, v]) => (doc as unknown as Record<string, unknown>)[k] === v)
  const keys = {
    async updateOne (filter: Record<string, unknown>, update: { $set?: Record<string, unknown>, $unset?: Record<string, unknown> }, options: { session?: unknown }) {
      t.equal(options.session, session, 'written in the transaction')
      if (!matches(filter)) return { matchedCount: 0, modifiedCount: 0 }
      const d = doc as unknown as Record<string, unknown>
      for (const [k, v] of Object.entries(update.$set ?? {})) d[k] = v
      for (const k of Object.keys(update.$unset ?? {})) delete d[k]
      return { matchedCount: 1, modifiedCount: 1 }
    },
    async findOne (filter: Record<string, unknown>) {
      return matches(filter) ? structuredClone(doc) : null
    },
  }
  const meta = {
    async findOneAndUpdate (filter: { _id: string }) {
      bumps.push(filter._id)
      return { _id: filter._id, value: bumps.length }
    },
    async updateOne (filter: { _id: string }) {
      bumps.push(filter._id)
      return { matchedCount: 1, modifiedCount: 1 }
    },
  }
  const c = { keys, meta } as unknown as Collections
  return { store: new MongoStore(new MongoContext(client, c)), bumps }
}

t.test('setBouncer writes, clears and reads back the setting', async (t) => {
  const doc: KeyDoc = { _id: ID, workspaceId: 'w', hash: 'h', scopes: ['feeds:read'], createdAt: 1, revokedAt: null }
  const { store, bumps } = fakeStore(doc)
  const set = await store.keys.setBouncer(ID, { listId: 'l1', action: 'allow' })
  t.same(set, { id: ID, workspaceId: 'w', hash: 'h', scopes: ['feeds:read'], createdAt: 1, revokedAt: null, bouncer: { listId: 'l1', action: 'allow' } })
  t.same(doc.bouncer, { listId: 'l1', action: 'allow' }, 'stored as a subdocument')
  t.equal(bumps.length, 1, 'the admin revision moved')
  const cleared = await store.keys.setBouncer(ID, null)
  t.same(cleared, { id: ID, workspaceId: 'w', hash: 'h', scopes: ['feeds:read'], createdAt: 1, revokedAt: null }, 'cleared: no bouncer field at all')
  t.notOk('bouncer' in doc)
  t.equal(await store.keys.setBouncer('nope', null), null, 'no such key')
  doc.revokedAt = 5
  t.equal(await store.keys.setBouncer(ID, { listId: null, action: 'block' }), null, 'a revoked key is not changed')
  t.equal(bumps.length, 2, 'nothing changed, nothing bumped')
})
