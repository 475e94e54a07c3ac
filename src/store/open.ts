/**
 * The one place that knows both store backends; everything else sees the Store contract.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import type { BatchingStore } from './batch-types.js'

export type StoreOptions =
  | { kind: 'embedded', dataDir: string, tombstoneMax?: number }
  | { kind: 'mongodb', uri: string, dbName?: string, tombstoneMax?: number, connectRetryMs?: number, onConnectRetry?: (attempt: number, error: unknown) => void, onIndexProblem?: (message: string) => void }

/**
 * Opens the configured store. Rejects with TF_ERR_STORE_UNAVAILABLE when it cannot be reached
 * (MongoDB down at start, data directory not writable).
 *
 * @example
 *   const store = await openStore({ kind: 'embedded', dataDir: process.env.THREATFEED_DATA_DIR ?? './data' })
 *   const { admin } = await store.revisions()
 */
export async function openStore (opts: StoreOptions): Promise<BatchingStore> {
  // Loaded on demand: the CLI opens the embedded store for one command, and the MongoDB driver
  // alone would add a noticeable share of its start-up time.
  if (opts.kind === 'embedded') {
    const { openEmbeddedStore } = await import('./embedded/embedded-store.js')
    return openEmbeddedStore(opts.dataDir, opts.tombstoneMax === undefined ? {} : { tombstoneMax: opts.tombstoneMax })
  }
  const { openMongoStore } = await import('./mongo/mongo-store.js')
  const { kind: _kind, uri, ...rest } = opts
  return openMongoStore(uri, rest)
}

/**
 * Whether the store was ever created: for the embedded one, its main LMDB file in the data
 * directory (lmdb-env.ts). A MongoDB database is the server's to have; it counts as there.
 */
export function storeExists (opts: StoreOptions): boolean {
  return opts.kind === 'mongodb' || existsSync(join(opts.dataDir, 'data.mdb'))
}
