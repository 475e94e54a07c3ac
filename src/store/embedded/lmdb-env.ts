/**
 * The LMDB environment behind the embedded store: one directory, one `data.mdb`, named
 * sub-databases, and the two primitives every write and read goes through.
 *
 * Durability: every commit is flushed to disk before its promise resolves (DECISIONS §3), and
 * `noSync` is never set. lmdb-js's overlapping sync is turned OFF: it flushes after the commit
 * under a third robust mutex in the lock file, and when a process is killed during that flush
 * while another process keeps the environment open, the next process to take the mutex — in a
 * commit of over 500 dirty pages, with its write transaction still open — runs LMDB's recovery
 * for the WRITE mutex on it (mdb_mutex_failed), which declares that process's environment hosed
 * (MDB_PANIC, "Update of meta page failed") and leaves the mutex unrecoverable for every process
 * until all of them close (test/regressions/lmdb-meta-page-panic.test.ts). Without it a commit
 * flushes inside the write lock, whose dead-owner recovery LMDB gets right. What overlapping
 * sync bought — the next transaction starting while the previous one flushes — matters little
 * here: lmdb-js still gathers every write queued during a commit into the next transaction, so
 * concurrent batches share one flush.
 *
 * Two environments: the stream lives in one of its own (`<dataDir>/stream/`), everything else in
 * the main one, so that an ingest append (the durable write the client waits for) does not queue
 * behind the consumer's apply transactions for LMDB's one writer (bench/NOTES.md, "LMDB: two
 * environments"). Nothing needs a transaction spanning both: an append touches only the stream,
 * and the consumer's checkpoint moves with the rules it applied, in the main environment.
 *
 * Synchronous writes (`syncWrites`): a thread that does nothing but write — the stream consumer's
 * own thread (src/stream/consumer-thread.ts) — commits each transaction itself, in the call, with
 * lmdb-js's transactionSync, instead of handing it to lmdb-js's writer thread and waiting for its
 * turn. The commit still flushes to disk before it returns, and an exception still rolls every
 * write of the transaction back (transactionSync aborts on a throw).
 *
 * The format upgrade of an older directory (migrate-format.ts) is not run here but by
 * openEmbeddedStore, through upgrade(), before anything else reads or writes.
 *
 * Several processes: the server keeps the environment open while the CLI opens it briefly. LMDB
 * allows that with one writer at a time across processes (its lock file), so every process must
 * open it with the same options — which is why they live here and nowhere else.
 */
import { mkdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { open, type RootDatabase, type Transaction } from 'lmdb'
import { ThreatfeedError, isThreatfeedError } from '../../errors.js'
import { ByteWriter, type FastBuffer } from './byte-writer.js'
import { ARRIVAL_DIGITS } from './key-layout.js'
import { STREAM_DIR, type Databases, type StreamDatabases } from './layout.js'
import type { StoreFileStats } from '../maintenance.js'
import { accessRuleTargetHash } from './rule-codec.js'

/** 256 GiB of address space: large enough that the map is not resized while another process
 *  has it open (resizing under a second process is LMDB's least-trodden path), while the file
 *  itself only grows as pages are written (measured: a fresh store is 24 KiB on disk). */
const MAP_SIZE = 2 ** 38
const MAIN_MAX_DBS = 24
const STREAM_MAX_DBS = 8
/** Entries per transaction of rewriteTo. */
const REWRITE_BATCH = 10_000

/** One environment's named databases, keys and values as stored, into a new one at `path`. */
async function rewriteEnv (src: RootDatabase, path: string, maxDbs: number): Promise<void> {
  const raw = { encoding: 'binary', keyEncoding: 'binary' } as const
  const dst = open({ path, noSubdir: false, maxDbs, mapSize: MAP_SIZE, overlappingSync: false })
  try {
    // The unnamed database lists the named ones, by name.
    for (const name of Array.from(src.getKeys({}), String)) {
      const from = src.openDB(name, raw)
      const to = dst.openDB(name, raw)
      let batch: Array<{ key: Buffer, value: Buffer }> = []
      const flush = (): Promise<void> => {
        const entries = batch
        batch = []
        return to.transaction(() => { for (const e of entries) void to.put(e.key, e.value) })
      }
      for (const { key, value } of from.getRange({})) {
        batch.push({ key: Buffer.from(key as Buffer), value: Buffer.from(value as Buffer) })
        if (batch.length >= REWRITE_BATCH) await flush()
      }
      await flush()
    }
  } finally {
    await dst.close()
  }
}

/**
 * Access-rule keys as their UTF-8 bytes: what lmdb-js's default (ordered-binary) writes for such
 * strings — they start above U+001B and hold no U+0000..U+0004, so existing stores read back
 * unchanged — but in one native call, not a character at a time (bench/NOTES.md, "LMDB: key encoder").
 */
const UTF8_KEYS = {
  writeKey (key: string | Uint8Array, target: FastBuffer, start: number): number {
    if (typeof key === 'string') return start + target.utf8Write(key, start)
    // lmdb-js's own range bound when none is given (a one-byte buffer).
    target.set(key, start)
    return start + key.length
  },
  readKey (source: FastBuffer, start: number, end: number): string {
    return source.utf8Slice(start, end)
  },
}

/**
 * The arrival scan's key encoder (layout.ts Databases#arrivalScan): bounds written as UTF8_KEYS
 * writes them; a key read back as its arrival number (key-layout.ts arrivalKey: it ends in the
 * number's hex digits), with no string made.
 */
const ARRIVAL_NUMBER_KEYS = {
  writeKey: UTF8_KEYS.writeKey,
  readKey (source: FastBuffer, start: number, end: number): number {
    let n = 0
    for (let i = end - ARRIVAL_DIGITS; i < end; i++) {
      const c = source[i]!
      n = n * 16 + (c <= 57 ? c - 48 : c - 87)
    }
    return n
  },
}

/** The arrival scan's values: the hash of the record's target, read in lmdb-js's shared buffer (no copy). */
const TARGET_HASH_VALUES = {
  encode (): never {
    throw new TypeError('the arrival scan is read only')
  },
  decode: accessRuleTargetHash,
}

export interface LmdbEnvOptions {
  /** Commit in the calling thread, synchronously (see above); for a thread that only writes. */
  readonly syncWrites?: boolean
}

export class LmdbEnv {
  readonly dbs: Databases
  readonly streamDbs: StreamDatabases
  /** Where values are encoded, inside write transactions only (see byte-writer.ts). */
  readonly scratch = new ByteWriter()
  /** Where keys are built, likewise. */
  readonly keys = new ByteWriter(4096)
  /** Where stream chunks are encoded (then copied out: see EmbeddedSignalStream#append). */
  readonly streamScratch = new ByteWriter()
  readonly #root: RootDatabase
  readonly #streamRoot: RootDatabase
  readonly #syncWrites: boolean
  readonly #dataDir: string
  #closed = false

  constructor (dataDir: string, options: LmdbEnvOptions = {}) {
    this.#dataDir = dataDir
    this.#syncWrites = options.syncWrites === true
    try {
      mkdirSync(dataDir, { recursive: true })
      // noSubdir is explicit: lmdb-js otherwise treats a directory name containing a dot as a file.
      this.#root = open({ path: dataDir, noSubdir: false, maxDbs: MAIN_MAX_DBS, mapSize: MAP_SIZE, overlappingSync: false })
      const root = this.#root
      this.#streamRoot = open({ path: join(dataDir, STREAM_DIR), noSubdir: false, maxDbs: STREAM_MAX_DBS, mapSize: MAP_SIZE, overlappingSync: false })
      const streamRoot = this.#streamRoot
      // JSON for the admin records: lmdb-js decodes JSON about three times faster than its
      // default MessagePack without shared structures (measured on rule records), whose
      // per-record structure definitions are rebuilt on every read. The two hot paths, access
      // rules and the stream, have binary forms of their own (rule-codec.ts, stream-codec.ts).
      const json = { encoding: 'json' } as const
      const text = { encoding: 'string' } as const
      const binary = { encoding: 'binary' } as const
      this.dbs = {
        workspaces: root.openDB('workspaces', json),
        keys: root.openDB('keys', json),
        keysByHash: root.openDB('keys-by-hash', text),
        lists: root.openDB('lists', json),
        listsByName: root.openDB('lists-by-name', text),
        accessRules: root.openDB('access-rules', { ...binary, keyEncoder: UTF8_KEYS } as never),
        arrivalScan: root.openDB('access-rules', { encoder: TARGET_HASH_VALUES, keyEncoder: ARRIVAL_NUMBER_KEYS } as never),
        accessChanges: root.openDB('access-changes', binary),
        accessByTarget: root.openDB('access-by-target', text),
        expressionRules: root.openDB('expression-rules', json),
        expiryLog: root.openDB('expiry-log', binary),
        tombstoneLog: root.openDB('tombstone-log', binary),
        tombstonesByTarget: root.openDB('tombstones-by-target', binary),
        legacyStream: root.openDB('stream-chunks', binary),
        checkpoints: root.openDB('checkpoints', json),
        feedVersions: root.openDB('feed-versions', json),
        publishedRules: root.openDB('published-rules', binary),
        servedCopies: root.openDB('served-copies', binary),
        servedIndex: root.openDB('served-index', json),
        consumers: root.openDB('feed-consumers', json),
        journal: root.openDB('admin-journal', json),
        meta: root.openDB('meta', json),
      }
      this.streamDbs = {
        chunks: streamRoot.openDB('stream-chunks', binary),
        meta: streamRoot.openDB('meta', json),
        idempotency: streamRoot.openDB('idempotency', json),
        idempotencyByTime: streamRoot.openDB('idempotency-by-time', json),
      }
    } catch (cause) {
      // The place and the reason: an operator reads "rule store unavailable" alone as the server's fault.
      const reason = (cause as NodeJS.ErrnoException)?.code ?? (cause as Error)?.message ?? String(cause)
      throw new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: new Error(`cannot open the embedded store in ${dataDir} (THREATFEED_DATA_DIR): ${reason}`, { cause }) })
    }
  }

  /**
   * Runs `fn` on the raw environments, for the format upgrade (migrate-format.ts) before
   * anything else uses them. When it throws, both environments are closed and the error is the
   * store's failure to open.
   */
  upgrade (fn: (root: RootDatabase, dbs: Databases, streamRoot: RootDatabase, streamDbs: StreamDatabases) => void): void {
    try {
      fn(this.#root, this.dbs, this.#streamRoot, this.streamDbs)
    } catch (cause) {
      this.#closed = true
      void this.#root.close().catch(() => {})
      void this.#streamRoot.close().catch(() => {})
      throw new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause })
    }
  }

  /** Runs a read against the current snapshot. */
  read<T> (fn: (dbs: Databases) => T): T {
    return this.#readIn(this.dbs, fn)
  }

  /**
   * read() from the latest commit of any writer. lmdb-js keeps one read snapshot per opened
   * environment until a timer of its own, and renews it early only after commits made through
   * that same handle: a commit by another handle — another store on the directory, the
   * consumer's thread, another process — would otherwise stay unseen for that long, even by a
   * read that starts after the commit resolved.
   */
  readLatest<T> (fn: (dbs: Databases) => T): T {
    this.#renewMain()
    return this.#readIn(this.dbs, fn)
  }

  /**
   * Runs `fn` in a write transaction and resolves once it is committed, which (without
   * overlapping sync) includes the flush to disk. A child transaction, so that an exception
   * thrown half-way rolls back every write `fn` made: lmdb-js's plain `transaction` would commit
   * the writes made before the throw. Transactions of one event turn share one LMDB commit.
   *
   * A failed commit (I/O error, disk full) rejects with TF_ERR_STORE_UNAVAILABLE whose cause is
   * LMDB's own error, and leaves no unhandled rejection behind (see holdCommitPromise).
   */
  write<T> (fn: (dbs: Databases) => T): Promise<T> {
    return this.#writeIn(this.#root, () => fn(this.dbs))
  }

  /** write() on the stream's environment. */
  writeStream<T> (fn: (dbs: StreamDatabases) => T): Promise<T> {
    return this.#writeIn(this.#streamRoot, () => fn(this.streamDbs))
  }

  /**
   * A long read in slices: `step` runs with the databases and a read transaction until it answers
   * false, and the event loop runs between two calls (a workspace's millions of rules are read
   * without holding the thread). Each slice reads the latest commit: a snapshot kept across the
   * slices would keep LMDB from reusing every page freed while the read runs (the sweep's), and
   * the data file would grow by that much (bench/soak/pages.ts). So a step must resume from the
   * last key it read, not from a cursor of the previous slice.
   */
  async readSliced (step: (dbs: Databases, transaction: Transaction) => boolean): Promise<void> {
    for (;;) {
      if (this.#closed) throw closedError()
      let transaction: Transaction
      try {
        // Of the latest commit, as readLatest.
        this.#root.resetReadTxn()
        transaction = this.#root.useReadTransaction()
      } catch (e) {
        throw toStoreError(e)
      }
      let more: boolean
      try {
        more = step(this.dbs, transaction)
      } catch (e) {
        throw toStoreError(e)
      } finally {
        transaction.done()
      }
      if (!more) return
      await new Promise<void>((resolve) => { setImmediate(resolve) })
    }
  }

  /** read() on the stream's environment. */
  readStream<T> (fn: (dbs: StreamDatabases) => T): T {
    return this.#readIn(this.streamDbs, fn)
  }

  #readIn<D, T> (dbs: D, fn: (dbs: D) => T): T {
    if (this.#closed) throw closedError()
    try {
      return fn(dbs)
    } catch (e) {
      throw toStoreError(e)
    }
  }

  async #writeIn<T> (root: RootDatabase, fn: () => T): Promise<T> {
    if (this.#closed) throw closedError()
    if (this.#syncWrites) {
      try {
        return root.transactionSync(fn)
      } catch (e) {
        throw toStoreError(e)
      }
    }
    let txn: Promise<T>
    try {
      txn = root.childTransaction(fn)
    } catch (e) {
      throw toStoreError(e)
    }
    setImmediate(holdCommitPromise, root)
    try {
      return await txn
    } catch (e) {
      throw toStoreError(await unwrapCommitError(e))
    }
  }

  /** Inside a write: raises a counter by `by` and returns its new value. */
  bump (key: string, by = 1): number {
    const next = (this.dbs.meta.get(key) ?? 0) + by
    this.dbs.meta.put(key, next)
    return next
  }

  /** Drops the cached read snapshot so the next read sees commits of other processes now,
   *  not at the next event turn. */
  renew (): void {
    this.#renewMain()
    this.#streamRoot.resetReadTxn()
  }

  #renewMain (): void {
    if (this.#closed) throw closedError()
    this.#root.resetReadTxn()
  }

  /**
   * The processes other than this one that have either environment open, from LMDB's reader
   * table in each lock file (a process that has read holds a slot until it closes: lmdb-js resets
   * its cached read transaction, it does not free it). Slots of dead processes are cleared first.
   */
  otherProcesses (): number[] {
    if (this.#closed) throw closedError()
    const pids = new Set<number>()
    for (const root of [this.#root, this.#streamRoot]) {
      root.readerCheck()
      for (const m of root.readerList().matchAll(/^\s*(\d+)\s+[0-9a-f]+\s/gm)) pids.add(Number(m[1]))
    }
    pids.delete(process.pid)
    return [...pids].sort((a, b) => a - b)
  }

  /**
   * Each environment's pages by table, its free pages, and the snapshots readers hold: what
   * `threatfeed store stats` shows. A page freed by a commit is reused only once no reader holds
   * a snapshot from before that commit, so `txnsBehind` of the oldest reader is what to look at
   * when the file grows while the tables do not.
   */
  stats (): StoreFileStats[] {
    if (this.#closed) throw closedError()
    try {
      return [envStats(this.#root, this.#dataDir, 'data.mdb'), envStats(this.#streamRoot, this.#dataDir, join(STREAM_DIR, 'data.mdb'))]
    } catch (e) {
      throw toStoreError(e)
    }
  }

  /** A consistent copy of the main environment into `dir` (mdb_env_copy2; compacting: free
   *  pages are left out). The copy is a snapshot of one read transaction; writers go on. */
  copyMain (dir: string, compact: boolean): Promise<void> {
    return this.#copy(this.#root, dir, compact)
  }

  /** copyMain for the stream's environment. */
  copyStream (dir: string, compact: boolean): Promise<void> {
    return this.#copy(this.#streamRoot, dir, compact)
  }

  /**
   * Every named database of both environments, entry by entry, into fresh environments in `dir`:
   * a compacting copy made of ordinary transactions. Not lmdb-js's compacting mdb_env_copy2
   * (MDB_CP_COMPACT): with lmdb 3.5.6 a directory copied that way failed LMDB's assertion
   * "key.mv_size > 0" in mdb_page_alloc within its first writes (test/cli/backup.test.ts).
   */
  async rewriteTo (dir: string): Promise<void> {
    if (this.#closed) throw closedError()
    try {
      await rewriteEnv(this.#root, dir, MAIN_MAX_DBS)
      await rewriteEnv(this.#streamRoot, join(dir, STREAM_DIR), STREAM_MAX_DBS)
    } catch (e) {
      throw toStoreError(e)
    }
  }

  async #copy (root: RootDatabase, dir: string, compact: boolean): Promise<void> {
    if (this.#closed) throw closedError()
    mkdirSync(dir, { recursive: true })
    try {
      await root.backup(dir, compact)
    } catch (e) {
      throw toStoreError(e)
    }
  }

  /** Whether this environment commits in the calling thread (LmdbEnvOptions#syncWrites): then no other transaction shares its commits. */
  get syncWrites (): boolean {
    return this.#syncWrites
  }

  get closed (): boolean {
    return this.#closed
  }

  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    try {
      await Promise.all([this.#root.flushed, this.#streamRoot.flushed])
      await Promise.all([this.#root.close(), this.#streamRoot.close()])
    } catch (e) {
      throw toStoreError(e)
    }
  }
}

interface TreeStat { treeBranchPageCount: number, treeLeafPageCount: number, overflowPages: number, entryCount: number }
const pagesOf = (s: TreeStat): number => s.treeBranchPageCount + s.treeLeafPageCount + s.overflowPages

function envStats (root: RootDatabase, dataDir: string, file: string): StoreFileStats {
  root.resetReadTxn()
  const all = root.getStats() as TreeStat & { pageSize: number, lastPageNumber: number, lastTxnId: number, root: TreeStat, free: TreeStat }
  const page = all.pageSize
  const tables: Record<string, { entries: number, bytes: number }> = {}
  const overhead = pagesOf(all.root) + pagesOf(all.free) + 2
  let used = overhead
  for (const name of Array.from(root.getKeys({}), String)) {
    const stat = root.openDB(name, { encoding: 'binary' }).getStats() as TreeStat
    tables[name] = { entries: stat.entryCount, bytes: pagesOf(stat) * page }
    used += pagesOf(stat)
  }
  // Our own slot, reset, holds no snapshot and is not listed.
  root.resetReadTxn()
  const readers: Array<{ pid: number, txnsBehind: number }> = []
  for (const m of root.readerList().matchAll(/^\s*(\d+)\s+[0-9a-f]+\s+(\d+)\s*$/gm)) {
    readers.push({ pid: Number(m[1]), txnsBehind: all.lastTxnId - Number(m[2]) })
  }
  const pages = all.lastPageNumber + 1
  return { file, fileBytes: statSync(join(dataDir, file)).size, overheadBytes: overhead * page, freeBytes: (pages - used) * page, lastTxnId: all.lastTxnId, readers, tables }
}

/**
 * lmdb-js starts the batch of an event turn's writes in a setImmediate of its own, and that
 * batch-start write makes a commit promise nobody holds (write.js, "TODO: Don't reset these if
 * this comes from the batch start operation"): when the commit fails it is an unhandled
 * rejection, which ends a Node process. This runs in the immediate right after lmdb-js's — it
 * is queued by the same write() call — and holds whatever commit promise is current then.
 */
function holdCommitPromise (root: RootDatabase): void {
  root.committed.then(ignore, ignore)
}

function ignore (): void {}

/**
 * A failed commit rejects every write of the batch with "Commit failed (see commitError for
 * details)" and rejects `commitError`, a promise nobody else holds, with LMDB's error. Handling
 * it here (in the same microtask run, before Node looks for unhandled rejections) both keeps the
 * process alive and gives the caller the error that says what happened.
 */
async function unwrapCommitError (e: unknown): Promise<unknown> {
  const commitError = (e as { commitError?: unknown } | null)?.commitError
  if (!(commitError instanceof Promise)) return e
  return commitError.then(() => e, (inner: unknown) => inner)
}

function closedError (): ThreatfeedError {
  return new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: new Error('the store is closed') })
}

/** Errors we throw on purpose pass; anything from LMDB (disk full, I/O error) is the store failing. */
export function toStoreError (e: unknown): ThreatfeedError {
  if (isThreatfeedError(e)) return e
  return new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: e })
}
