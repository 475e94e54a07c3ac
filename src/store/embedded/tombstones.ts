/**
 * Tombstones of swept rules (format 8): what lets an explanation say "lapsed at T" for a day
 * after the sweep removed the rule, in two tables written near their ends, not at random places.
 *
 *   tombstone-log          [lapsedAt, n] → u32 partition · tombstone key (key-layout.ts tombstoneKey)
 *   tombstones-by-target   [partition, tombstone key, n] → f64 lapsedAt · (u8 action: 1 block, 2 allow)
 *
 * n counts every tombstone ever written (META.tombstoneNext, taken under the write lock) and
 * partition = floor(n / PARTITION): a look-up by target seeks the target's key range once in each
 * partition still holding tombstones (at most cap ÷ PARTITION + 1 of them), and a sweep pass's
 * tombstones land in the newest partition, at most PARTITION entries, so they share its pages.
 *
 * Why: format 7 keyed them by target only, so each tombstone was written into a random leaf page
 * of a table of up to a million, and evicted from another one: bench/soak/sweep-cost.ts measured
 * 2.5 pages written per swept rule past the cap, 1.7 of them for the tombstone (bench/NOTES.md,
 * "Sweep: the cost of a removal"). The log is in lapse order (a pass sweeps ended buckets in
 * order), so eviction deletes from its head and from the oldest partitions.
 *
 * A lapse is appended, never looked up first (that read costs what the write saved): a rule that
 * lapses again, after a renewal, leaves a second tombstone; a look-up keeps the latest of an
 * identity, and the older one goes first when the cap is reached. n ends the target table's key,
 * so each tombstone has its own entry there and an eviction deletes it without reading it.
 */
import type { LapsedTombstone } from '../types.js'
import { tombstoneKey, tombstoneOfKey, type KeyRange } from './key-layout.js'
import { META, type Databases } from './layout.js'

/** Tombstones per partition of the target table (see above). */
export const TOMBSTONE_PARTITION = 16_384

const ACTION_BLOCK = 1
const ACTION_ALLOW = 2

/** What a pass appends with: held until `finish` writes them in key order and stores the counters. */
export interface TombstoneAppender {
  append (t: LapsedTombstone): void
  /** Writes what was appended; the appender can be used again afterwards. */
  finish (): void
}

interface Pending {
  readonly lapsedAt: number
  readonly key: string
  readonly value: Buffer
  partition: number
  n: number
}

/**
 * Inside a write: appends tombstones. A pass judges its rules in key order, so their lapse times
 * come in no order: they are held, numbered in lapse order and written in each table's key order,
 * so that both tables fill their last pages instead of splitting pages behind them.
 */
export function tombstoneAppender (dbs: Databases): TombstoneAppender {
  let pending: Pending[] = []
  return {
    append: (t) => {
      pending.push({ lapsedAt: t.lapsedAt, key: tombstoneKey(t.workspaceId, t.kind, t.target, t.ruleRef), value: encodeLapse(t), partition: 0, n: 0 })
    },
    finish: () => {
      if (pending.length === 0) return
      let next = dbs.meta.get(META.tombstoneNext) ?? 0
      pending.sort((a, b) => a.lapsedAt - b.lapsedAt)
      for (const t of pending) {
        t.n = next++
        t.partition = Math.floor(t.n / TOMBSTONE_PARTITION)
        dbs.tombstoneLog.put([t.lapsedAt, t.n], encodeLogValue(t.partition, t.key))
      }
      pending.sort((a, b) => a.partition - b.partition || (a.key < b.key ? -1 : a.key > b.key ? 1 : a.n - b.n))
      for (const t of pending) dbs.tombstonesByTarget.put([t.partition, t.key, t.n], t.value)
      dbs.meta.put(META.tombstoneNext, next)
      dbs.meta.put(META.tombstoneCount, tombstoneCount(dbs) + pending.length)
      pending = []
    },
  }
}

/** Tombstones kept: the count kept beside them. */
export function tombstoneCount (dbs: Databases): number {
  return dbs.meta.get(META.tombstoneCount) ?? 0
}

/**
 * Inside a write: drops at most `limit` tombstones, oldest lapse first — those beyond `max` kept,
 * then those that lapsed before `before`. Returns how many.
 */
export function dropTombstones (dbs: Databases, before: number, max: number, limit: number): number {
  const count = tombstoneCount(dbs)
  const excess = count - max
  const old: Array<{ key: [number, number], target: [number, string, number] }> = []
  // Collected first: removing entries under a live cursor is not something to rely on.
  for (const { key, value } of dbs.tombstoneLog.getRange({ limit })) {
    if (old.length >= excess && key[0] >= before) break
    old.push({ key, target: [value.readUInt32LE(0), value.toString('utf8', 4), key[1]] })
  }
  for (const { key, target } of old) {
    dbs.tombstoneLog.remove(key)
    dbs.tombstonesByTarget.remove(target)
  }
  if (old.length > 0) dbs.meta.put(META.tombstoneCount, count - old.length)
  return old.length
}

/**
 * The tombstones of one identity (a tombstone key) or of one target's access rules (a key range),
 * latest lapse first, one per identity.
 */
export function findTombstones (dbs: Databases, of: { key: string } | { range: KeyRange }): LapsedTombstone[] {
  const latest = new Map<string, number>()
  const actions = new Map<string, number>()
  const seen = (key: string, value: Buffer): void => {
    const lapsedAt = value.readDoubleLE(0)
    if ((latest.get(key) ?? -Infinity) >= lapsedAt) return
    latest.set(key, lapsedAt)
    actions.set(key, value.length > 8 ? value[8]! : 0)
  }
  // From the lowest partition still holding a tombstone to the newest.
  for (const [first] of dbs.tombstonesByTarget.getKeys({ limit: 1 })) {
    const last = Math.floor(((dbs.meta.get(META.tombstoneNext) ?? 1) - 1) / TOMBSTONE_PARTITION)
    for (let p = first; p <= last; p++) {
      // A key's entries lie in [key, key + ' '): the numbers after it, and keys that extend it.
      const range = 'key' in of ? { start: of.key, end: of.key + ' ' } : of.range
      for (const { key, value } of dbs.tombstonesByTarget.getRange({ start: [p, range.start], end: [p, range.end] })) {
        if (!('key' in of) || key[1] === of.key) seen(key[1], value)
      }
    }
  }
  const found: LapsedTombstone[] = []
  for (const [key, lapsedAt] of latest) {
    const action = actions.get(key)
    found.push({ ...tombstoneOfKey(key), lapsedAt, ...(action === ACTION_BLOCK ? { action: 'block' as const } : action === ACTION_ALLOW ? { action: 'allow' as const } : {}) })
  }
  return found.sort((a, b) => b.lapsedAt - a.lapsedAt)
}

function encodeLapse (t: Pick<LapsedTombstone, 'lapsedAt' | 'action'>): Buffer {
  const value = Buffer.allocUnsafe(t.action === undefined ? 8 : 9)
  value.writeDoubleLE(t.lapsedAt, 0)
  if (t.action !== undefined) value[8] = t.action === 'allow' ? ACTION_ALLOW : ACTION_BLOCK
  return value
}

function encodeLogValue (partition: number, key: string): Buffer {
  const value = Buffer.allocUnsafe(4 + Buffer.byteLength(key))
  value.writeUInt32LE(partition, 0)
  value.write(key, 4, 'utf8')
  return value
}
