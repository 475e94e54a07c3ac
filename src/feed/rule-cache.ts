/**
 * One workspace's access rules as the feed side keeps them between rebuilds, caught up from the
 * store by what changed (RuleStore#accessRulesChangedSince) instead of read whole. A store that
 * lists removals (the embedded store's change log) makes a catch-up cost what changed: a removed
 * rule's row is marked lapsed at once (never served) and its slot left as a hole, and the table is
 * read whole again once holes are most of it. A store that does not: when the rules held, with the
 * changes applied, count more live rules than the store (an explicit delete), the cache reloads
 * the workspace whole (in slices). Lapsed rules the sweep removed are not live on either side.
 *
 * The table is changed only while no build reads it (`read` and `refresh` take turns).
 */
import type { AccessRule, LabelValue, RuleStore, Target } from '../store/types.js'
import { CONFIDENCES, SEVERITIES } from '../store/types.js'
import type { RuleTable } from './rule-table.js'
import { ROWS_PER_YIELD, runSliced } from './slices.js'

const TYPE = { ip: 0, asn: 1, country: 2 } as const

/** Holes a table may hold beyond half its rows before it is read whole again. */
const HOLES_KEPT = 4096

function ownRank (values: readonly string[], field: string | null, label: unknown): number {
  if (field !== null) {
    const i = values.indexOf(field)
    if (i >= 0) return i + 1
  }
  return typeof label === 'string' ? values.indexOf(label) + 1 : 0
}

function isEmpty (o: object): boolean {
  for (const _ in o) return false
  return true
}

/** The identity of an access rule in its workspace (DECISIONS §3): its ruleRef, or else its target. */
function identityOf (ruleRef: string | null, target: Target | null): string {
  return ruleRef !== null ? `r\u001f${ruleRef}` : `t\u001f${target!.type}\u001f${target!.value}`
}

/** A RuleTable whose rows are updated in place and appended to (typed arrays grow by doubling). */
class Columns implements RuleTable {
  length = 0
  type = new Uint8Array(0)
  allow = new Uint8Array(0)
  value: string[] = []
  expiresAt = new Float64Array(0)
  labels = new Uint32Array(0)
  labelSets: Array<Readonly<Record<string, LabelValue>>> = []
  confidence = new Uint8Array(0)
  severity = new Uint8Array(0)
  fingerprint = '0'
  /** Rows of removed rules (marked lapsed, reused by nothing). */
  holes = 0
  readonly rows = new Map<string, number>()
  readonly #labelIndex = new Map<string, number>()

  put (r: AccessRule): void {
    const id = identityOf(r.ruleRef, r.target)
    let i = this.rows.get(id)
    if (i === undefined) {
      i = this.length++
      if (i >= this.type.length) this.#grow(Math.max(1024, this.type.length * 2))
      this.rows.set(id, i)
    }
    this.type[i] = TYPE[r.target.type]
    this.allow[i] = r.action === 'allow' ? 1 : 0
    this.value[i] = r.target.value
    this.expiresAt[i] = r.expiresAt ?? Infinity
    // Rules mostly share a handful of label sets (often none): keep each once.
    const key = isEmpty(r.labels) ? '' : JSON.stringify(r.labels)
    let li = this.#labelIndex.get(key)
    if (li === undefined) {
      li = this.labelSets.length
      this.labelSets.push(r.labels)
      this.#labelIndex.set(key, li)
    }
    this.labels[i] = li
    this.confidence[i] = ownRank(CONFIDENCES, r.confidence, r.labels.confidence)
    this.severity[i] = ownRank(SEVERITIES, r.severity, r.labels.severity)
  }

  /** The rule of that identity went: its row lapses (selection skips it) and frees its text. */
  remove (ruleRef: string | null, target: Target | null): boolean {
    const id = identityOf(ruleRef, target)
    const i = this.rows.get(id)
    if (i === undefined) return false
    this.rows.delete(id)
    this.expiresAt[i] = -Infinity
    this.value[i] = ''
    this.holes++
    return true
  }

