/**
 * The data format of the embedded store, and the one-time upgrade of a directory written by an
 * earlier version, run when the environment is opened.
 *
 *   format 1  JSON access rules, one stream entry per record ('stream', JSON tuples), an exact
 *             expiry index ('rules-by-expiry')
 *   format 2  binary access rules (rule-codec.ts), one stream chunk per append
 *             ('stream-chunks', stream-codec.ts), the lazy expiry log (expiry-log.ts)
 *   format 3  the stream (its chunks and head) in an environment of its own, `<dataDir>/stream/`
 *             (lmdb-env.ts says why)
 *   format 4  expiry-log buckets of 10 s instead of an hour (expiry-log.ts): the log is rebuilt
 *             from the rule tables, which also leaves out every stale reference. A format-3
 *             version would read the new buckets as hours and drop live references as stale,
 *             so it must refuse the directory — which the format number makes it do.
 *   format 5  new unkeyed access rules in arrival order (key-layout.ts arrivalKey), found by
 *             their target through an index held in memory (arrival-index.ts). Nothing is
 *             rewritten: rules stored under their target stay there and are still found. A
 *             format-4 version would look an arrival-order rule up by its target, miss it and
 *             store the target a second time, so it must refuse the directory.
 *   format 6  the access-rule change log (change-log.ts): every change of an access rule other
 *             than a new unkeyed one is logged, so a rebuild's catch-up reads what changed, not
 *             every rule. Nothing is rewritten (the log starts empty; a cache starts with a whole
 *             read). A format-5 version would change rules without logging them, and a format-6
 *             process's cache would miss those changes, so it must refuse the directory.
 *   format 7  a tombstone's value is its lapse time and action only (JSON [lapsedAt, action]),
 *             its key naming the rule; those written before stay as they are until they go, a
 *             day after their lapse. A format-6 version would misread the new ones.
 *   format 8  tombstones in lapse order and in partitions of the target table (tombstones.ts),
 *             so that a sweep writes them near the tables' ends; the format-7 tables (and the
 *             format-6 values in them) are moved over and dropped in one transaction; and a
 *             sweep pass logs its removals as one change entry a workspace (change-log.ts op
 *             '*'). A format-7 version would not find the tombstones, would write its own beside
 *             them and would misread those entries, so it must refuse the directory.
 *
 * Each upgrade of the main environment is one write transaction, so a crash leaves the older
 * format untouched, and it re-checks the format under the write lock, so two processes opening an
 * old directory at once upgrade it once. Moving the stream spans two environments: the chunks are
 * copied first (idempotent: the same keys and bytes, the head as the larger of both), and only
 * then removed from the main environment in the transaction that records format 3 — a crash in
 * between copies them again at the next open. A directory of a newer format is refused rather
 * than misread (so a format-2 version of threatfeed refuses a moved directory instead of
 * starting an empty stream at seq 1).
 */
import type { RootDatabase } from 'lmdb'
import type { AccessRule, LapsedTombstone, StreamRecordInput } from '../types.js'
import { ByteWriter } from './byte-writer.js'
import { EXPIRY_TABLE, ExpiryLogWriter } from './expiry-log.js'
import { tombstoneOfKey } from './key-layout.js'
import { META, type Databases, type StreamDatabases } from './layout.js'
import { accessRuleExpiresAt, encodeAccessRule } from './rule-codec.js'
import { encodeChunk } from './stream-codec.js'
import { tombstoneAppender } from './tombstones.js'

export const FORMAT = 8
const FORMAT_KEY = 'format'

/** Records per chunk when old per-record entries are regrouped. */
const CHUNK_RECORDS = 1000

type OldStreamTuple = [string, number, number | null, string]

/** A JSON value as lmdb-js stored it: its text, starting with `{`. */
const JSON_OBJECT = 0x7b

/**
 * Brings the directory to FORMAT. Throws when it has a newer one.
 *
 * @example
 *   migrateFormat(root, dbs, streamRoot, streamDbs) // at open, before anything else reads or writes
 */
export function migrateFormat (root: RootDatabase, dbs: Databases, streamRoot: RootDatabase, stream: StreamDatabases): void {
  const seen = dbs.meta.get(FORMAT_KEY)
  if (seen === FORMAT) return
  checkNotNewer(seen)
  root.transactionSync(() => {
    const format = dbs.meta.get(FORMAT_KEY)
    if (format !== undefined && format >= 2) return
    checkNotNewer(format)
    const w = new ByteWriter()
    const log = new ExpiryLogWriter()
    regroupStream(root, dbs, w)
    recodeAccessRules(dbs, w, log)
    for (const { key, value } of dbs.expressionRules.getRange({})) {
      if (value.expiresAt !== null) log.add(EXPIRY_TABLE.expression, key, value.expiresAt)
    }
    root.openDB('rules-by-expiry', { encoding: 'string' }).dropSync()
    log.write(dbs, w)
    dbs.meta.put(FORMAT_KEY, 2)
  })
  root.resetReadTxn()
  if ((dbs.meta.get(FORMAT_KEY) ?? 0) < 3) moveStream(root, dbs, streamRoot, stream)
  root.resetReadTxn()
  rebuildExpiryLog(root, dbs)
  root.resetReadTxn()
  moveTombstones(root, dbs)
  root.resetReadTxn()
  // Format 4 → 5 → 6 → 7 changes nothing stored (the change log starts empty): the number alone
  // keeps older versions out.
  root.transactionSync(() => {
    if ((dbs.meta.get(FORMAT_KEY) ?? 0) < FORMAT) dbs.meta.put(FORMAT_KEY, FORMAT)
  })
}

