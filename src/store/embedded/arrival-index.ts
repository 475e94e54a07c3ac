/**
 * The identity of unkeyed access rules stored in arrival order (key-layout.ts arrivalKey): for
 * each workspace, target → the arrival number of its key, held in memory by each RuleStore (each
 * thread, each process) that writes such rules. The numbers come from one counter in the store's
 * meta, taken inside write transactions, so they rise in commit order across every process.
 *
 * Why in memory: an index in the B-tree, keyed by target, is exactly the random insert the
 * arrival order avoids — one dirtied page per new target (bench/NOTES.md, "Consumer: arrival
 * order"). The records themselves are the durable truth; this is rebuilt from them:
 *
 *   - built for a workspace on its first use, by reading its arrival keys (their values hold the
 *     target), or ahead of it (`warm`, in slices, by the consumer's thread after it opens the
 *     store: a 2,000,000-rule workspace's map took 1–2 s, which the first write after a start
 *     would otherwise wait for);
 *   - caught up once per write transaction with the arrival keys written since (by another
 *     thread or process: numbers rise in commit order, so "since" is a key range);
 *   - an entry whose record is gone (swept, or deleted by another process) is found so when it
 *     is used — the record is read before any use — and dropped; `prune` drops the others a
 *     few at a time, so a workspace whose rules lapse does not leave the map growing;
 *   - whether the workspace also has unkeyed rules stored under their target (written before
 *     format 5) is looked up once per transaction too: only then does a target missing here cost
 *     a read of its target key.
 *   - changed only inside write transactions; a transaction that fails clears it all (the next
 *     use rebuilds), so it never holds what a rolled-back transaction wrote.
 */
import { arrivalKey, arrivalNumberOfKey, arrivalRange, targetKeyRange } from './key-layout.js'
import { META, type Databases } from './layout.js'
import { accessRuleTargetIdentity } from './rule-codec.js'

interface WorkspaceArrivals {
  /** targetIdentity → arrival number of its key. */
  readonly numbers: Map<string, number>
  /** The highest arrival number read or written. */
  high: number
  /** The workspace has unkeyed rules under their target key (as of this transaction). */
  targetKeyed: boolean
  /** Entries the next prune looks at: it follows how many it found gone (see prune). */
  pruneBudget: number
}

/** The least a prune looks at: small beside a pass, and enough to notice that rules lapse. */
const MIN_PRUNE = 64

export class ArrivalIndex {
  readonly #workspaces = new Map<string, WorkspaceArrivals>()

  /** The transaction's view: catches each workspace up once, on its first use in it. */
  begin (dbs: Databases): ArrivalTxn {
    return new ArrivalTxn(this, dbs)
  }

  /**
   * A read transaction's look-up (explain): the arrival key of the workspace's unkeyed rule of
   * that target, if its record is in this snapshot. Catching up only adds committed keys, so it is
   * safe outside a write; it never drops an entry, since an older snapshot may miss a record a
   * later write already holds.
   */
  lookup (dbs: Databases, workspaceId: string, identity: string): string | undefined {
    const n = this.workspace(dbs, workspaceId, false).numbers.get(identity)
    if (n === undefined) return undefined
    const key = arrivalKey(workspaceId, n)
    return dbs.accessRules.doesExist(key) ? key : undefined
  }

  /**
   * Outside a write: reads up to `limit` more of the workspace's arrival keys into its map (from
   * where the map is, as a write's catch-up would); true while more are left. Catching up only
   * adds committed keys, so a warm-up between writes never misleads one (see lookup).
   */
  warm (dbs: Databases, workspaceId: string, limit: number): boolean {
    let ws = this.#workspaces.get(workspaceId)
    if (ws === undefined) {
      ws = { numbers: new Map(), high: 0, targetKeyed: false, pruneBudget: MIN_PRUNE }
      this.#workspaces.set(workspaceId, ws)
    }
    let read = 0
    for (const { key, value } of dbs.accessRules.getRange({ ...arrivalRange(workspaceId, ws.high), limit })) {
      const n = arrivalNumberOfKey(key)
      ws.numbers.set(accessRuleTargetIdentity(value), n)
      if (n > ws.high) ws.high = n
      read++
    }
    return read === limit
  }

