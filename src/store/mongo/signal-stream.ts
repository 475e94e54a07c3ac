/**
 * The signal stream on MongoDB, with several server processes appending at once.
 *
 * Seqs come from a counter document that is raised INSIDE the transaction that inserts the
 * records. Two appenders raising it at once conflict; the loser is retried after the winner
 * committed, so transactions commit in the order of the seqs they took and a reader never sees
 * seq n+1 while seq n is still invisible (types.ts: commit order = seq order). Incrementing
 * outside the transaction would let a later, smaller transaction commit first and a consumer
 * would skip the records of the earlier one for good.
 */
import type { CommitGate } from '../commit-gate.js'
import type { HousekeepingCounters, StoredSignalStream, StreamAppend, StreamCheckpoint, StreamRecord, StreamRecordInput, StreamRetained, TrimPass } from '../types.js'
import { appendRecords } from '../whole-v1-batch.js'
import { COUNTERS, type StreamDoc } from './collections.js'
import type { MongoContext } from './mongo-context.js'
import { num, text } from './values.js'

export class MongoSignalStream implements StoredSignalStream {
  readonly #ctx: MongoContext
  readonly #counters: HousekeepingCounters

  constructor (ctx: MongoContext, counters: HousekeepingCounters) {
    this.#ctx = ctx
    this.#counters = counters
  }

  async append (input: StreamAppend, gate?: CommitGate): Promise<number[]> {
    // One document per record, a whole v1 batch included: readers query by seq.
    const records = appendRecords(input)
    if (records.length === 0) return []
    const n = records.length
    return this.#ctx.write(async (session) => {
      const counter = await this.#ctx.c.meta.findOneAndUpdate(
        { _id: COUNTERS.streamHead },
        { $inc: { value: n } },
        { session, returnDocument: 'after' },
      )
      if (counter === null) throw new Error('the stream counter is missing')
      const first = counter.value - n + 1
      const docs = records.map((r, i) => toDoc(first + i, r))
      await this.#ctx.c.stream.insertMany(docs, { session, ordered: true })
      // Last before runTransaction's commitTransaction (nothing is awaited in between): a throw
      // aborts the transaction, so past its deadline it is never committed (commit-gate.ts).
      gate?.begin()
      return docs.map((d) => d._id)
    }, gate === undefined ? undefined : () => gate.state === 'abandoned' || Date.now() >= gate.cutoff)
  }

  read (from: number, limit: number): Promise<StreamRecord[]> {
    return this.#ctx.run(async () => {
      if (limit <= 0) return []
      const docs = await this.#ctx.c.stream.find({ _id: { $gte: num(from) } }).sort({ _id: 1 }).limit(num(limit)).toArray()
      return docs.map(toRecord)
    })
  }

  head (): Promise<number> {
    return this.#ctx.run(async () => (await this.#ctx.c.meta.findOne({ _id: COUNTERS.streamHead }))?.value ?? 0)
  }

  getCheckpoint (consumer: string): Promise<number> {
    return this.#ctx.run(async () => (await this.#ctx.c.checkpoints.findOne({ _id: text(consumer) }))?.seq ?? 0)
  }

  setCheckpoint (consumer: string, seq: number): Promise<void> {
    // A transaction only for its retry of the upsert race between two first writers.
    return this.#ctx.write(async (session) => {
      await this.#ctx.c.checkpoints.updateOne({ _id: text(consumer) }, { $set: { seq: num(seq) } }, { session, upsert: true })
    })
  }

  checkpoints (): Promise<StreamCheckpoint[]> {
    return this.#ctx.run(async () => (await this.#ctx.c.checkpoints.find({}).sort({ _id: 1 }).toArray()).map((d) => ({ consumer: d._id, seq: d.seq })))
  }

  forgetCheckpoint (consumer: string): Promise<boolean> {
    return this.#ctx.run(async () => (await this.#ctx.c.checkpoints.deleteOne({ _id: text(consumer) })).deletedCount === 1)
  }

  /**
   * A prefix of the stream: records below every checkpoint and accepted before the cut, in seq
   * order, stopping at the first that is not. One deleteMany per pass; two processes trimming
   * at once delete each document once, so the counts add up.
   */
  trim (acceptedBefore: number, limit: number): Promise<TrimPass> {
    return this.#ctx.run(async () => {
      const checkpoints = await this.#ctx.c.checkpoints.find({}).toArray()
      let records = 0
      let more = false
      if (checkpoints.length > 0) {
        const keepFrom = Math.min(...checkpoints.map((c) => c.seq))
        const docs = await this.#ctx.c.stream.find({ _id: { $lt: num(keepFrom) } }, { projection: { _id: 1, acceptedAt: 1 } }).sort({ _id: 1 }).limit(Math.max(1, limit)).toArray()
        let last: number | null = null
        let stopped = false
        for (const d of docs) {
          if (d.acceptedAt >= acceptedBefore) {
            stopped = true
            break
          }
          last = d._id
        }
        if (last !== null) records = (await this.#ctx.c.stream.deleteMany({ _id: { $lte: last } })).deletedCount
        more = !stopped && docs.length >= Math.max(1, limit)
      }
      this.#counters.trimPasses++
      this.#counters.streamRecordsTrimmed += records
      return { records, more }
    })
  }

  retained (): Promise<StreamRetained> {
    return this.#ctx.run(async () => {
      const last = (await this.#ctx.c.meta.findOne({ _id: COUNTERS.streamHead }))?.value ?? 0
      const oldest = await this.#ctx.c.stream.find({}, { projection: { _id: 1 } }).sort({ _id: 1 }).limit(1).toArray()
      const first = oldest[0]?._id ?? last + 1
      const [stats] = await this.#ctx.c.stream.aggregate<{ storageStats?: { size?: number } }>([{ $collStats: { storageStats: {} } }]).toArray()
      return { first, last, records: last - first + 1, bytes: stats?.storageStats?.size ?? 0 }
    })
  }
}

function toDoc (seq: number, r: StreamRecordInput): StreamDoc {
  const doc: StreamDoc = { _id: seq, workspaceId: text(r.workspaceId), payload: text(r.payload), acceptedAt: num(r.acceptedAt) }
  if (r.schemaVersion !== undefined) doc.schemaVersion = num(r.schemaVersion)
  return doc
}

function toRecord (d: StreamDoc): StreamRecord {
  return d.schemaVersion === undefined || d.schemaVersion === null
    ? { seq: d._id, workspaceId: d.workspaceId, payload: d.payload, acceptedAt: d.acceptedAt }
    : { seq: d._id, workspaceId: d.workspaceId, schemaVersion: d.schemaVersion, payload: d.payload, acceptedAt: d.acceptedAt }
}
