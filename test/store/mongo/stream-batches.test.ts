/**
 * MongoDB's signal stream keeps one document per append (issue 18: first seq and count, the whole
 * v1 body where it fits a document), with no server: a fake of the few driver calls the stream
 * makes, over documents in memory. It understands only the filters the stream sends (`_id`
 * compared with $lt/$lte/$gt/$gte/$in) and throws on anything else, so a query the fake would
 * answer wrongly fails instead of passing. What the stream reads back is also checked by the
 * store contract, which runs on a real replica set (test/store/mongo.test.ts).
 */
import t from 'tap'
import type { ClientSession, MongoClient } from 'mongodb'
import type { Collections, StreamDoc } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoSignalStream } from '../../../src/store/mongo/signal-stream.js'
import { newHousekeepingCounters, type StreamRecordInput } from '../../../src/store/types.js'

type Filter = Record<string, unknown>

function matches (doc: StreamDoc, filter: Filter): boolean {
  for (const [field, cond] of Object.entries(filter)) {
    if (field !== '_id') throw new Error(`fake: unsupported filter field ${field}`)
    if (typeof cond === 'number') {
      if (doc._id !== cond) return false
      continue
    }
    for (const [op, v] of Object.entries(cond as Record<string, unknown>)) {
      const ok = op === '$lt' ? doc._id < (v as number)
        : op === '$lte' ? doc._id <= (v as number)
          : op === '$gt' ? doc._id > (v as number)
            : op === '$gte' ? doc._id >= (v as number)
              : op === '$in' ? (v as number[]).includes(doc._id)
                : (() => { throw new Error(`fake: unsupported operator ${op}`) })()
      if (!ok) return false
    }
  }
  return true
}

function fakeMongo () {
  const docs = new Map<number, StreamDoc>()
  const inserts: Array<{ op: string, docs: number }> = []
  let head = 0
  let counterRaises = 0
  const session = {
    startTransaction () {},
    async commitTransaction () {},
    async abortTransaction () {},
    inTransaction: () => false,
    async endSession () {},
  }
  const client = { startSession: () => session } as unknown as MongoClient
  const insert = (doc: StreamDoc): void => {
    if (docs.has(doc._id)) throw new Error(`fake: duplicate _id ${doc._id}`)
    // What the driver would send: BSON-serializable plain data, no Buffers left behind.
    docs.set(doc._id, structuredClone(doc))
  }
  const find = (filter: Filter, options?: { projection?: Record<string, 1> }) => {
    let dir = 1
    let max = Infinity
    const selected = () => [...docs.values()].filter((d) => matches(d, filter)).sort((a, b) => dir * (a._id - b._id)).slice(0, max)
      .map((d) => options?.projection === undefined ? structuredClone(d) : Object.fromEntries(Object.keys(options.projection).filter((k) => k in d).map((k) => [k, d[k as keyof StreamDoc]])) as unknown as StreamDoc)
    const cursor = {
      fetched: 0,
      sort (s: { _id: 1 | -1 }) { dir = s._id; return cursor },
      limit (n: number) { max = n; return cursor },
      batchSize () { return cursor },
      async toArray () { return selected() },
      async * [Symbol.asyncIterator] () {
        for (const d of selected()) { cursor.fetched++; yield d }
      },
    }
    return cursor
  }
  const c = {
    meta: {
      async findOneAndUpdate (_f: unknown, u: { $inc: { value: number } }, o: { session: ClientSession }) {
        if (o.session !== (session as unknown)) throw new Error('outside the session')
        head += u.$inc.value
        counterRaises++
        return { _id: 'stream:head', value: head }
      },
      async findOne () { return { _id: 'stream:head', value: head } },
    },
    stream: {
      async insertOne (doc: StreamDoc) { inserts.push({ op: 'insertOne', docs: 1 }); insert(doc) },
      async insertMany (many: StreamDoc[]) { inserts.push({ op: 'insertMany', docs: many.length }); for (const d of many) insert(d) },
      find,
      async deleteMany (filter: Filter) {
        let n = 0
        for (const d of [...docs.values()]) if (matches(d, filter)) { docs.delete(d._id); n++ }
        return { deletedCount: n }
      },
      async deleteOne (filter: Filter) {
        const d = [...docs.values()].find((x) => matches(x, filter))
        if (d !== undefined) docs.delete(d._id)
        return { deletedCount: d === undefined ? 0 : 1 }
      },
      aggregate () { return { toArray: async () => [{ storageStats: { size: 1 } }] } },
    },
    checkpoints: {
      checkpoints: [] as Array<{ _id: string, seq: number }>,
      find () { return { toArray: async () => c.checkpoints.checkpoints } },
    },
  }
  const stream = new MongoSignalStream(new MongoContext(client, c as unknown as Collections), newHousekeepingCounters())
  return { stream, docs, inserts, setCheckpoint: (seq: number) => { c.checkpoints.checkpoints = [{ _id: 'rules', seq }] }, counterRaises: () => counterRaises }
}

