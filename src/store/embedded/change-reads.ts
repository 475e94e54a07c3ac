/**
 * The two reads behind EmbeddedRuleStore#accessRulesChangedSince, as steps of a sliced read
 * (LmdbEnv.readSliced): each step runs until `until` and answers whether there is more.
 */
import type { Transaction } from 'lmdb'
import type { AccessRule, AccessRuleChanges, Target } from '../types.js'
import { changeRange, decodeChange, numberOfKey, type Change } from './change-log.js'
import { arrivalRange, workspaceRange } from './key-layout.js'
import type { Databases } from './layout.js'
import { accessRuleExpiresAt, decodeAccessRule } from './rule-codec.js'

/** A step of a sliced read. */
export type ReadStep = (dbs: Databases, transaction: Transaction, until: number) => boolean

/** Rows between two looks at the clock. */
const ROWS_PER_CHECK = 256

type Rows = Iterator<{ key: string, value: Buffer }>

/** Every access rule of the workspace to `each`, and the live ones counted into `answer.live`. */
export function readWhole (workspaceId: string, transaction: Transaction, now: number, each: (rule: AccessRule) => void, answer: AccessRuleChanges): ReadStep {
  let rows: Rows | null = null
  let live = 0
  return (dbs, _transaction, until) => {
    rows ??= dbs.accessRules.getRange({ ...workspaceRange(workspaceId), transaction })[Symbol.iterator]() as Rows
    for (let n = 1; ; n++) {
      if (n % ROWS_PER_CHECK === 0 && performance.now() >= until) return true
      const row = rows.next()
      if (row.done === true) {
        answer.live = live
        return false
      }
      const buf = row.value.value
      const e = accessRuleExpiresAt(buf)
      if (e === null || e > now) live++
      answer.changed++
      each(decodeAccessRule(buf, workspaceId))
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
  workspaceId: string, since: number, transaction: Transaction, each: (rule: AccessRule) => void,
  gone: (ruleRef: string | null, target: Target | null) => void, answer: AccessRuleChanges,
): ReadStep {
  let arrivals: Rows | null = null
  let changes: Rows | null = null
  // Heads are decoded when read: lmdb-js may reuse a value's buffer at the next read.
  const nextArrival = (): Head | null => {
    const row = arrivals!.next()
    return row.done === true ? null : { n: numberOfKey(row.value.key), rule: decodeAccessRule(row.value.value, workspaceId), change: null }
  }
  const nextChange = (): Head | null => {
    const row = changes!.next()
    return row.done === true ? null : { n: numberOfKey(row.value.key), rule: null, change: decodeChange(row.value.value) }
  }
  let a: Head | null = null
  let c: Head | null = null
  return (dbs, _transaction, until) => {
    if (arrivals === null) {
      arrivals = dbs.accessRules.getRange({ ...arrivalRange(workspaceId, since), transaction })[Symbol.iterator]() as Rows
      changes = dbs.accessChanges.getRange({ ...changeRange(workspaceId, since), transaction })[Symbol.iterator]() as Rows
      a = nextArrival()
      c = nextChange()
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
        gone(head.change.ruleRef, head.change.target)
      } else {
        // Gone since (a removal entry follows), or written again (so is a later entry): as it is now.
        const buf = dbs.accessRules.get(head.change.pk, { transaction })
        if (buf !== undefined) {
          answer.changed++
          each(decodeAccessRule(buf, workspaceId))
        }
      }
    }
  }
}
