/**
 * The signal stream on LMDB, in an environment of its own (lmdb-env.ts says why): one chunk per
 * append (stream-codec.ts), keyed by its first seq. Consumer checkpoints live in the main
 * environment, where they move in the same transaction as the rules (rule-store.ts).
 * Seqs are taken from a counter inside the write transaction that stores the chunk; LMDB admits
 * one writer at a time across every process, so transactions commit in the order they took
 * their seqs and a reader can never see seq n+1 without seq n.
 */
import type { CommitGate } from '../commit-gate.js'
import { IDEMPOTENCY_WINDOW_MS, type AppendOnce, type AppendOnceResult, type HousekeepingCounters, type StoredSignalStream, type StreamAppend, type StreamCheckpoint, type StreamRecord, type StreamRetained, type TrimPass } from '../types.js'
import { appendCount, isWholeV1Batch } from '../whole-v1-batch.js'
import { META, type StreamDatabases } from './layout.js'
import type { LmdbEnv } from './lmdb-env.js'
import { chunkCount, chunkLatestAcceptedAt, decodeChunk, encodeChunk, encodeWholeV1Chunk } from './stream-codec.js'

export class EmbeddedSignalStream implements StoredSignalStream {
  readonly #env: LmdbEnv
  readonly #counters: HousekeepingCounters

  constructor (env: LmdbEnv, counters: HousekeepingCounters) {
    this.#env = env
    this.#counters = counters
  }

  /** One transaction — one flush, shared with the transactions of the same event turn — per
   *  call, however many records: the ingest batch is the unit. The chunk is encoded at the call,
   *  not in the transaction, and this is not an async function: the records (a thousand strings
   *  and objects per batch) are garbage before the commit is awaited, instead of outliving a
   *  young-generation collection (see SignalIngester#accept). */
  append (input: StreamAppend, gate?: CommitGate, batchId?: string): Promise<number[]> {
    const count = appendCount(input)
    if (count === 0) return Promise.resolve([])
    let chunk: Buffer
    try {
      chunk = this.#encode(input, batchId)
    } catch (e) {
      return Promise.reject(e)
    }
    return this.#put(chunk, count, gate)
  }

