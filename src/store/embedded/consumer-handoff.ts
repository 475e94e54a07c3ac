/**
 * The embedded store's hand-off to its consumer thread (../consumer-thread.ts): the thread's
 * entry (consumer-thread-entry.ts, which opens this data directory with synchronous writes) and
 * the packer of the batches the server's thread hands it (packed-batch.ts).
 */
import type { ConsumerThreadHandoff } from '../consumer-thread.js'
import { threadEntry } from '../../threads/entry.js'
import { EmbeddedBatchPacker } from './packed-batch.js'

/**
 * What the entry opens (ConsumerThreadHandoff#store): the directory and every setting the
 * server's store was opened with that the thread's writes obey. The thread sweeps, so a cap it
 * did not know would be the default whatever was configured (THREATFEED_TOMBSTONE_MAX).
 */
export interface EmbeddedThreadStore {
  readonly dataDir: string
  readonly settings: EmbeddedStoreSettings
}

/** The settings of openEmbeddedStore a second store on the same directory must share. */
export interface EmbeddedStoreSettings {
  readonly tombstoneMax?: number
  readonly changesKeptMs?: number
}

const entry = threadEntry(import.meta.url, './consumer-thread-entry')

/** One packer for the process: it packs one batch at a time, synchronously, into its scratch. */
let packer: EmbeddedBatchPacker | null = null

export function embeddedConsumerThread (dataDir: string, settings: EmbeddedStoreSettings): ConsumerThreadHandoff {
  packer ??= new EmbeddedBatchPacker()
  return { entry, store: { dataDir, settings: { ...settings } } satisfies EmbeddedThreadStore, packer }
}
