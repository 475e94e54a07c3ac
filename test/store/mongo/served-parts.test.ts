/**
 * Issue 35, item 5: a feed's served copy on MongoDB, through a fake of the driver calls the store
 * makes on `served_copies` (no server here), which refuses a document over 16 MiB as the driver's
 * BSON serializer does: the contract's checks, and a 40 MiB copy kept in parts under the limit.
 */
import t from 'tap'
import type { MongoClient } from 'mongodb'
import type { Collections } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoFeedVersionStore, PUBLISHED_PART_BYTES } from '../../../src/store/mongo/feed-version-store.js'
import { checkServedCopies, servedBytes } from '../contract-served.js'

const BSON_MAX = 16 * 1024 * 1024

interface Doc { _id: string, workspaceId: string, data: { buffer: Uint8Array }, parts?: number, listId?: string, bytes?: number, savedAt?: number }

function fakeMongo () {
  const docs = new Map<string, Doc>()
  const session = { startTransaction () {}, async commitTransaction () {}, async abortTransaction () {}, inTransaction: () => false, async endSession () {} }
  const served = {
    async findOne (f: { _id: string }) { return docs.get(f._id) ?? null },
    async replaceOne (f: { _id: string }, d: Omit<Doc, '_id'>) {
      const size = d.data.buffer.length + 200
      if (size > BSON_MAX) throw new RangeError(`The value of "offset" is out of range (document of ${size} bytes)`)
      docs.set(f._id, { ...d, data: { buffer: Uint8Array.from(d.data.buffer) }, _id: f._id })
    },
    async deleteMany (f: { _id: { $in: string[] } }) { for (const id of f._id.$in) docs.delete(id) },
    find (f: { _id?: { $in: string[] }, parts?: { $exists: true } }) {
      return {
        toArray: async () => f._id !== undefined ? f._id.$in.flatMap((id) => docs.get(id) ?? []) : [...docs.values()].filter((d) => d.parts !== undefined),
      }
    },
  }
  const client = { startSession: () => session, db: () => ({ collection: (name: string) => { if (name !== 'served_copies') throw new Error(`unexpected collection ${name}`); return served } }) } as unknown as MongoClient
  const store = new MongoFeedVersionStore(new MongoContext(client, { feedVersions: { dbName: 'tf' } } as unknown as Collections))
  return { store, docs }
}

const workspaceId = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'

t.test('the served-copy contract on MongoDB (driver fake), with a copy of 20 MiB', async (t) => {
  const { store } = fakeMongo()
  await checkServedCopies(t, store, workspaceId, 20 * 1024 * 1024 + 5)
})

t.test('a 40 MiB copy is kept in parts within the document limit, a smaller one drops the rest', async (t) => {
  const { store, docs } = fakeMongo()
  const ref = { workspaceId, listId: '*' }
  const big = servedBytes(40 * 1024 * 1024, 9)
  await store.saveServed(ref, { bytes: big, savedAt: 7 })
  t.equal(docs.size, 5, '5 documents')
  t.ok([...docs.values()].every((d) => d.data.buffer.length <= PUBLISHED_PART_BYTES), 'each within the part size')
  t.ok(Buffer.from((await store.loadServed(ref))!.bytes).equals(Buffer.from(big)), 'read back byte for byte')
  t.same(await store.listServed(), [{ workspaceId, listId: '*', bytes: big.length, savedAt: 7 }], 'listed from the first part alone')
  await store.saveServed(ref, { bytes: servedBytes(9 * 1024 * 1024, 1), savedAt: 8 })
  t.equal(docs.size, 2, 'a 9 MiB copy: 2 documents, the other parts dropped')
  await store.saveServed(ref, null)
  t.equal(docs.size, 0, 'forgotten: every part gone')
})