  #grow (capacity: number): void {
    const grow = <A extends Uint8Array | Uint32Array | Float64Array>(a: A, make: (n: number) => A): A => {
      const b = make(capacity)
      b.set(a)
      return b
    }
    this.type = grow(this.type, (n) => new Uint8Array(n))
    this.allow = grow(this.allow, (n) => new Uint8Array(n))
    this.expiresAt = grow(this.expiresAt, (n) => new Float64Array(n))
    this.labels = grow(this.labels, (n) => new Uint32Array(n))
    this.confidence = grow(this.confidence, (n) => new Uint8Array(n))
    this.severity = grow(this.severity, (n) => new Uint8Array(n))
  }
}

function * countingLive (t: Columns, now: number): Generator<void, number> {
  let live = 0
  for (let i = 0; i < t.length; i++) {
    if (i % (ROWS_PER_YIELD * 16) === 0) yield
    if (t.expiresAt[i]! > now) live++
  }
  return live
}

/**
 * @example
 *   const cache = new WorkspaceRuleCache(workspaceId)
 *   await cache.refresh(store.rules, Date.now())
 *   const selection = await cache.read((table) => runSliced(selecting(table, list, now)))
 */
export class WorkspaceRuleCache {
  #table: Columns | null = null
  /** The `since` of the next store read. */
  #seq = -1
  /** The store's count of deleting writes at the last read (AccessRuleChanges#removals). */
  #removals: number | undefined = undefined
  #generation = 0
  #turn: Promise<unknown> = Promise.resolve()

  constructor (readonly workspaceId: string) {}

  /** The rules as last read (null before the first read succeeded). */
  get table (): RuleTable | null {
    return this.#table
  }

  /** Reads what changed in the store since the last refresh (everything when `whole`); a deletion the store does not list makes it a whole reload. */
  refresh (rules: RuleStore, now: number, whole = false): Promise<RuleTable> {
    return this.#inTurn(async () => {
      let t = this.#table
      if (t !== null && !whole) {
        const table = t
        let removed = 0
        const r = await rules.accessRulesChangedSince(this.workspaceId, this.#seq, now, (rule) => { table.put(rule) }, (ruleRef, target) => {
          if (table.remove(ruleRef, target)) removed++
        }, this.#removals)
        if (r.live === null && table.holes * 2 <= table.length + HOLES_KEPT) {
          if (r.changed + removed > 0) table.fingerprint = String(++this.#generation)
          this.#seq = r.seq
          this.#removals = r.removals
          return table
        }
        const live = r.live === null ? -1 : await runSliced(countingLive(table, now))
        if (live === r.live) {
          if (r.changed > 0) table.fingerprint = String(++this.#generation)
          this.#seq = r.seq
          this.#removals = r.removals
          return table
        }
        // Held rules the store no longer has (a delete the store does not list), or a table of
        // holes. The old table serves until the reload is done (and if it fails).
      }
      t = new Columns()
      const fresh = t
      const r = await rules.accessRulesChangedSince(this.workspaceId, -1, now, (rule) => { fresh.put(rule) })
      fresh.fingerprint = String(++this.#generation)
      this.#table = fresh
      this.#seq = r.seq
      this.#removals = r.removals
      return fresh
    })
  }

  /** Runs `fn` on the table while no refresh changes it. */
  read<T> (fn: (table: RuleTable) => Promise<T>): Promise<T> {
    return this.#inTurn(async () => {
      if (this.#table === null) throw new Error('rule cache read before its first refresh')
      return fn(this.#table)
    })
  }

  #inTurn<T> (fn: () => Promise<T>): Promise<T> {
    const run = this.#turn.then(fn, fn)
    this.#turn = run.catch(() => {})
    return run
  }
}
