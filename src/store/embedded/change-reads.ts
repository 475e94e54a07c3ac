/**
 * The two reads behind EmbeddedRuleStore#accessRulesChangedSince, as steps of a sliced read
 * (LmdbEnv.readSliced): each step runs until `until` and answers whether there is more. Each
 * slice is a newer snapshot, so a step opens its ranges again after the last key it read.
 * What a read lists is then at least as new as the change number it answers (read in its first
 * slice), and a change after that number may be listed by this read and again by the next one:
 * readers put rules by identity, so listing one twice changes nothing.
 */
import type { Transaction } from 'lmdb'
import type { AccessRule, AccessRuleChanges, Target } from '../types.js'
import { changeRange, decodeChange, numberOfKey, type Change } from './change-log.js'
import { arrivalRange, workspaceRange, type KeyRange } from './key-layout.js'
import type { Databases } from './layout.js'
import { accessRuleExpiresAt, decodeAccessRule } from './rule-codec.js'

/** A step of a sliced read. */
export type ReadStep = (dbs: Databases, transaction: Transaction, until: number) => boolean

/** Rows between two looks at the clock. */
const ROWS_PER_CHECK = 256

type Rows = Iterator<{ key: string, value: Buffer }>

/** Ends an iterator left part-way, so that its cursor lets go of the slice's read transaction
 *  (one left open per slice would fill LMDB's reader table). */
function close (rows: Rows | null): void {
  rows?.return?.()
}

/** `range` in `transaction`, after `last` when a slice before read up to it. */
function after (range: KeyRange, last: string | null, transaction: Transaction): KeyRange & { transaction: Transaction, exclusiveStart?: boolean } {
  return last === null ? { ...range, transaction } : { ...range, start: last, exclusiveStart: true, transaction }
}

/** Every access rule of the workspace to `each`, and the live ones counted into `answer.live`. */
export function readWhole (workspaceId: string, now: number, each: (rule: AccessRule) => void, answer: AccessRuleChanges): ReadStep {
  const range = workspaceRange(workspaceId)
  let last: string | null = null
  let live = 0
  return (dbs, transaction, until) => {
    const rows = dbs.accessRules.getRange(after(range, last, transaction))[Symbol.iterator]() as Rows
    try {
      for (let n = 1; ; n++) {
        if (n % ROWS_PER_CHECK === 0 && performance.now() >= until) return true
        const row = rows.next()
        if (row.done === true) {
          answer.live = live
          return false
        }
        last = row.value.key
        const buf = row.value.value
        const e = accessRuleExpiresAt(buf)
        if (e === null || e > now) live++
        answer.changed++
        each(decodeAccessRule(buf, workspaceId))
      }
    } finally {
      close(rows)
    }
  }
}

/** One head of the merge: a new unkeyed rule (its arrival key) or a change entry. */
type Head = { n: number, rule: AccessRule, change: null } | { n: number, rule: null, change: Change }

/**
 * The workspace's new unkeyed rules and change entries numbered after `since`, in number order:
 * rules written (read as they are in this snapshot) to `each`, removals to `gone`.
 */
export function readChanges (
  workspaceId: string, since: number, each: (rule: AccessRule) => void,
  gone: (ruleRef: string | null, target: Target | null) => void, answer: AccessRuleChanges,
): ReadStep {
  const arrivalKeys = arrivalRange(workspaceId, since)
  const changeKeys = changeRange(workspaceId, since)
  let arrivals: Rows | null = null
  let changes: Rows | null = null
  // The last key each range read (its head, if one is held): where the next slice goes on.
  let lastArrival: string | null = null
  let lastChange: string | null = null
  // Heads are decoded when read: lmdb-js may reuse a value's buffer at the next read.
  const nextArrival = (): Head | null => {
    const row = arrivals!.next()
    if (row.done === true) return null
    lastArrival = row.value.key
    return { n: numberOfKey(row.value.key), rule: decodeAccessRule(row.value.value, workspaceId), change: null }
  }
  const nextChange = (): Head | null => {
    const row = changes!.next()
    if (row.done === true) return null
    lastChange = row.value.key
    return { n: numberOfKey(row.value.key), rule: null, change: decodeChange(row.value.value) }
  }
  let a: Head | null = null
  let c: Head | null = null
  let first = true
  return (dbs, transaction, until) => {
    arrivals = dbs.accessRules.getRange(after(arrivalKeys, lastArrival, transaction))[Symbol.iterator]() as Rows
    changes = dbs.accessChanges.getRange(after(changeKeys, lastChange, transaction))[Symbol.iterator]() as Rows
    try {
      if (first) {
        first = false
        a = nextArrival()
        c = nextChange()
      } else {
        // A range that ran out in an earlier slice may have grown since: look again.
        a ??= nextArrival()
        c ??= nextChange()
      }
      for (let n = 1; ; n++) {
        if (n % ROWS_PER_CHECK === 0 && performance.now() >= until) return true
        let head: Head
        if (a !== null && (c === null || a.n < c.n)) {
          head = a
          a = nextArrival()
        } else if (c !== null) {
          head = c
          c = nextChange()
        } else {
          return false
        }
        if (head.rule !== null) {
          answer.changed++
          each(head.rule)
        } else if (head.change.op === 'gone') {
          for (const r of head.change.removed) gone(r.ruleRef, r.target)
        } else {
          // Gone since (a removal entry follows), or written again (so is a later entry): as it is now.
          const buf = dbs.accessRules.get(head.change.pk, { transaction })
          if (buf !== undefined) {
            answer.changed++
            each(decodeAccessRule(buf, workspaceId))
          }
        }
      }
    } finally {
      close(arrivals)
      close(changes)
    }
  }
}
