/**
 * Issue 33, item 1: a stream commit that fails on the client side after it was sent. A fake of
 * the driver calls the stream makes, with transactions: writes are pending until the commit, and
 * the commit behaves as sessions.js commitTransaction does at a failover — it may apply and then
 * throw (the server committed, the answer was lost, and the driver's one retry found no primary
 * within the selection timeout: an unlabelled MongoServerSelectionError), or throw without
 * applying (the primary died first; the commit sent again is answered NoSuchTransaction).
 * The fake answers only the filters the stream sends and throws on anything else.
 */
import t from 'tap'
import { MongoServerError, MongoServerSelectionError, type ClientSession, type MongoClient, type TopologyDescription } from 'mongodb'
import { SignalIngester } from '../../../src/ingest/batch.js'
import type { Collections, IdempotencyDoc, StreamDoc } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoSignalStream } from '../../../src/store/mongo/signal-stream.js'
import { newHousekeepingCounters } from '../../../src/store/types.js'
import type { EntryChecks } from '../../../src/ingest/entry-rules.js'

type CommitScript = 'ok' | 'applied-then-lost' | 'lost-before-applied'

const selection = (): MongoServerSelectionError => new MongoServerSelectionError('Server selection timed out after 1500 ms', { type: 'ReplicaSetNoPrimary', servers: new Map(), error: null } as unknown as TopologyDescription)

function fakeMongo (commits: CommitScript[], primaryBackAfterMs = 0) {
  const docs = new Map<number, StreamDoc>()
  const entries = new Map<string, IdempotencyDoc>()
  let pendingEntries: IdempotencyDoc[] = []
  let head = 0
  let pending: StreamDoc[] = []
  let taken = 0
  let inTxn = false
  /** The transaction the server knows of: gone when a failover lost it. */
  let serverTxn: 'open' | 'committed' | 'lost' = 'open'
  let noPrimaryUntil = 0
  const apply = (): void => {
    for (const d of pending) docs.set(d._id, structuredClone(d))
    for (const e of pendingEntries) entries.set(JSON.stringify(e._id), structuredClone(e))
    pending = []
    pendingEntries = []
  }
  const session = {
    startTransaction () { inTxn = true; pending = []; pendingEntries = []; taken = 0; serverTxn = 'open' },
    async commitTransaction () {
      inTxn = false
      if (Date.now() < noPrimaryUntil) throw selection()
      if (serverTxn === 'committed') return // a commit sent again: answered from the server's record
      if (serverTxn === 'lost') throw new MongoServerError({ message: 'Transaction has been aborted', code: 251, codeName: 'NoSuchTransaction', errorLabels: ['TransientTransactionError'] })
      const script = commits.shift() ?? 'ok'
      if (script === 'lost-before-applied') {
        head -= taken
        serverTxn = 'lost'
        noPrimaryUntil = Date.now() + primaryBackAfterMs
        throw selection()
      }
      apply()
      serverTxn = 'committed'
      if (script === 'applied-then-lost') {
        noPrimaryUntil = Date.now() + primaryBackAfterMs
        throw selection()
      }
    },
    async abortTransaction () { inTxn = false; head -= taken; pending = [] },
    inTransaction: () => inTxn,
    async endSession () {},
  }
  const client = { startSession: () => session } as unknown as MongoClient
  const c = {
    meta: {
      async findOneAndUpdate (_f: unknown, u: { $inc: { value: number } }, o: { session: ClientSession }) {
        if (o.session !== (session as unknown)) throw new Error('outside the session')
        head += u.$inc.value
        taken += u.$inc.value
        return { _id: 'stream:head', value: head }
      },
    },
    idempotency: {
      find (filter: { _id: { $in: Array<{ w: string, k: string }> } }, o: { session: ClientSession }) {
        if (o.session !== (session as unknown)) throw new Error('outside the session')
        return { toArray: async () => filter._id.$in.map((id) => entries.get(JSON.stringify(id))).filter((e) => e !== undefined) }
      },
      async bulkWrite (ops: Array<{ replaceOne: { filter: { _id: { w: string, k: string } }, replacement: Omit<IdempotencyDoc, '_id'>, upsert: boolean } }>, o: { session: ClientSession }) {
        if (o.session !== (session as unknown)) throw new Error('outside the session')
        for (const { replaceOne: r } of ops) {
          if (!r.upsert) throw new Error('fake: an upsert expected')
          pendingEntries.push({ ...r.replacement, _id: r.filter._id })
        }
      },
    },
    stream: {
      async insertOne (doc: StreamDoc, o: { session: ClientSession }) {
        if (o.session !== (session as unknown)) throw new Error('outside the session')
        pending.push(doc)
      },
      find (filter: { appendId: { $in: string[] } }, options: { readConcern?: { level: string }, readPreference?: string }) {
        if (Object.keys(filter).join() !== 'appendId' || !Array.isArray(filter.appendId.$in)) throw new Error(`fake: unsupported filter ${JSON.stringify(filter)}`)
        // A lookup that could be answered by a secondary or from unreplicated writes decides nothing.
        if (options.readConcern?.level !== 'majority' || options.readPreference !== 'primary') throw new Error('fake: the lookup must read at majority on the primary')
        const cursor = {
          limit () { return cursor },
          async toArray () {
            if (Date.now() < noPrimaryUntil) throw selection()
            return [...docs.values()].filter((d) => filter.appendId.$in.includes(d.appendId!))
          },
        }
        return cursor
      },
    },
  }
  const stream = new MongoSignalStream(new MongoContext(client, c as unknown as Collections), newHousekeepingCounters())
  return { stream, docs, primaryBack: () => { noPrimaryUntil = 0 } }
}