  appendOnce (input: StreamAppend, once: AppendOnce, gate?: CommitGate, batchId?: string): Promise<AppendOnceResult> {
    const count = appendCount(input)
    if (count === 0) return Promise.resolve({ seqs: [], earlier: null })
    let chunk: Buffer
    try {
      chunk = this.#encode(input, batchId)
    } catch (e) {
      return Promise.reject(e)
    }
    const id = `${once.workspaceId}\u0000${once.key}`
    return this.#env.writeStream((dbs): AppendOnceResult => {
      // One writer at a time (LMDB): the entry is read and written under the same lock.
      const earlier = dbs.idempotency.get(id)
      if (earlier !== undefined && earlier.at > once.at - IDEMPOTENCY_WINDOW_MS) {
        gate?.begin()
        return { seqs: range(earlier.first, earlier.n), earlier: { digest: earlier.digest, note: earlier.note, at: earlier.at } }
      }
      pruneIdempotency(dbs, once.at - IDEMPOTENCY_WINDOW_MS)
      if (earlier !== undefined) dbs.idempotencyByTime.remove([earlier.at, id])
      const first = putChunk(dbs, chunk, count)
      dbs.idempotency.put(id, { digest: once.digest, note: once.note, at: once.at, first, n: count })
      dbs.idempotencyByTime.put([once.at, id], null)
      gate?.begin()
      return { seqs: range(first, count), earlier: null }
    })
  }

  #encode (input: StreamAppend, batchId: string | undefined): Buffer {
    const w = this.#env.streamScratch
    w.reset()
    if (isWholeV1Batch(input)) encodeWholeV1Chunk(w, input, batchId)
    else encodeChunk(w, input, batchId)
    return Buffer.from(w.view())
  }

  async #put (chunk: Buffer, count: number, gate: CommitGate | undefined): Promise<number[]> {
    const first = await this.#env.writeStream((dbs) => {
      const first = putChunk(dbs, chunk, count)
      // Last, once the write lock is ours: a throw rolls this child transaction back, and after
      // it returns nothing is left but the commit (commit-gate.ts).
      gate?.begin()
      return first
    })
    return range(first, count)
  }

  async read (from: number, limit: number): Promise<StreamRecord[]> {
    if (limit <= 0) return []
    return this.#env.readStream((dbs) => {
      const out: StreamRecord[] = []
      // The chunk holding `from` starts at or before it: the first key at or below `from`.
      let start = from
      for (const key of dbs.chunks.getKeys({ start: from, reverse: true, limit: 1 })) start = key
      for (const { key, value } of dbs.chunks.getRange({ start })) {
        decodeChunk(value, key, from, limit, out)
        if (out.length >= limit) break
      }
      return out
    })
  }

  async head (): Promise<number> {
    return this.#env.readStream((dbs) => dbs.meta.get(META.streamHead) ?? 0)
  }

  async getCheckpoint (consumer: string): Promise<number> {
    return this.#env.read((dbs) => dbs.checkpoints.get(consumer) ?? 0)
  }

  async setCheckpoint (consumer: string, seq: number): Promise<void> {
    await this.#env.write((dbs) => { dbs.checkpoints.put(consumer, seq) })
  }

  async checkpoints (): Promise<StreamCheckpoint[]> {
    this.#env.renew()
    return this.#env.read((dbs) => [...dbs.checkpoints.getRange({})].map(({ key, value }) => ({ consumer: key, seq: value })))
  }

  forgetCheckpoint (consumer: string): Promise<boolean> {
    return this.#env.write((dbs) => {
      if (dbs.checkpoints.get(consumer) === undefined) return false
      dbs.checkpoints.remove(consumer)
      return true
    })
  }

  /**
   * Whole chunks from the start of the stream, in its own environment's write transaction (the
   * lock ingest appends take: a pass removes at most `limit` records' chunks, a few B-tree
   * deletes). The checkpoints live in the main environment and are read first: they only move
   * forward, so a checkpoint that moves meanwhile only makes this pass keep more.
   */
  async trim (acceptedBefore: number, limit: number): Promise<TrimPass> {
    this.#env.renew()
    const keepFrom = this.#env.read((dbs) => {
      let min = Infinity
      for (const { value } of dbs.checkpoints.getRange({})) min = Math.min(min, value)
      return min === Infinity ? 0 : min
    })
    const pass = await this.#env.writeStream((dbs) => {
      let records = 0
      let more = false
      const gone: number[] = []
      for (const { key, value } of dbs.chunks.getRange({})) {
        const count = chunkCount(value)
        // The chunk holding a checkpoint's seq stays, and so does everything after it.
        if (key + count - 1 >= keepFrom || chunkLatestAcceptedAt(value) >= acceptedBefore) break
        if (records > 0 && records + count > limit) {
          more = true
          break
        }
        gone.push(key)
        records += count
      }
      for (const key of gone) dbs.chunks.remove(key)
      return { records, more }
    })
    this.#counters.trimPasses++
    this.#counters.streamRecordsTrimmed += pass.records
    return pass
  }

  async retained (): Promise<StreamRetained> {
    this.#env.renew()
    return this.#env.readStream((dbs) => {
      const last = dbs.meta.get(META.streamHead) ?? 0
      let first = last + 1
      for (const key of dbs.chunks.getKeys({ limit: 1 })) first = key
      const stats = dbs.chunks.getStats() as { pageSize: number, treeBranchPageCount: number, treeLeafPageCount: number, overflowPages: number }
      const bytes = stats.pageSize * (stats.treeBranchPageCount + stats.treeLeafPageCount + stats.overflowPages)
      return { first, last, records: last - first + 1, bytes }
    })
  }
}

/** Stores one chunk after the head and moves the head; answers its first seq. */
function putChunk (dbs: StreamDatabases, chunk: Buffer, count: number): number {
  const first = (dbs.meta.get(META.streamHead) ?? 0) + 1
  dbs.chunks.put(first, chunk)
  dbs.meta.put(META.streamHead, first + count - 1)
  return first
}

/** Lapsed entries removed per keyed append: more than one, so that the table shrinks after a burst. */
const PRUNE_PER_APPEND = 4

/** Drops a few of the entries older than `before`, oldest first (the window bounds the table). */
function pruneIdempotency (dbs: StreamDatabases, before: number): void {
  for (const key of dbs.idempotencyByTime.getKeys({ end: [before, ''], limit: PRUNE_PER_APPEND })) {
    dbs.idempotency.remove(key[1])
    dbs.idempotencyByTime.remove(key)
  }
}

function range (first: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => first + i)
}