/** MongoDB's largest document (BSON). */
const BSON_MAX = 16 * 1024 * 1024

const WS = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'

function v1Entry (i: number, description = 'scanner'): string {
  return `{"type":"access_rules","action":"block","ip":"10.0.${i >> 8}.${i & 255}","expiration":600,"description":"${description}"}`
}

function wholeBatch (count: number, acceptedAt = 1000, description?: string) {
  const texts = Array.from({ length: count }, (_, i) => v1Entry(i, description))
  return { texts, append: { workspaceId: WS, acceptedAt, body: Buffer.from(`[${texts.join(',')}]`), count } }
}

t.test('an append is one document: a whole v1 batch keeps its body, a record list its records', async (t) => {
  const cases: Array<{ description: string, append: () => Parameters<MongoSignalStream['append']>[0], count: number, shape: (d: StreamDoc) => unknown, expected: unknown }> = [
    {
      description: 'a whole v1 batch of 1000',
      append: () => wholeBatch(1000).append,
      count: 1000,
      shape: (d) => ({ _id: d._id, n: d.n, workspaceId: d.workspaceId, acceptedAt: d.acceptedAt, body: d.body?.length, records: d.records }),
      expected: { _id: 1, n: 1000, workspaceId: WS, acceptedAt: 1000, body: wholeBatch(1000).append.body.length, records: undefined },
    },
    {
      description: 'a list of v2 records',
      append: (): StreamRecordInput[] => [1, 2, 3].map((i) => ({ workspaceId: WS, schemaVersion: 2, payload: `{"n":${i}}`, acceptedAt: 1000 + i })),
      count: 3,
      shape: (d) => ({ _id: d._id, n: d.n, acceptedAt: d.acceptedAt, body: d.body, records: d.records?.map((r) => r.payload) }),
      expected: { _id: 1, n: 3, acceptedAt: 1003, body: undefined, records: ['{"n":1}', '{"n":2}', '{"n":3}'] },
    },
  ]
  for (const c of cases) {
    const mongo = fakeMongo()
    const seqs = await mongo.stream.append(c.append())
    t.same(seqs, Array.from({ length: c.count }, (_, i) => i + 1), `${c.description}: seqs 1…${c.count}`)
    t.same(mongo.inserts, [{ op: 'insertOne', docs: 1 }], `${c.description}: one insert of one document`)
    t.equal(mongo.counterRaises(), 1, `${c.description}: the counter raised once`)
    t.same(c.shape(mongo.docs.get(1)!), c.expected, `${c.description}: the document`)
  }
})

t.test('records read back from any position, across documents, up to a limit, byte for byte', async (t) => {
  const mongo = fakeMongo()
  const a = wholeBatch(1000, 1000)
  const b = wholeBatch(500, 2000, 'caf\\u00e9 é ☃ ] ,')
  await mongo.stream.append(a.append) // 1…1000
  await mongo.stream.append([{ workspaceId: WS, schemaVersion: 2, payload: '{"v2":true}', acceptedAt: 1500 }]) // 1001
  await mongo.stream.append(b.append) // 1002…1501
  const payloadOf = (seq: number): string => seq <= 1000 ? a.texts[seq - 1]! : seq === 1001 ? '{"v2":true}' : b.texts[seq - 1002]!
  const cases = [
    { description: 'from the start', from: 1, limit: 3 },
    { description: 'from 0', from: 0, limit: 2 },
    { description: 'inside the first batch, across the record into the second batch', from: 999, limit: 6 },
    { description: 'the single record', from: 1001, limit: 1 },
    { description: 'to the end', from: 1490, limit: 100 },
    { description: 'past the head', from: 1502, limit: 10 },
    { description: 'a limit that ends inside a batch', from: 500, limit: 1000 },
  ]
  for (const c of cases) {
    const read = await mongo.stream.read(c.from, c.limit)
    const start = Math.max(1, c.from)
    const expected = Array.from({ length: Math.max(0, Math.min(c.limit, 1501 - start + 1)) }, (_, i) => start + i)
    t.same(read.map((r) => r.seq), expected, `${c.description}: seqs`)
    t.same(read.map((r) => r.payload), expected.map(payloadOf), `${c.description}: payloads`)
  }
  const [v1] = await mongo.stream.read(5, 1)
  t.same(v1, { seq: 5, workspaceId: WS, payload: a.texts[4], acceptedAt: 1000 }, 'a v1 record: no schemaVersion key')
  t.same(await mongo.stream.read(1001, 1), [{ seq: 1001, workspaceId: WS, schemaVersion: 2, payload: '{"v2":true}', acceptedAt: 1500 }])
})

