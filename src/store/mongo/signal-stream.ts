/**
 * The signal stream on MongoDB, with several server processes appending at once.
 *
 * Seqs come from a counter document that is raised INSIDE the transaction that inserts the
 * records. Two transactions raising it at once conflict; the loser is retried after the winner
 * committed, so transactions commit in the order of the seqs they took and a reader never sees
 * seq n+1 while seq n is still invisible (types.ts: commit order = seq order). Incrementing
 * outside the transaction would let a later, smaller transaction commit first and a consumer
 * would skip the records of the earlier one for good. Within a process, concurrent appends share
 * one transaction instead of conflicting (append-group.ts).
 *
 * An append is ONE document (collections.ts StreamDoc: first seq and count), a whole v1 batch
 * with its body as accepted, so that the transaction holding the counter inserts one document,
 * not a thousand, and the body is not split on the request path; reads split it (a replay, a gap,
 * `stream tail`). Only an append too big for one BSON document (16 MiB) takes several, each a
 * contiguous run of its records.
 */
import { randomUUID } from 'node:crypto'
import type { CommitGate } from '../commit-gate.js'
import { type AppendOnce, type AppendOnceResult, type HousekeepingCounters, type StoredSignalStream, type StreamAppend, type StreamCheckpoint, type StreamRecord, type StreamRecordInput, type StreamRetained, type TrimPass } from '../types.js'
import { appendCount, appendRecords, isWholeV1Batch, wholeBatchTexts } from '../whole-v1-batch.js'
import { AppendGroups } from './append-group.js'
import { COUNTERS, type StreamDoc, type StreamDocRecord } from './collections.js'
import type { MongoContext } from './mongo-context.js'
import { num, text } from './values.js'

export class MongoSignalStream implements StoredSignalStream {
  readonly #ctx: MongoContext
  readonly #counters: HousekeepingCounters
  readonly #groups: AppendGroups

  constructor (ctx: MongoContext, counters: HousekeepingCounters) {
    this.#ctx = ctx
    this.#counters = counters
    this.#groups = new AppendGroups(ctx)
  }

  async append (input: StreamAppend, gate?: CommitGate, batchId?: string): Promise<number[]> {
    return (await this.#append(input, gate, null, batchId)).seqs
  }

  appendOnce (input: StreamAppend, once: AppendOnce, gate?: CommitGate, batchId?: string): Promise<AppendOnceResult> {
    return this.#append(input, gate, once, batchId)
  }

  /** Joins the process's next group transaction (append-group.ts). */
  #append (input: StreamAppend, gate: CommitGate | undefined, once: AppendOnce | null, batchId: string | undefined): Promise<AppendOnceResult> {
    const n = appendCount(input)
    if (n === 0) return Promise.resolve({ seqs: [], earlier: null })
    try {
      // Past its cutoff before it starts: refused without joining a group, so that it never
      // holds the counter live appends wait for. begin() throws here.
      if (gate !== undefined && (gate.state === 'abandoned' || Date.now() >= gate.cutoff)) gate.begin()
    } catch (e) {
      return Promise.reject(e)
    }
    // Shaped before the transaction: inside it, only the counter and the insert.
    const runs = toRuns(input)
    if (batchId !== undefined) for (const run of runs) run.batchId = text(batchId)
    const bytes = runs.reduce((sum, run) => sum + (run.body?.length ?? 0) + (run.records?.reduce((b, r) => b + r.payload.length + RECORD_OVERHEAD_BYTES, 0) ?? 0), 0)
    return new Promise<AppendOnceResult>((resolve, reject) => {
      // Found by the lookup that resolves a commit whose outcome the driver could not learn
      // (mongo-client.ts commit): the same id on every document of this append, and no other.
      this.#groups.submit({ runs, n, bytes, appendId: batchId ?? randomUUID(), once, gate, resolve, reject })
    })
  }

