/**
 * Which rules may lapse when: a log of (expiry bucket → rule keys), written one entry per bucket
 * per transaction, read back by the sweep.
 *
 *   expiry-log   [bucket, n] → refs      bucket = floor(expiresAt / 10 s), n = a counter
 *                refs: u32 count · count × (u8 table · str primary key)
 *
 * It replaces an exact index (one entry per rule, kept in step on every change), which cost a
 * B-tree insert per new rule — a quarter of the LMDB time of applying an ingest batch (measured
 * with bench/ingest.ts --cpu-prof) — for a sweep that is housekeeping: feeds filter expiry at
 * query time. The log is lazy instead:
 *
 *   - a rule is logged when it gets an expiry bucket it did not have (insert, or an update that
 *     moves it to another bucket); everything a transaction logs in one bucket is one entry;
 *   - nothing is removed when a rule changes or goes: its old reference just goes stale;
 *   - the sweep reads the entries of the buckets that have ended and checks each reference
 *     against the rule as it is now: stale → dropped; lapsed → the rule is removed. Every entry
 *     it reads goes whole, so each reference is read once;
 *   - the scrub walks the entries of later buckets and drops their stale references, so a
 *     deleted or moved rule does not leave its reference until its old bucket ends.
 *
 * Buckets are 10 s (format 4; they were an hour): the sweep handles ended buckets only, so a
 * lapsed rule stays at most one bucket plus one sweep interval, and a pass never rereads the
 * references of a bucket still running.
 *
 * Invariant (checked by test/store/embedded-crash.test.ts after SIGKILLs): every rule with an
 * expiresAt has a reference in the entry of its current bucket.
 */
import { SWEEP_GRAIN_MS } from '../types.js'
import { ByteReader, ByteWriter } from './byte-writer.js'
import type { Databases, ExpiryLogKey } from './layout.js'

export const EXPIRY_TABLE = { access: 0, expression: 1 } as const
export type ExpiryTable = (typeof EXPIRY_TABLE)[keyof typeof EXPIRY_TABLE]

/** Coarse enough that an ingest batch (one expiry for every entry, usually) logs one entry, and
 *  that an upsert moving a rule's expiry by a few seconds logs nothing; fine enough that lapsed
 *  rules leave promptly. */
export const EXPIRY_BUCKET_MS = SWEEP_GRAIN_MS

/** At most this many references per entry, so that a purge transaction stays short. */
const REFS_PER_ENTRY = 2000

/** meta key of the counter that makes entry keys unique. */
const NEXT_KEY = 'expiry-log:next'

export function expiryBucket (expiresAt: number): number {
  return Math.floor(expiresAt / EXPIRY_BUCKET_MS)
}

export interface ExpiryRef {
  readonly table: ExpiryTable
  readonly pk: string
}

/** The references of one bucket gathered in a transaction: (u8 table · str pk) each. */
interface Gathered {
  readonly refs: ByteWriter
  count: number
}

/**
 * The references one write transaction adds; `write` puts them in before the commit.
 *
 * @example
 *   const log = new ExpiryLogWriter()
 *   log.add(EXPIRY_TABLE.access, pkBytes, rule.expiresAt)
 *   log.write(dbs, env.scratch)
 */
export class ExpiryLogWriter {
  readonly #byBucket = new Map<number, Gathered>()

  /** `pk`: the primary key, or its UTF-8 bytes (copied: they may be a scratch view). */
  add (table: ExpiryTable, pk: string | Uint8Array, expiresAt: number): void {
    const bucket = expiryBucket(expiresAt)
    let g = this.#byBucket.get(bucket)
    if (g === undefined) this.#byBucket.set(bucket, g = { refs: new ByteWriter(GATHER_BYTES), count: 0 })
    g.refs.u8(table)
    if (typeof pk === 'string') g.refs.str(pk)
    else {
      g.refs.u32(pk.length)
      g.refs.bytes(pk)
    }
    g.count++
  }

