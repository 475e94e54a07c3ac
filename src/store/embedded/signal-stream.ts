/**
 * The signal stream on LMDB. Seqs are taken from a counter inside the write transaction that
 * stores the records; LMDB admits one writer at a time across every process, so transactions
 * commit in the order they took their seqs and a reader can never see seq n+1 without seq n.
 */
import type { SignalStream, StreamRecord, StreamRecordInput } from '../types.js'
import { META, type LmdbEnv, type StreamTuple } from './lmdb-env.js'

export class EmbeddedSignalStream implements SignalStream {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  /** One transaction — one flush — per call, however many records: the ingest batch is the unit. */
  async append (records: StreamRecordInput[]): Promise<number[]> {
    if (records.length === 0) return []
    const tuples = records.map(toTuple)
    return this.#env.write((dbs) => {
      const first = (dbs.meta.get(META.streamHead) ?? 0) + 1
      const seqs = new Array<number>(tuples.length)
      for (let i = 0; i < tuples.length; i++) {
        seqs[i] = first + i
        dbs.stream.put(first + i, tuples[i] as StreamTuple)
      }
      dbs.meta.put(META.streamHead, first + tuples.length - 1)
      return seqs
    })
  }

  async read (from: number, limit: number): Promise<StreamRecord[]> {
    if (limit <= 0) return []
    return this.#env.read((dbs) => Array.from(dbs.stream.getRange({ start: from, limit }), (e) => toRecord(e.key, e.value)))
  }

  async head (): Promise<number> {
    return this.#env.read((dbs) => dbs.meta.get(META.streamHead) ?? 0)
  }

  async getCheckpoint (consumer: string): Promise<number> {
    return this.#env.read((dbs) => dbs.checkpoints.get(consumer) ?? 0)
  }

  async setCheckpoint (consumer: string, seq: number): Promise<void> {
    await this.#env.write((dbs) => { dbs.checkpoints.put(consumer, seq) })
  }
}

function toTuple (r: StreamRecordInput): StreamTuple {
  return [r.workspaceId, r.acceptedAt, r.schemaVersion ?? null, r.payload]
}

function toRecord (seq: number, [workspaceId, acceptedAt, schemaVersion, payload]: StreamTuple): StreamRecord {
  // v1 records carry no schemaVersion at all (not even `undefined`), as types.ts describes them.
  return schemaVersion === null
    ? { seq, workspaceId, payload, acceptedAt }
    : { seq, workspaceId, schemaVersion, payload, acceptedAt }
}