  read (from: number, limit: number): Promise<StreamRecord[]> {
    return this.#ctx.run(async () => {
      if (limit <= 0) return []
      const out: StreamRecord[] = []
      // The append that holds `from` starts at or before it; the rest start after it.
      const [holder] = await this.#ctx.c.stream.find({ _id: { $lte: num(from) } }).sort({ _id: -1 }).limit(1).toArray()
      if (holder !== undefined) pushRecords(out, holder, from, limit)
      if (out.length >= limit) return out
      // Each document holds at least one record: `limit - out.length` of them are enough, and
      // the cursor is left as soon as the records are (a document may hold a thousand).
      const cursor = this.#ctx.c.stream.find({ _id: { $gt: num(from) } }).sort({ _id: 1 }).limit(limit - out.length).batchSize(READ_BATCH_DOCS)
      for await (const doc of cursor) {
        pushRecords(out, doc, from, limit)
        if (out.length >= limit) break
      }
      return out
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
   * A prefix of the stream: whole appends below every checkpoint and accepted before the cut, in
   * seq order, stopping at the first that is not (an append the lowest checkpoint points into is
   * kept whole). Two processes trimming at once delete each document once, and each counts only
   * what it deleted, so the counts add up.
   */
  trim (acceptedBefore: number, limit: number): Promise<TrimPass> {
    return this.#ctx.run(async () => {
      const checkpoints = await this.#ctx.c.checkpoints.find({}).toArray()
      let records = 0
      let more = false
      if (checkpoints.length > 0) {
        const keepFrom = Math.min(...checkpoints.map((c) => c.seq))
        const budget = Math.max(1, limit)
        const docs = await this.#ctx.c.stream.find({ _id: { $lt: num(keepFrom) } }, { projection: { _id: 1, n: 1, acceptedAt: 1 } }).sort({ _id: 1 }).limit(budget).toArray()
        const gone: StreamDoc[] = []
        let taken = 0
        let stopped = false
        for (const d of docs) {
          if (d.acceptedAt >= acceptedBefore || d._id + countOf(d) > keepFrom) {
            stopped = true
            break
          }
          gone.push(d)
          taken += countOf(d)
          if (taken >= budget) break
        }
        // Documents of one record in one statement (its count is theirs); a batch each on its own,
        // so that a batch another process deleted first is not counted here too.
        const singles = gone.filter((d) => countOf(d) === 1).map((d) => d._id)
        if (singles.length > 0) records += (await this.#ctx.c.stream.deleteMany({ _id: { $in: singles } })).deletedCount
        for (const d of gone) {
          if (countOf(d) > 1 && (await this.#ctx.c.stream.deleteOne({ _id: d._id })).deletedCount === 1) records += countOf(d)
        }
        more = !stopped && (taken >= budget || docs.length >= budget)
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
      const [stats] = await this.#ctx.c.stream.aggregate<{ storageStats?: { size?: number } }>([{ $collStats: { storageStats: {} } }], { readConcern: { level: 'local' } }).toArray()
      return { first, last, records: last - first + 1, bytes: stats?.storageStats?.size ?? 0 }
    })
  }
}

/** MongoDB's limit on a document (BSON), less room for the fields beside the records. */
export const STREAM_DOC_BYTES = 16 * 1024 * 1024 - 64 * 1024
/** What a record costs in a `records` array beyond its payload (index key, field names, numbers). */
const RECORD_OVERHEAD_BYTES = 128
/** Documents per round trip of a read: one holds up to a whole batch. */
const READ_BATCH_DOCS = 16

type Run = Omit<StreamDoc, '_id'> & { n: number }

/** The documents of an append before their seqs: one, unless it is too big for one. */
function toRuns (input: StreamAppend): Run[] {
  if (isWholeV1Batch(input) && input.body.length <= STREAM_DOC_BYTES) {
    return [{ n: input.count, workspaceId: text(input.workspaceId), acceptedAt: num(input.acceptedAt), body: input.body.toString('utf8') }]
  }
  const runs: Run[] = []
  let run: StreamDocRecord[] = []
  let bytes = 0
  const close = (): void => {
    if (run.length === 0) return
    runs.push({ n: run.length, workspaceId: run[0]!.workspaceId, acceptedAt: Math.max(...run.map((r) => r.acceptedAt)), records: run })
    run = []
    bytes = 0
  }
  for (const r of appendRecords(input)) {
    const size = Buffer.byteLength(r.payload) + RECORD_OVERHEAD_BYTES
    if (bytes + size > STREAM_DOC_BYTES) close()
    run.push(toDocRecord(r))
    bytes += size
  }
  close()
  return runs
}

function toDocRecord (r: StreamRecordInput): StreamDocRecord {
  const doc: StreamDocRecord = { workspaceId: text(r.workspaceId), payload: text(r.payload), acceptedAt: num(r.acceptedAt) }
  if (r.schemaVersion !== undefined) doc.schemaVersion = num(r.schemaVersion)
  return doc
}

function countOf (d: StreamDoc): number {
  return d.n ?? 1
}

/** Appends the records of `d` with seq >= from to `out`, until it holds `limit`. */
function pushRecords (out: StreamRecord[], d: StreamDoc, from: number, limit: number): void {
  const n = countOf(d)
  const start = Math.max(0, from - d._id)
  if (start >= n) return
  const first = out.length
  if (d.body !== undefined) {
    const texts = wholeBatchTexts(Buffer.from(d.body, 'utf8'), n)
    for (let i = start; i < n && out.length < limit; i++) out.push({ seq: d._id + i, workspaceId: d.workspaceId, payload: texts[i]!, acceptedAt: d.acceptedAt })
  } else if (d.records !== undefined) {
    for (let i = start; i < n && out.length < limit; i++) out.push(toRecord(d._id + i, d.records[i]!))
  } else {
    out.push(toRecord(d._id, { workspaceId: d.workspaceId, schemaVersion: d.schemaVersion, payload: d.payload ?? '', acceptedAt: d.acceptedAt }))
  }
  if (typeof d.batchId === 'string') for (let i = first; i < out.length; i++) out[i]!.batchId = d.batchId
}

function toRecord (seq: number, r: StreamDocRecord): StreamRecord {
  return r.schemaVersion === undefined || r.schemaVersion === null
    ? { seq, workspaceId: r.workspaceId, payload: r.payload, acceptedAt: r.acceptedAt }
    : { seq, workspaceId: r.workspaceId, schemaVersion: r.schemaVersion, payload: r.payload, acceptedAt: r.acceptedAt }
}