  /** After a failed transaction: forget everything (rebuilt on the next use). */
  clear (): void {
    this.#workspaces.clear()
  }

  /** @internal ArrivalTxn's access. */
  workspace (dbs: Databases, workspaceId: string, caughtUp: boolean): WorkspaceArrivals {
    let ws = this.#workspaces.get(workspaceId)
    if (ws === undefined) {
      ws = { numbers: new Map(), high: 0, targetKeyed: false, pruneBudget: MIN_PRUNE }
      this.#workspaces.set(workspaceId, ws)
    } else if (caughtUp) return ws
    for (const { key, value } of dbs.accessRules.getRange(arrivalRange(workspaceId, ws.high))) {
      const n = arrivalNumberOfKey(key)
      ws.numbers.set(accessRuleTargetIdentity(value), n)
      if (n > ws.high) ws.high = n
    }
    ws.targetKeyed = false
    for (const _ of dbs.accessRules.getKeys({ ...targetKeyRange(workspaceId), limit: 1 })) ws.targetKeyed = true
    return ws
  }
}

/** One write transaction's use of the index. */
export class ArrivalTxn {
  readonly #index: ArrivalIndex
  readonly #dbs: Databases
  readonly #caughtUp = new Set<string>()
  /** The next arrival number, once this transaction has read the counter. */
  #next = 0

  constructor (index: ArrivalIndex, dbs: Databases) {
    this.#index = index
    this.#dbs = dbs
  }

  #ws (workspaceId: string): WorkspaceArrivals {
    const ws = this.#index.workspace(this.#dbs, workspaceId, this.#caughtUp.has(workspaceId))
    this.#caughtUp.add(workspaceId)
    return ws
  }

  /** The arrival key of the workspace's unkeyed rule of that target, if one is stored. */
  find (workspaceId: string, identity: string): string | undefined {
    const ws = this.#ws(workspaceId)
    const n = ws.numbers.get(identity)
    if (n === undefined) return undefined
    const key = arrivalKey(workspaceId, n)
    if (this.#dbs.accessRules.doesExist(key)) return key
    ws.numbers.delete(identity)
    return undefined
  }

  /** Whether the workspace has unkeyed rules under their target key (then look there too). */
  targetKeyed (workspaceId: string): boolean {
    return this.#ws(workspaceId).targetKeyed
  }

  /** A new arrival number: each is taken once, across every process. */
  next (): number {
    if (this.#next === 0) this.#next = this.#dbs.meta.get(META.arrivalNext) ?? 1
    return this.#next++
  }

  /** Inside the transaction, before its commit: stores the counter if numbers were taken. */
  finish (): void {
    if (this.#next !== 0) this.#dbs.meta.put(META.arrivalNext, this.#next)
  }

  /** A rule was stored under arrivalKey(workspaceId, n). */
  added (workspaceId: string, identity: string, n: number): void {
    const ws = this.#ws(workspaceId)
    ws.numbers.set(identity, n)
    if (n > ws.high) ws.high = n
  }

  /** The rule of that target was removed. */
  removed (workspaceId: string, identity: string): void {
    this.#ws(workspaceId).numbers.delete(identity)
  }

  /**
   * Looks at some entries of the workspace, oldest first, dropping those whose record is gone
   * and moving the others to the end, so that every entry is looked at in turn. How many: four
   * times as many as the last prune found gone, at least MIN_PRUNE — so while rules lapse at r
   * per pass, it settles where a quarter of what it looks at is gone (about 4r reads a pass, the
   * map at most a third larger than the live rules), and costs next to nothing when none lapse.
   */
  prune (workspaceId: string): void {
    const ws = this.#ws(workspaceId)
    const { numbers } = ws
    let budget = Math.min(ws.pruneBudget, numbers.size)
    let gone = 0
    for (const [identity, n] of numbers) {
      if (budget-- <= 0) break
      numbers.delete(identity)
      if (this.#dbs.accessRules.doesExist(arrivalKey(workspaceId, n))) numbers.set(identity, n)
      else gone++
    }
    ws.pruneBudget = MIN_PRUNE + 4 * gone
  }
}
