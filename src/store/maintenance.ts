/**
 * Operations on a store as a whole, beside the Store contract (types.ts): its use table by table,
 * a hot backup and an offline compaction. The embedded store implements them
 * (embedded/maintenance.ts); MongoDB has tools of its own for them, which its operations name
 * instead of pretending to do the work.
 */
import { ThreatfeedError } from '../errors.js'
import type { StoreOptions } from './open.js'

/** One file the operation wrote, relative to the directory it wrote into. */
export interface StoreFile {
  readonly path: string
  readonly bytes: number
}

export interface BackupReport {
  /** The directory holding the copy; it restores by becoming the data directory. */
  readonly out: string
  readonly files: readonly StoreFile[]
  /** The stream head in the copy. */
  readonly streamHead: number
  /** Every consumer's checkpoint in the copy; each is at or below streamHead. */
  readonly checkpoints: Readonly<Record<string, number>>
}

export interface CompactReport {
  readonly dataDir: string
  /** Bytes of the environments' data files before and after. */
  readonly before: number
  readonly after: number
}

/** One data file's use (stats): its tables, its free pages, and the snapshots readers hold. */
export interface StoreFileStats {
  /** Relative to the data directory. */
  readonly file: string
  readonly fileBytes: number
  /** Pages of the file's own bookkeeping (the table list, the free list, the meta pages). */
  readonly overheadBytes: number
  /** Pages freed and not yet reused: a later commit takes them once no reader's snapshot predates their release. */
  readonly freeBytes: number
  readonly lastTxnId: number
  /** Each reader holding a snapshot, and how many commits behind the latest it is. */
  readonly readers: ReadonlyArray<{ readonly pid: number, readonly txnsBehind: number }>
  readonly tables: Readonly<Record<string, { readonly entries: number, readonly bytes: number }>>
}

export interface StatsReport {
  readonly dataDir: string
  readonly files: readonly StoreFileStats[]
}

export interface StoreMaintenance {
  /** What each of the store's files holds, table by table; read while the server runs. */
  stats (): Promise<StatsReport>
  /**
   * A consistent copy of the whole store into `outDir` (which must not exist or be empty), taken
   * while other processes read and write it. Restoring it means serving from `outDir`.
   */
  backup (outDir: string): Promise<BackupReport>
  /**
   * Rewrites the store's files without their free pages, in place. Offline: rejects with
   * TF_ERR_STORE_CONFLICT, changing nothing, while another process has the store open.
   */
  compact (): Promise<CompactReport>
}

/** What the MongoDB store answers: its own tools do these jobs, and the README shows them. */
const mongoMaintenance: StoreMaintenance = {
  stats () {
    return Promise.reject(new ThreatfeedError('TF_ERR_INVALID_ARGUMENT', ['threatfeed store stats reads the embedded store; MongoDB reports its collections itself (db.stats() and db.<collection>.stats() in mongosh)']))
  },
  backup () {
    return Promise.reject(new ThreatfeedError('TF_ERR_INVALID_ARGUMENT', ['threatfeed backup copies the embedded store; back up MongoDB with mongodump --oplog (a replica set, for a consistent copy) and restore with mongorestore --oplogReplay (docs/backup.md)']))
  },
  compact () {
    return Promise.reject(new ThreatfeedError('TF_ERR_INVALID_ARGUMENT', ['threatfeed store compact compacts the embedded store; MongoDB reuses and compacts its own files (its compact command, docs/backup.md)']))
  },
}

/**
 * The maintenance operations of the configured store.
 *
 * @example
 *   const m = await openMaintenance({ kind: 'embedded', dataDir: './data' })
 *   const report = await m.backup('/backups/threatfeed-2024-05-01')
 */
export async function openMaintenance (opts: StoreOptions): Promise<StoreMaintenance> {
  if (opts.kind === 'mongodb') return mongoMaintenance
  const { EmbeddedMaintenance } = await import('./embedded/maintenance.js')
  return new EmbeddedMaintenance(opts.dataDir)
}
