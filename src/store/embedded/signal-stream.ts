/**
 * The signal stream on LMDB, in an environment of its own (lmdb-env.ts says why): one chunk per
 * append (stream-codec.ts), keyed by its first seq. Consumer checkpoints live in the main
 * environment, where they move in the same transaction as the rules (rule-store.ts).
 * Seqs are taken from a counter inside the write transaction that stores the chunk; LMDB admits
 * one writer at a time across every process, so transactions commit in the order they took
 * their seqs and a reader can never see seq n+1 without seq n.
 */
import type { CommitGate } from '../commit-gate.js'
import type { HousekeepingCounters, StoredSignalStream, StreamAppend, StreamCheckpoint, StreamRecord, StreamRetained, TrimPass } from '../types.js'
import { appendCount, isWholeV1Batch } from '../whole-v1-batch.js'
import { META } from './layout.js'
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
    const w = this.#env.streamScratch
    w.reset()
    try {
      if (isWholeV1Batch(input)) encodeWholeV1Chunk(w, input, batchId)
      else encodeChunk(w, input, batchId)
    } catch (e) {
      return Promise.reject(e)
    }
    return this.#put(Buffer.from(w.view()), count, gate)
  }

  async #put (chunk: Buffer, count: number, gate: CommitGate | undefined): Promise<number[]> {
    const first = await this.#env.writeStream((dbs) => {
      const first = (dbs.meta.get(META.streamHead) ?? 0) + 1
      dbs.chunks.put(first, chunk)
      dbs.meta.put(META.streamHead, first + count - 1)
      // Last, once the write lock is ours: a throw rolls this child transaction back, and after
      // it returns nothing is left but the commit (commit-gate.ts).
      gate?.begin()
      return first
    })
    return Array.from({ length: count }, (_, i) => first + i)
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