t.test('documents written one per record (before batches) read back as they were', async (t) => {
  const mongo = fakeMongo()
  for (let seq = 1; seq <= 3; seq++) mongo.docs.set(seq, { _id: seq, workspaceId: WS, payload: v1Entry(seq), acceptedAt: 900 + seq })
  mongo.docs.set(4, { _id: 4, workspaceId: WS, schemaVersion: 2, payload: '{"n":4}', acceptedAt: 904 })
  t.same(await mongo.stream.read(2, 10), [
    { seq: 2, workspaceId: WS, payload: v1Entry(2), acceptedAt: 902 },
    { seq: 3, workspaceId: WS, payload: v1Entry(3), acceptedAt: 903 },
    { seq: 4, workspaceId: WS, schemaVersion: 2, payload: '{"n":4}', acceptedAt: 904 },
  ])
  mongo.setCheckpoint(4)
  t.same(await mongo.stream.trim(Infinity, 1000), { records: 3, more: false }, 'trimmed below the checkpoint')
})

t.test('a body too big for one document is stored as several, each under the limit, read back whole', async (t) => {
  const mongo = fakeMongo()
  const description = 'x'.repeat(8000)
  const count = Math.ceil(BSON_MAX / 8100) + 50
  const big = wholeBatch(count, 1000, description)
  t.ok(big.append.body.length > BSON_MAX, `the body is over the limit (${big.append.body.length} bytes)`)
  t.same(await mongo.stream.append(big.append), Array.from({ length: count }, (_, i) => i + 1))
  t.equal(mongo.inserts.length, 1, 'one insert')
  t.equal(mongo.inserts[0]!.op, 'insertMany')
  const docs = [...mongo.docs.values()]
  t.equal(docs.length, 2, 'two documents')
  t.equal(docs.reduce((s, d) => s + (d.n ?? 0), 0), count, 'their counts add up')
  for (const d of docs) t.ok(JSON.stringify(d).length < BSON_MAX, `document ${d._id} under 16 MiB`)
  const read = await mongo.stream.read(1, count + 10)
  t.equal(read.length, count)
  t.ok(read.every((r, i) => r.seq === i + 1 && r.payload === big.texts[i]), 'every record in order, byte for byte')
})

t.test('the trim takes whole appends below the checkpoint and counts their records', async (t) => {
  const cases = [
    { description: 'checkpoint inside the second batch: the first goes, the second is kept whole', checkpoint: 1500, cut: Infinity, limit: 5000, expected: { records: 1000, more: false }, first: 1001 },
    { description: 'checkpoint at the start of the second: the first goes', checkpoint: 1001, cut: Infinity, limit: 5000, expected: { records: 1000, more: false }, first: 1001 },
    { description: 'checkpoint past both, a limit of 1: one batch a pass, more to do', checkpoint: 3000, cut: Infinity, limit: 1, expected: { records: 1000, more: true }, first: 1001 },
    { description: 'the cut stops at the batch accepted after it', checkpoint: 3000, cut: 2000, limit: 5000, expected: { records: 1000, more: false }, first: 1001 },
    { description: 'checkpoint inside the first batch: nothing goes', checkpoint: 2, cut: Infinity, limit: 5000, expected: { records: 0, more: false }, first: 1 },
  ]
  for (const c of cases) {
    const mongo = fakeMongo()
    await mongo.stream.append(wholeBatch(1000, 1000).append)
    await mongo.stream.append(wholeBatch(1000, 2000).append)
    mongo.setCheckpoint(c.checkpoint)
    t.same(await mongo.stream.trim(c.cut, c.limit), c.expected, `${c.description}: the pass`)
    t.equal((await mongo.stream.retained()).first, c.first, `${c.description}: first kept`)
  }
  const twice = fakeMongo()
  await twice.stream.append(wholeBatch(1000, 1000).append)
  twice.setCheckpoint(5000)
  const [x, y] = await Promise.all([twice.stream.trim(Infinity, 5000), twice.stream.trim(Infinity, 5000)])
  t.equal(x.records + y.records, 1000, 'two passes at once count a batch once')
})
