/** An in-memory SignalStream for unit tests of the producer (no LMDB). */
import type { CommitGate } from '../../src/store/commit-gate.js'
import type { SignalStream, StreamAppend, StreamRecord } from '../../src/store/types.js'
import { appendRecords } from '../../src/store/whole-v1-batch.js'

export class MemoryStream implements SignalStream {
  readonly records: StreamRecord[] = []
  readonly checkpoints = new Map<string, number>()
  /** When set, append waits for it (or rejects with it). */
  appendHook: (() => Promise<void>) | null = null

  async append (input: StreamAppend, gate?: CommitGate, batchId?: string): Promise<number[]> {
    if (this.appendHook !== null) await this.appendHook()
    gate?.begin() // as a store's transaction does, right before its commit
    return appendRecords(input).map((r) => {
      const seq = this.records.length + 1
      this.records.push(batchId === undefined ? { ...r, seq } : { ...r, seq, batchId })
      return seq
    })
  }

  async read (from: number, limit: number): Promise<StreamRecord[]> {
    return this.records.filter((r) => r.seq >= from).slice(0, limit)
  }

  async head (): Promise<number> {
    return this.records.length
  }

  async getCheckpoint (consumer: string): Promise<number> {
    return this.checkpoints.get(consumer) ?? 0
  }

  async setCheckpoint (consumer: string, seq: number): Promise<void> {
    this.checkpoints.set(consumer, seq)
  }
}
