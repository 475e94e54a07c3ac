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
 *   - built by reading a workspace's arrival keys (their values hold the target), never inside
 *     a write transaction: in slices of read transactions with the event loop free between them
 *     (`catchUp`, by the consumer's thread after it opens the store, and by a write that found
 *     the map behind). A 2,000,000-rule workspace's map takes 4–7 s of CPU on the shared machine
 *     (bench/NOTES.md, "Consumer: the first apply after a start"): built under the write lock, as
 *     it was, every writer of every process on the directory waited that long, and more;
 *   - caught up once per write transaction with the arrival keys written since (by another
 *     thread or process: numbers rise in commit order, so "since" is a key range), at most
 *     CATCH_UP_MAX of them: a workspace further behind ends the transaction with NotCaughtUp
 *     before anything is committed, and the store catches up outside the lock and runs it again
 *     (rule-store.ts #write);
 *   - an entry whose record is gone (swept, or deleted by another process) is found so when it
 *     is used — the record is read before any use — and dropped; `prune` drops the others a
 *     few at a time, so a workspace whose rules lapse does not leave the map growing;
 *   - whether the workspace also has unkeyed rules stored under their target (written before
 *     format 5) is looked up once per transaction too: only then does a target missing here cost
 *     a read of its target key.
 *   - changed by writes only inside write transactions, each change logged: a transaction that
 *     fails is reverted (`revert`), so the map never holds what a rolled-back transaction wrote,
 *     and a retried apply does not rebuild it. Keys read by a catch-up stay: they are committed.
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

/**
 * Arrival keys a write transaction reads to catch a workspace up, at most: a few milliseconds
 * under the lock. More than a write of another process or thread usually adds between two of
 * this store's writes; a workspace further behind (never read since the start, or another
 * process imported a lot) is caught up outside the lock (NotCaughtUp).
 */
export const CATCH_UP_MAX = 5000

/** Thrown inside a write transaction: the workspace's map is behind by more than the bound. */
export class NotCaughtUp extends Error {
  readonly workspaceId: string

  constructor (workspaceId: string) {
    super(`the arrival identity of workspace ${workspaceId} is behind`)
    this.workspaceId = workspaceId
  }

  /** The NotCaughtUp that ended a write, as the store's error wraps it (lmdb-env.ts toStoreError), or undefined. */
  static of (e: unknown): NotCaughtUp | undefined {
    if (e instanceof NotCaughtUp) return e
    const cause = (e as { cause?: unknown } | null)?.cause
    return cause instanceof NotCaughtUp ? cause : undefined
  }
}

export class ArrivalIndex {
  readonly #workspaces = new Map<string, WorkspaceArrivals>()

  /** The transaction's view: catches each workspace up once, on its first use in it, by at most `bound` keys. */
  begin (dbs: Databases, bound = CATCH_UP_MAX): ArrivalTxn {
    return new ArrivalTxn(this, dbs, bound)
  }

  /**
   * A read transaction's look-up (explain): the arrival key of the workspace's unkeyed rule of
   * that target, if its record is in this snapshot. Catches the workspace up first, all the way
   * (the caller catches up in slices before: rule-store.ts). Catching up only adds committed
   * keys, so it is safe outside a write; it never drops an entry, since an older snapshot may
   * miss a record a later write already holds.
   */
  lookup (dbs: Databases, workspaceId: string, identity: string): string | undefined {
    this.catchUp(dbs, workspaceId, Infinity)
    const n = this.#workspaces.get(workspaceId)!.numbers.get(identity)
    if (n === undefined) return undefined
    const key = arrivalKey(workspaceId, n)
    return dbs.accessRules.doesExist(key) ? key : undefined
  }

  /**
   * Reads up to `limit` more of the workspace's arrival keys into its map, from where the map
   * is; true once none is left (as of this transaction). Outside a write (a slice of a
   * warm-up) it only adds committed keys, so it never misleads a later write (see lookup).
   */
  catchUp (dbs: Databases, workspaceId: string, limit: number): boolean {
    const ws = this.entry(workspaceId)
    let read = 0
    const range = limit === Infinity ? arrivalRange(workspaceId, ws.high) : { ...arrivalRange(workspaceId, ws.high), limit: limit + 1 }
    for (const { key, value } of dbs.accessRules.getRange(range)) {
      // One past the limit says whether any is left; it is read on the next call.
      if (read === limit) return false
      const n = arrivalNumberOfKey(key)
      ws.numbers.set(accessRuleTargetIdentity(value), n)
      if (n > ws.high) ws.high = n
      read++
    }
    return true
  }

  /** After a commit that failed with other transactions' writes in it: forget everything (rebuilt on the next use). */
  clear (): void {
    this.#workspaces.clear()
  }

  /** @internal The workspace's map, made empty on its first use. */
  entry (workspaceId: string): WorkspaceArrivals {
    let ws = this.#workspaces.get(workspaceId)
    if (ws === undefined) {
      ws = { numbers: new Map(), high: 0, targetKeyed: false, pruneBudget: MIN_PRUNE }
      this.#workspaces.set(workspaceId, ws)
    }
    return ws
  }
}

/** One write transaction's use of the index. */
export class ArrivalTxn {
  readonly #index: ArrivalIndex
  readonly #dbs: Databases
  readonly #bound: number
  readonly #caughtUp = new Map<string, WorkspaceArrivals>()
  /** What this transaction changed, in order: [workspace, identity, the number before (undefined: none)]. */
  readonly #undo: Array<[WorkspaceArrivals, string, number | undefined]> = []
  /** Each workspace's high before this transaction's first write raised it. */
  readonly #highs = new Map<WorkspaceArrivals, number>()
  /** The next arrival number, once this transaction has read the counter. */
  #next = 0

  constructor (index: ArrivalIndex, dbs: Databases, bound: number) {
    this.#index = index
    this.#dbs = dbs
    this.#bound = bound
  }

  /** The workspace, caught up on its first use in this transaction (NotCaughtUp past the bound). */
  #ws (workspaceId: string): WorkspaceArrivals {
    const known = this.#caughtUp.get(workspaceId)
    if (known !== undefined) return known
    // Its first use here comes before this transaction writes any of its arrival keys: what the
    // catch-up reads is committed, and stays if the transaction rolls back.
    if (!this.#index.catchUp(this.#dbs, workspaceId, this.#bound)) throw new NotCaughtUp(workspaceId)
    const ws = this.#index.entry(workspaceId)
    ws.targetKeyed = false
    for (const _ of this.#dbs.accessRules.getKeys({ ...targetKeyRange(workspaceId), limit: 1 })) ws.targetKeyed = true
    this.#caughtUp.set(workspaceId, ws)
    return ws
  }

  #set (ws: WorkspaceArrivals, identity: string, n: number): void {
    this.#undo.push([ws, identity, ws.numbers.get(identity)])
    ws.numbers.set(identity, n)
  }

  #delete (ws: WorkspaceArrivals, identity: string): void {
    const n = ws.numbers.get(identity)
    if (n === undefined) return
    this.#undo.push([ws, identity, n])
    ws.numbers.delete(identity)
  }

  /** The arrival key of the workspace's unkeyed rule of that target, if one is stored. */
  find (workspaceId: string, identity: string): string | undefined {
    const ws = this.#ws(workspaceId)
    const n = ws.numbers.get(identity)
    if (n === undefined) return undefined
    const key = arrivalKey(workspaceId, n)
    if (this.#dbs.accessRules.doesExist(key)) return key
    this.#delete(ws, identity)
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
    this.#set(ws, identity, n)
    if (n > ws.high) {
      if (!this.#highs.has(ws)) this.#highs.set(ws, ws.high)
      ws.high = n
    }
  }

  /** The rule of that target was removed. */
  removed (workspaceId: string, identity: string): void {
    this.#delete(this.#ws(workspaceId), identity)
  }

  /**
   * After the transaction rolled back (a throw inside it, or its own commit failing): undoes
   * every change it made, newest first. Only when nothing else changed the map since it began:
   * right after it, in the same synchronous run.
   */
  revert (): void {
    for (let i = this.#undo.length - 1; i >= 0; i--) {
      const [ws, identity, n] = this.#undo[i]!
      if (n === undefined) ws.numbers.delete(identity)
      else ws.numbers.set(identity, n)
    }
    this.#undo.length = 0
    for (const [ws, high] of this.#highs) ws.high = high
    this.#highs.clear()
  }

  /**
   * Looks at some entries of the workspace, oldest first, dropping those whose record is gone
   * and moving the others to the end, so that every entry is looked at in turn. How many: four
   * times as many as the last prune found gone, at least MIN_PRUNE — so while rules lapse at r
   * per pass, it settles where a quarter of what it looks at is gone (about 4r reads a pass, the
   * map at most a third larger than the live rules), and costs next to nothing when none lapse.
   * Only a workspace this transaction already caught up: a batch without unkeyed access rules of
   * a workspace never makes its map be built.
   */
  prune (workspaceId: string): void {
    const ws = this.#caughtUp.get(workspaceId)
    if (ws === undefined) return
    const { numbers } = ws
    let budget = Math.min(ws.pruneBudget, numbers.size)
    let gone = 0
    for (const [identity, n] of numbers) {
      if (budget-- <= 0) break
      numbers.delete(identity)
      if (this.#dbs.accessRules.doesExist(arrivalKey(workspaceId, n))) numbers.set(identity, n)
      else {
        // Logged as the delete it is (a move to the end needs no undo: the order only paces the prune).
        this.#undo.push([ws, identity, n])
        gone++
      }
    }
    ws.pruneBudget = MIN_PRUNE + 4 * gone
  }
}
