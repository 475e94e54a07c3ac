/**
 * The embedded store's hand-off to its consumer thread (../consumer-thread.ts): the thread's
 * entry (consumer-thread-entry.ts, which opens this data directory with synchronous writes) and
 * the packer of the batches the server's thread hands it (packed-batch.ts).
 */
import type { ConsumerThreadHandoff } from '../consumer-thread.js'
import { threadEntry } from '../../threads/entry.js'
import { EmbeddedBatchPacker } from './packed-batch.js'

/** What the entry opens (ConsumerThreadHandoff#store). */
export interface EmbeddedThreadStore {
  readonly dataDir: string
}

const entry = threadEntry(import.meta.url, './consumer-thread-entry')

/** One packer for the process: it packs one batch at a time, synchronously, into its scratch. */
let packer: EmbeddedBatchPacker | null = null

export function embeddedConsumerThread (dataDir: string): ConsumerThreadHandoff {
  packer ??= new EmbeddedBatchPacker()
  return { entry, store: { dataDir } satisfies EmbeddedThreadStore, packer }
}