  write (dbs: Databases, w: ByteWriter): void {
    if (this.#byBucket.size === 0) return
    let next = dbs.meta.get(NEXT_KEY) ?? 0
    for (const [bucket, g] of this.#byBucket) {
      const all = g.refs.view()
      // Split at reference boundaries, REFS_PER_ENTRY at a time.
      let from = 0
      for (let done = 0; done < g.count;) {
        const count = Math.min(REFS_PER_ENTRY, g.count - done)
        let to = from
        for (let i = 0; i < count; i++) to += 5 + all.readUInt32LE(to + 1)
        w.reset()
        w.u32(count)
        w.bytes(all.subarray(from, to))
        dbs.expiryLog.put([bucket, next++], w.view())
        done += count
        from = to
      }
    }
    dbs.meta.put(NEXT_KEY, next)
    this.#byBucket.clear()
  }
}

/** Starting room for one bucket's references: about 40 of them; it grows as needed. */
const GATHER_BYTES = 4096

function writeEntry (dbs: Databases, w: ByteWriter, key: ExpiryLogKey, refs: readonly ExpiryRef[]): void {
  w.reset()
  w.u32(refs.length)
  for (const ref of refs) {
    w.u8(ref.table)
    w.str(ref.pk)
  }
  dbs.expiryLog.put(key, w.view())
}

export function readRefs (buf: Buffer): ExpiryRef[] {
  const r = new ByteReader(buf)
  const refs = new Array<ExpiryRef>(r.u32())
  for (let i = 0; i < refs.length; i++) {
    const table = r.u8()
    if (table !== EXPIRY_TABLE.access && table !== EXPIRY_TABLE.expression) throw new RangeError(`unknown expiry table ${table}`)
    refs[i] = { table, pk: r.str() }
  }
  return refs
}

/** What the sweep needs from the rule tables. */
export interface LapseTarget {
  /** A rule's expiry (null: none; undefined: no such rule), for the scrub. */
  expiresAt (table: ExpiryTable, pk: string): number | null | undefined
  /**
   * The sweep's check and removal in one: 'stale' when `pk` names no rule or one whose expiry is
   * no longer in `bucket`, 'removed' (and removed) when it lapsed before `before`, else 'kept'.
   * One read of the record, not one to check and more to remove (bench/soak/sweep-pass.ts).
   */
  lapse (table: ExpiryTable, pk: string, bucket: number, before: number): RefOutcome
}

export interface PurgeStep {
  removed: number
  /** References that named no rule, or a rule that has since moved to another bucket. */
  stale: number
  scanned: number
  last: ExpiryLogKey | undefined
}

/**
 * Inside a write: handles the log entries of buckets that may hold rules lapsed before `before`,
 * after `after` (the `last` of the previous call), until at least `limit` references were looked
 * at. Removes the rules that lapsed before `before`. `scanned < limit` means the end.
 */
export function purgeLog (dbs: Databases, w: ByteWriter, rules: LapseTarget, before: number, after: ExpiryLogKey | undefined, limit: number): PurgeStep {
  // A bucket that starts at `before` holds nothing lapsed before it.
  const end: [number] = [Math.ceil(before / EXPIRY_BUCKET_MS)]
  const range = after === undefined ? { end } : { start: after, exclusiveStart: true, end }
  return walkLog(dbs, w, range, limit, (bucket, ref) => rules.lapse(ref.table, ref.pk, bucket, before))
}

/**
 * Inside a write: drops the stale references of entries after `after`, until at least `limit`
 * references were looked at; live ones stay as they are. `last` undefined: the end of the log.
 */
export function scrubLog (dbs: Databases, w: ByteWriter, rules: LapseTarget, after: ExpiryLogKey | undefined, limit: number): PurgeStep {
  const range = after === undefined ? {} : { start: after, exclusiveStart: true }
  const step = walkLog(dbs, w, range, limit, (bucket, ref) => {
    const expiresAt = rules.expiresAt(ref.table, ref.pk)
    return expiresAt == null || expiryBucket(expiresAt) !== bucket ? 'stale' : 'kept'
  })
  return step.scanned < limit ? { ...step, last: undefined } : step
}

export type RefOutcome = 'removed' | 'stale' | 'kept'

function walkLog (dbs: Databases, w: ByteWriter, range: object, limit: number, judge: (bucket: number, ref: ExpiryRef) => RefOutcome): PurgeStep {
  let removed = 0
  let stale = 0
  let scanned = 0
  let last: ExpiryLogKey | undefined
  // Collected first: rewriting entries under a live cursor is not something to rely on.
  const entries: Array<{ key: ExpiryLogKey, refs: ExpiryRef[] }> = []
  for (const { key, value } of dbs.expiryLog.getRange(range)) {
    const refs = readRefs(value)
    entries.push({ key, refs })
    scanned += refs.length
    if (scanned >= limit) break
  }
  // Judged in key order, not log order: a pass's removals then walk the rule table from one end
  // to the other instead of jumping about it.
  const order: Array<{ pk: string, entry: number, at: number }> = []
  for (let e = 0; e < entries.length; e++) {
    const refs = entries[e]!.refs
    for (let at = 0; at < refs.length; at++) order.push({ pk: refs[at]!.pk, entry: e, at })
  }
  order.sort((a, b) => a.pk < b.pk ? -1 : a.pk > b.pk ? 1 : 0)
  const outcomes = entries.map((e) => new Array<RefOutcome>(e.refs.length))
  for (const { entry, at } of order) {
    const outcome = judge(entries[entry]!.key[0], entries[entry]!.refs[at]!)
    outcomes[entry]![at] = outcome
    if (outcome === 'removed') removed++
    else if (outcome === 'stale') stale++
  }
  for (let e = 0; e < entries.length; e++) {
    const { key, refs } = entries[e]!
    const kept = refs.filter((_, at) => outcomes[e]![at] === 'kept')
    if (kept.length === 0) dbs.expiryLog.remove(key)
    else if (kept.length < refs.length) writeEntry(dbs, w, key, kept)
    last = key
  }
  return { removed, stale, scanned, last }
}

/** Every reference with its bucket, for checks (the crash test). */
export function listRefs (dbs: Databases): Array<{ bucket: number, ref: ExpiryRef }> {
  const out: Array<{ bucket: number, ref: ExpiryRef }> = []
  for (const { key, value } of dbs.expiryLog.getRange({})) {
    for (const ref of readRefs(value)) out.push({ bucket: key[0], ref })
  }
  return out
}