/** Format 3 → 4: the expiry log rebuilt in 10-second buckets, in one transaction. */
function rebuildExpiryLog (root: RootDatabase, dbs: Databases): void {
  root.transactionSync(() => {
    if ((dbs.meta.get(FORMAT_KEY) ?? 0) >= 4) return
    // Collected first: removing entries under a live cursor is not something to rely on.
    for (const key of Array.from(dbs.expiryLog.getKeys({}))) dbs.expiryLog.remove(key)
    const w = new ByteWriter()
    const log = new ExpiryLogWriter()
    for (const { key, value } of dbs.accessRules.getRange({})) {
      const expiresAt = accessRuleExpiresAt(value)
      if (expiresAt !== null) log.add(EXPIRY_TABLE.access, key, expiresAt)
    }
    for (const { key, value } of dbs.expressionRules.getRange({})) {
      if (value.expiresAt !== null) log.add(EXPIRY_TABLE.expression, key, value.expiresAt)
    }
    log.write(dbs, w)
    dbs.meta.put(FORMAT_KEY, 4)
  })
}

/** Format 7 → 8: the tombstones moved into the log and its partitions (tombstones.ts), in one transaction. */
function moveTombstones (root: RootDatabase, dbs: Databases): void {
  root.transactionSync(() => {
    if ((dbs.meta.get(FORMAT_KEY) ?? 0) >= 8) return
    const byKey = root.openDB<OldTombstone, string>('tombstones', { encoding: 'json' })
    const byTime = root.openDB<Buffer, [number, string]>('tombstones-by-time', { encoding: 'binary' })
    dbs.meta.put(META.tombstoneCount, 0)
    const tombs = tombstoneAppender(dbs)
    let moved = 0
    // In lapse order, so the log's order is the old index's; an identity's earlier lapse (its
    // tombstone since replaced) had only its time-index entry left, and is not moved.
    for (const [lapsedAt, key] of byTime.getKeys({})) {
      const stored = byKey.get(key)
      const t = stored === undefined ? undefined : oldTombstone(key, stored)
      if (t?.lapsedAt !== lapsedAt) continue
      tombs.append(t)
      if (++moved % MOVE_SLICE === 0) tombs.finish()
    }
    tombs.finish()
    byKey.dropSync()
    byTime.dropSync()
    dbs.meta.put(FORMAT_KEY, 8)
  })
}

/** Tombstones moved per write of the appender: what it holds at most (up to a million move). */
const MOVE_SLICE = 10_000

/** A format-7 tombstone's value, [lapsedAt, action] (1 block, 2 allow); format 6 stored the whole record. */
type OldTombstone = readonly [lapsedAt: number, action?: 1 | 2] | LapsedTombstone

function oldTombstone (key: string, stored: OldTombstone): LapsedTombstone {
  if (!Array.isArray(stored)) return stored as LapsedTombstone
  const [lapsedAt, action] = stored as readonly [number, (1 | 2)?]
  return { ...tombstoneOfKey(key), lapsedAt, ...(action === undefined ? {} : { action: action === 2 ? 'allow' : 'block' }) }
}

/** Format 2 → 3: the stream's chunks and head into the stream's own environment. */
function moveStream (root: RootDatabase, dbs: Databases, streamRoot: RootDatabase, stream: StreamDatabases): void {
  streamRoot.transactionSync(() => {
    for (const { key, value } of dbs.legacyStream.getRange({})) stream.chunks.put(key, value)
    const head = dbs.meta.get(META.streamHead)
    if (head !== undefined && head > (stream.meta.get(META.streamHead) ?? 0)) stream.meta.put(META.streamHead, head)
  })
  root.transactionSync(() => {
    if ((dbs.meta.get(FORMAT_KEY) ?? 0) >= 3) return
    // Collected first: removing entries under a live cursor is not something to rely on.
    for (const key of Array.from(dbs.legacyStream.getKeys({}))) dbs.legacyStream.remove(key)
    dbs.meta.remove(META.streamHead)
    dbs.meta.put(FORMAT_KEY, 3)
  })
}

function checkNotNewer (format: number | undefined): void {
  if (format !== undefined && format > FORMAT) {
    throw new Error(`the data directory has format ${format}, newer than this version of threatfeed reads (${FORMAT})`)
  }
}

function regroupStream (root: RootDatabase, dbs: Databases, w: ByteWriter): void {
  const old = root.openDB<OldStreamTuple, number>('stream', { encoding: 'json' })
  let first = 0
  let records: StreamRecordInput[] = []
  const flush = (): void => {
    if (records.length === 0) return
    w.reset()
    encodeChunk(w, records)
    dbs.legacyStream.put(first, w.view())
    records = []
  }
  for (const { key, value: [workspaceId, acceptedAt, schemaVersion, payload] } of old.getRange({})) {
    if (records.length === CHUNK_RECORDS || (records.length > 0 && key !== first + records.length)) flush()
    if (records.length === 0) first = key
    records.push(schemaVersion === null ? { workspaceId, acceptedAt, payload } : { workspaceId, acceptedAt, schemaVersion, payload })
  }
  flush()
  old.dropSync()
}

function recodeAccessRules (dbs: Databases, w: ByteWriter, log: ExpiryLogWriter): void {
  // Collected first: rewriting values under a live cursor is not something to rely on.
  const old: Array<[string, AccessRule]> = []
  for (const { key, value } of dbs.accessRules.getRange({})) {
    if (value[0] === JSON_OBJECT) old.push([key, JSON.parse(value.toString('utf8')) as AccessRule])
  }
  for (const [key, rule] of old) {
    w.reset()
    encodeAccessRule(w, rule, rule.id, rule.createdAt, rule.updatedAt)
    dbs.accessRules.put(key, w.view())
    if (rule.expiresAt !== null) log.add(EXPIRY_TABLE.access, key, rule.expiresAt)
  }
}
