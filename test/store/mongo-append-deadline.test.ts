/**
 * MongoDB side of the append deadline rule, with no server: a fake client whose session records
 * what the driver would be asked (start, commit, abort) and fake collections whose writes take
 * as long as a test says. A transaction whose commit could not start before the cutoff is
 * aborted, never committed, whoever notices first (the transaction or the ingester's timer).
 */
import t from 'tap'
import { MongoServerError, type ClientSession, type MongoClient } from 'mongodb'
import { SignalIngester } from '../../src/ingest/batch.js'
import type { ThreatfeedError } from '../../src/errors.js'
import { CommitGate } from '../../src/store/commit-gate.js'
import type { Collections } from '../../src/store/mongo/collections.js'
import { MongoContext } from '../../src/store/mongo/mongo-context.js'
import { newHousekeepingCounters } from '../../src/store/types.js'
import { MongoSignalStream } from '../../src/store/mongo/signal-stream.js'

interface Script {
  /** Milliseconds each insertMany takes, attempt by attempt (the last repeats). */
  readonly insertMs: readonly number[]
  /** Attempts whose insertMany fails with a write conflict (retried by runTransaction). */
  readonly conflicts?: readonly number[]
}

function fakeMongo (script: Script) {
  const calls: string[] = []
  const committed: number[][] = []
  let head = 0
  let pending: number[] = []
  /** What this transaction raised the counter by (an abort undoes it). */
  let taken = 0
  let inTxn = false
  let attempt = 0
  const session = {
    startTransaction () { calls.push('start'); inTxn = true; pending = []; taken = 0 },
    async commitTransaction () { calls.push('commit'); inTxn = false; committed.push(pending) },
    async abortTransaction () { calls.push('abort'); inTxn = false; head -= taken; pending = [] },
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
    stream: {
      // An append is one document (signal-stream.ts); insertMany only for one too big for that.
      async insertOne (doc: { _id: number }) {
        const n = attempt++
        await new Promise((resolve) => setTimeout(resolve, script.insertMs[Math.min(n, script.insertMs.length - 1)]))
        if (script.conflicts?.includes(n) === true) {
          throw new MongoServerError({ message: 'WriteConflict', code: 112, errorLabels: ['TransientTransactionError'] })
        }
        pending = [doc._id]
      },
    },
  } as unknown as Collections
  return { stream: new MongoSignalStream(new MongoContext(client, c), newHousekeepingCounters()), calls, committed }
}

const records = [{ workspaceId: 'w', payload: '{"type":"access_rules","action":"block","ip":"192.0.2.1"}', acceptedAt: 1 }]

t.test('MongoSignalStream.append under a gate', async (t) => {
  const cases: Array<{ description: string, script: Script, cutoffMs: number, expected: { result: string, calls: string[], committed: number } }> = [
    { description: 'the cutoff passed before the append: no transaction at all', script: { insertMs: [5] }, cutoffMs: -1, expected: { result: 'TF_ERR_STORE_UNAVAILABLE', calls: [], committed: 0 } },
    { description: 'the writes end before the cutoff: committed', script: { insertMs: [5] }, cutoffMs: 200, expected: { result: '1', calls: ['start', 'commit'], committed: 1 } },
    { description: 'the writes end past the cutoff: aborted, never committed', script: { insertMs: [150] }, cutoffMs: 60, expected: { result: 'TF_ERR_STORE_UNAVAILABLE', calls: ['start', 'abort'], committed: 0 } },
    { description: 'a conflict retried past the cutoff: aborted twice, never committed', script: { insertMs: [40, 60], conflicts: [0] }, cutoffMs: 70, expected: { result: 'TF_ERR_STORE_UNAVAILABLE', calls: ['start', 'abort', 'start', 'abort'], committed: 0 } },
    { description: 'a conflict retried within the cutoff: committed once', script: { insertMs: [5, 5], conflicts: [0] }, cutoffMs: 300, expected: { result: '1', calls: ['start', 'abort', 'start', 'commit'], committed: 1 } },
  ]
  for (const c of cases) {
    const mongo = fakeMongo(c.script)
    const gate = new CommitGate(Date.now() + c.cutoffMs)
    const result = await mongo.stream.append(records, gate).then((seqs) => seqs.join(','), (e: ThreatfeedError) => e.code)
    t.equal(result, c.expected.result, `${c.description}: result`)
    t.same(mongo.calls, c.expected.calls, `${c.description}: session calls`)
    t.equal(mongo.committed.length, c.expected.committed, `${c.description}: commits`)
  }
})

t.test('through the ingester: 500 at the cutoff, and the transaction is aborted when it gets there', async (t) => {
  const mongo = fakeMongo({ insertMs: [600] })
  const ingester = new SignalIngester({ stream: mongo.stream, checks: { asnExists: () => true, checkExpressions: true }, appendTimeoutMs: 400, commitMarginMs: 100 })
  const started = Date.now()
  const code = await ingester.ingest('v1', 'w', Buffer.from(`[${records[0]!.payload}]`)).then(() => 'ok', (e: ThreatfeedError) => e.code)
  const ms = Date.now() - started
  t.equal(code, 'TF_ERR_STORE_UNAVAILABLE')
  t.ok(ms >= 295 && ms < 450, `answered at the cutoff (${ms} ms)`)
  await new Promise((resolve) => setTimeout(resolve, 500))
  t.same(mongo.calls, ['start', 'abort'], 'the transaction was aborted, not committed')
  t.same(mongo.committed, [])
})

t.test('endless conflicts: no retry starts once the cutoff has passed (an abandoned append stops contending)', async (t) => {
  const mongo = fakeMongo({ insertMs: [30], conflicts: Array.from({ length: 10_000 }, (_, i) => i) })
  const started = Date.now()
  const gate = new CommitGate(started + 100)
  const code = await mongo.stream.append(records, gate).then(() => 'ok', (e: ThreatfeedError) => e.code)
  const ms = Date.now() - started
  t.equal(code, 'TF_ERR_STORE_UNAVAILABLE')
  // The attempt under way at the cutoff ends (30 ms of writes and a back-off), and no other starts.
  t.ok(ms < 400, `gave up at the cutoff, not after the 10 s of conflict retries (${ms} ms)`)
  t.same(mongo.committed, [])
  const starts = mongo.calls.filter((c) => c === 'start').length
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.equal(mongo.calls.filter((c) => c === 'start').length, starts, 'nothing retried after the answer')
})
