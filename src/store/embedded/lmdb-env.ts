/**
 * The LMDB environment behind the embedded store: one directory, one `data.mdb`, named
 * sub-databases, and the two primitives every write and read goes through.
 *
 * Durability: lmdb-js's default overlapping sync commits first and flushes after, so a write
 * promise resolves on commit; `write()` then awaits `flushed` so that nothing is acknowledged
 * before it is on disk (DECISIONS §3). `noSync` is never set.
 *
 * Several processes: the server keeps the environment open while the CLI opens it briefly. LMDB
 * allows that with one writer at a time across processes (its lock file), so every process must
 * open it with the same options — which is why they live here and nowhere else.
 */
import { mkdirSync } from 'node:fs'
import { open, type Database, type RootDatabase } from 'lmdb'
import { ThreatfeedError, isThreatfeedError } from '../../errors.js'
import type { AccessList, AccessRule, ApiKey, ExpressionRule, FeedVersion, Workspace } from '../types.js'

/** A stream record as stored: [workspaceId, acceptedAt, schemaVersion or null, payload]. A tuple
 *  encodes and decodes faster than an object, and the stream is the hottest write path. */
export type StreamTuple = [string, number, number | null, string]

/** Expiry index key: [expiry bucket, table, primary key]; see rule-writes.ts and EXPIRY_TABLE. */
export type ExpiryKey = [number, string, string]

export const EXPIRY_TABLE = { access: 'a', expression: 'e' } as const

export interface Databases {
  readonly workspaces: Database<Workspace, string>
  readonly keys: Database<ApiKey, string>
  /** hash → key id; a hash belongs to at most one key. */
  readonly keysByHash: Database<string, string>
  readonly lists: Database<AccessList, string>
  /** workspace␟name␟id → id (names are not unique, so the id ends the key). */
  readonly listsByName: Database<string, string>
  /** Identity key (see key-layout.ts) → rule; one entry per identity by construction. */
  readonly accessRules: Database<AccessRule, string>
  /** workspace␟type␟value␟ruleRef → primary key, for keyed access rules only. */
  readonly accessByTarget: Database<string, string>
  readonly expressionRules: Database<ExpressionRule, string>
  /** Values are empty: the key is the whole entry. */
  readonly expiry: Database<string, ExpiryKey>
  /** seq → record. Numbers are ordered-binary keys, so a range scan walks seqs in order. */
  readonly stream: Database<StreamTuple, number>
  readonly checkpoints: Database<number, string>
  readonly feedVersions: Database<FeedVersion, string>
  /** Counters: the two revisions and the stream head. */
  readonly meta: Database<number, string>
}

export const META = {
  adminRevision: 'revision:admin',
  rulesRevision: 'revision:rules',
  streamHead: 'stream:head',
} as const

/** 256 GiB of address space: large enough that the map is not resized while another process
 *  has it open (resizing under a second process is LMDB's least-trodden path), while the file
 *  itself only grows as pages are written (measured: a fresh store is 24 KiB on disk). */
const MAP_SIZE = 2 ** 38

export class LmdbEnv {
  readonly dbs: Databases
  readonly #root: RootDatabase
  #closed = false

  constructor (dataDir: string) {
    try {
      mkdirSync(dataDir, { recursive: true })
      // noSubdir is explicit: lmdb-js otherwise treats a directory name containing a dot as a file.
      this.#root = open({ path: dataDir, noSubdir: false, maxDbs: 16, mapSize: MAP_SIZE })
      const root = this.#root
      // JSON for records: every stored value is JSON data anyway, and lmdb-js decodes JSON about
      // three times faster than its default MessagePack without shared structures (measured
      // on rule records), whose per-record structure definitions are rebuilt on every read.
      // Shared structures would be as fast but add cross-process structure versioning.
      const json = { encoding: 'json' } as const
      const text = { encoding: 'string' } as const
      this.dbs = {
        workspaces: root.openDB('workspaces', json),
        keys: root.openDB('keys', json),
        keysByHash: root.openDB('keys-by-hash', text),
        lists: root.openDB('lists', json),
        listsByName: root.openDB('lists-by-name', text),
        accessRules: root.openDB('access-rules', json),
        accessByTarget: root.openDB('access-by-target', text),
        expressionRules: root.openDB('expression-rules', json),
        expiry: root.openDB('rules-by-expiry', text),
        stream: root.openDB('stream', json),
        checkpoints: root.openDB('checkpoints', json),
        feedVersions: root.openDB('feed-versions', json),
        meta: root.openDB('meta', json),
      }
    } catch (cause) {
      throw new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause })
    }
  }

  /** Runs a read against the current snapshot. */
  read<T> (fn: (dbs: Databases) => T): T {
    if (this.#closed) throw closedError()
    try {
      return fn(this.dbs)
    } catch (e) {
      throw toStoreError(e)
    }
  }

  /**
   * Runs `fn` in a write transaction and resolves once it is committed and flushed to disk.
   * A child transaction, so that an exception thrown half-way rolls back every write `fn` made:
   * lmdb-js's plain `transaction` would commit the writes made before the throw.
   */
  async write<T> (fn: (dbs: Databases) => T): Promise<T> {
    if (this.#closed) throw closedError()
    try {
      const result = await this.#root.childTransaction(() => fn(this.dbs))
      await this.#root.flushed
      return result
    } catch (e) {
      throw toStoreError(e)
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
    if (this.#closed) throw closedError()
    this.#root.resetReadTxn()
  }

  get closed (): boolean {
    return this.#closed
  }

  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    try {
      await this.#root.flushed
      await this.#root.close()
    } catch (e) {
      throw toStoreError(e)
    }
  }
}

function closedError (): ThreatfeedError {
  return new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: new Error('the store is closed') })
}

/** Errors we throw on purpose pass; anything from LMDB (disk full, I/O error) is the store failing. */
export function toStoreError (e: unknown): ThreatfeedError {
  if (isThreatfeedError(e)) return e
  return new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: e })
}