const checks: EntryChecks = { asnExists: () => true, checkExpressions: true }
const WS = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'
const body = (n: number): Buffer => Buffer.from(`[${Array.from({ length: n }, (_, i) => `{"type":"access_rules","action":"block","ip":"10.0.0.${i + 1}"}`).join(',')}]`)

t.test('a commit that was applied and then failed on the client is answered with its seqs, once', async (t) => {
  const cases: Array<{ description: string, commits: CommitScript[], primaryBackAfterMs: number, expected: { status: number, seqs: number[], stored: number[] } }> = [
    { description: 'applied, the answer lost, the primary back at once', commits: ['ok', 'applied-then-lost'], primaryBackAfterMs: 0, expected: { status: 200, seqs: [3, 4], stored: [1, 3] } },
    { description: 'applied, the answer lost, no primary for 300 ms', commits: ['ok', 'applied-then-lost'], primaryBackAfterMs: 300, expected: { status: 200, seqs: [3, 4], stored: [1, 3] } },
    { description: 'lost before it applied: committed again, NoSuchTransaction, retried whole', commits: ['ok', 'lost-before-applied'], primaryBackAfterMs: 0, expected: { status: 200, seqs: [3, 4], stored: [1, 3] } },
  ]
  for (const c of cases) {
    const mongo = fakeMongo(c.commits, c.primaryBackAfterMs)
    const ingester = new SignalIngester({ stream: mongo.stream, checks, appendTimeoutMs: 2000 })
    await ingester.ingest('v1', WS, body(2))
    const out = await ingester.ingest('v1', WS, body(2))
    t.equal(out.status, c.expected.status, `${c.description}: status`)
    t.same(out.seqs, c.expected.seqs, `${c.description}: seqs`)
    t.same([...mongo.docs.keys()], c.expected.stored, `${c.description}: each append stored once`)
  }
})

t.test('a commit whose outcome stays unknown past the bound gets its own error code', async (t) => {
  // No primary for longer than the resolution bound (10 s): cut short with a clock jump would
  // hide the loop; the bound is the real one, so this test takes it.
  const mongo = fakeMongo(['applied-then-lost'], 60_000)
  const ingester = new SignalIngester({ stream: mongo.stream, checks, appendTimeoutMs: 2000 })
  const e = await ingester.ingest('v1', WS, body(1)).catch((e: unknown) => e)
  t.match(e, { code: 'TF_ERR_APPEND_OUTCOME_UNKNOWN', status: 500, errorName: 'OutcomeUnknownError' })
})

t.test('a batch whose commit was applied and lost, posted again with its Idempotency-Key, is stored once', async (t) => {
  const mongo = fakeMongo(['applied-then-lost'], 60_000)
  const ingester = new SignalIngester({ stream: mongo.stream, checks, appendTimeoutMs: 2000 })
  // The first answer is not awaited to its end (10 s): the client's own timeout gave up first,
  // and it retries once a primary is back.
  void ingester.ingest('v1', WS, body(2), null, 'batch-7').catch(() => {})
  await new Promise((resolve) => setTimeout(resolve, 50))
  mongo.primaryBack()
  const retry = await ingester.ingest('v1', WS, body(2), null, 'batch-7')
  t.equal(retry.status, 200)
  t.same(retry.seqs, [1, 2], 'the seqs of the first post')
  t.same([...mongo.docs.keys()], [1], 'stored once')
})
