/**
 * A store's hand-off to a stream consumer on a thread of its own: what src/stream's
 * ThreadedConsumer needs of the store without knowing which one it is.
 *
 *   server thread                                  consumer thread (the store's entry module)
 *   packer: each appended batch → one buffer ──▶   entry opens the store for the thread, imports
 *   (transferred, not copied)                      the consumer's body module and runs it with
 *                                                  ConsumerThreadSide: the store, and `unpack`
 *
 * The embedded store offers one (embedded/consumer-handoff.ts): there applying costs about what
 * accepting does, and on the server's thread it held up every request. MongoDB offers none: its
 * work happens in the database, so its consumer stays in the server's thread and only waits.
 *
 * The store packs what it can into its own stored form on the server's thread, so the thread that
 * applies (the one the sustained ingest rate waits for) only writes bytes it is given; an op it
 * cannot pre-encode travels as the caller's text and is turned back into its op on the thread.
 */
import type { BatchingStore, RuleOp } from './batch-types.js'
import type { ThreadEntry } from '../threads/entry.js'

export interface ConsumerThreadHandoff {
  /** The module the thread runs: it opens the store, then runs the body (ConsumerThreadData). */
  readonly entry: ThreadEntry
  /** What the entry opens the store with (structured-cloneable). */
  readonly store: unknown
  /** Packs batches on the server's thread; one per store, used synchronously. */
  readonly packer: BatchPacker
}

/**
 * Builds one batch at a time into a buffer: start, then for each record in seq order addOp (or,
 * when it answers false, addText), then finish.
 *
 * @example
 *   packer.start(workspaceId, acceptedAt, first, commands.length)
 *   for (…) if (!packer.addOp(op)) packer.addText(JSON.stringify(command))
 *   worker.postMessage({ type: 'offer', batch: packer.finish() }, [buffer])
 */
export interface BatchPacker {
  start (workspaceId: string, acceptedAt: number, first: number, count: number): void
  /** Adds the next record as the store's own form of `op`; false (nothing added) when it has none. */
  addOp (op: RuleOp): boolean
  /** Adds the next record as text; the thread's `fromText` makes its op. */
  addText (text: string): void
  /** The batch as a buffer of its own, to transfer. */
  finish (): ArrayBuffer
}

/** Makes a record's op from the text it was packed as (BatchPacker#addText). */
export type FromText = (text: string, workspaceId: string, seq: number, acceptedAt: number) => RuleOp

/** A packed batch on the thread: its seqs, and its ops (made when its pass comes; again on a retry). */
export interface UnpackedBatch<Own> {
  readonly first: number
  readonly count: number
  pushOps (out: Array<RuleOp | Own>): void
}

/**
 * What the thread's body is given. `Own` is the store's own op type, which only that store
 * applies: the body carries it from `unpack` to `store` without knowing what it is.
 */
export interface ConsumerThreadSide<Own> {
  readonly store: BatchingStore<RuleOp | Own>
  /** Throws RangeError on a buffer that is not a packed batch (its header now, the rest at pushOps). */
  unpack (packed: ArrayBuffer, fromText: FromText): UnpackedBatch<Own>
}

/** The thread's workerData. */
export interface ConsumerThreadData {
  /** ConsumerThreadHandoff#store. */
  readonly store: unknown
  /** URL of the body module (ConsumerThreadBody), run once the store is open. */
  readonly body: string
  /** The body's own settings. */
  readonly consumer: unknown
}

/** The body module's export: runs the consumer until it is told to stop, then closes the store. */
export interface ConsumerThreadBody {
  runConsumerThread<Own> (side: ConsumerThreadSide<Own>, settings: unknown): Promise<void>
}
