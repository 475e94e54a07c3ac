/**
 * Issue 33, item 8: a guarded feed's published record over MongoDB's 16 MiB document limit
 * (about 400,000 rules) could not be saved. With no server: a fake of the published_rules calls
 * that refuses, as the driver's BSON serializer does, a document over 16 MiB.
 */
import t from 'tap'
import type { MongoClient } from 'mongodb'
import type { Collections } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoFeedVersionStore, PUBLISHED_PART_BYTES } from '../../../src/store/mongo/feed-version-store.js'
import type { PublishedRecord } from '../../../src/store/types.js'

const BSON_MAX = 16 * 1024 * 1024

interface Doc { _id: string, workspaceId: string, data: { buffer: Uint8Array }, parts?: number }

function fakeMongo () {
  const docs = new Map<string, Doc>()
  const session = { startTransaction () {}, async commitTransaction () {}, async abortTransaction () {}, inTransaction: () => false, async endSession () {} }
  const published = {
    async findOne (f: { _id: string }) { return docs.get(f._id) ?? null },
    async replaceOne (f: { _id: string }, d: Omit<Doc, '_id'>) {
      const size = d.data.buffer.length + 200
      if (size > BSON_MAX) throw new RangeError(`The value of "offset" is out of range (document of ${size} bytes)`)
      docs.set(f._id, { ...d, data: { buffer: Uint8Array.from(d.data.buffer) }, _id: f._id })
    },
    async deleteMany (f: { _id: { $in: string[] } }) { for (const id of f._id.$in) docs.delete(id) },
    find (f: { _id: { $in: string[] } }) { return { toArray: async () => f._id.$in.flatMap((id) => docs.get(id) ?? []) } },
  }
  const client = { startSession: () => session, db: () => ({ collection: () => published }) } as unknown as MongoClient
  const store = new MongoFeedVersionStore(new MongoContext(client, { feedVersions: { dbName: 'tf' } } as unknown as Collections))
  return { store, docs }
}

const ref = { workspaceId: '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c', listId: '*' }
const record = (bytes: number): PublishedRecord => ({
  state: { held: null, publishedDigest: 'abc' },
  rules: Uint8Array.from({ length: bytes }, (_, i) => (i * 7919) & 255),
  savedAt: 1_700_000_000_000,
})

t.test('a published record of any size is saved in parts under the limit and read back whole', async (t) => {
  const mongo = fakeMongo()
  const cases = [
    { description: 'about 400,000 rules (20 MiB)', bytes: 20 * 1024 * 1024, parts: 3 },
    { description: 'a smaller record drops the parts it no longer needs', bytes: 9 * 1024 * 1024, parts: 2 },
    { description: 'a small one', bytes: 1000, parts: 1 },
  ]
  for (const c of cases) {
    const r = record(c.bytes)
    await mongo.store.savePublished(ref, r)
    t.equal(mongo.docs.size, c.parts, `${c.description}: ${c.parts} document(s)`)
    t.ok([...mongo.docs.values()].every((d) => d.data.buffer.length <= PUBLISHED_PART_BYTES), `${c.description}: each part within ${PUBLISHED_PART_BYTES} bytes`)
    const back = await mongo.store.loadPublished(ref)
    t.same(back?.state, r.state, `${c.description}: state`)
    t.ok(back?.rules !== null && Buffer.from(back!.rules!).equals(Buffer.from(r.rules!)), `${c.description}: the rules, byte for byte`)
  }
  await mongo.store.savePublished(ref, null)
  t.equal(mongo.docs.size, 0, 'forgotten: every part gone')
  t.equal(await mongo.store.loadPublished(ref), null)
})
