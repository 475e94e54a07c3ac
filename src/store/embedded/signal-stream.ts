/**
 * The signal stream on LMDB, in an environment of its own (lmdb-env.ts says why): one chunk per
 * append (stream-codec.ts), keyed by its first seq. Consumer checkpoints live in the main
 * environment, where they move in the same transaction as the rules (rule-store.ts).
 * Seqs are taken from a counter inside the write transaction that stores the chunk; LMDB admits
 * one writer at a time across every process, so transactions commit in the order they took
 * their seqs and a reader can never see seq n+1 without seq n.
 */
import type { SignalStream, StreamAppend, StreamRecord } from '../types.js'
import { appendCount, isWholeV1Batch } from '../whole-v1-batch.js'
import { META } from './layout.js'
import type { LmdbEnv } from './lmdb-env.js'
import { decodeChunk, encodeChunk, encodeWholeV1Chunk } from './stream-codec.js'

export class EmbeddedSignalStream implements SignalStream {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  /** One transaction — one flush, shared with the transactions of the same event turn — per
   *  call, however many records: the ingest batch is the unit. The chunk is encoded at the call,
   *  not in the transaction, and this is not an async function: the records (a thousand strings
   *  and objects per batch) are garbage before the commit is awaited, instead of outliving a
   *  young-generation collection (see SignalIngester#accept). */
  append (input: StreamAppend): Promise<number[]> {
    const count = appendCount(input)
    if (count === 0) return Promise.resolve([])
    const w = this.#env.streamScratch
    w.reset()
    try {
      if (isWholeV1Batch(input)) encodeWholeV1Chunk(w, input)
      else encodeChunk(w, input)
    } catch (e) {
      return Promise.reject(e)
    }
    return this.#put(Buffer.from(w.view()), count)
  }

  async #put (chunk: Buffer, count: number): Promise<number[]> {
    const first = await this.#env.writeStream((dbs) => {
      const first = (dbs.meta.get(META.streamHead) ?? 0) + 1
      dbs.chunks.put(first, chunk)
      dbs.meta.put(META.streamHead, first + count - 1)
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
}
