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
 *   - held as a table of numbers, not a Map of strings: open addressing (linear probing) over
 *     two Float64Arrays, a 53-bit hash of the target (rule-codec.ts accessRuleTargetHash) and
 *     the arrival number, 16 bytes a slot, no object or string per rule. A hash is never taken
 *     for the target: each hit is checked against the record it names (read before any use
 *     anyway), so two targets of one hash only cost a read;
 *   - built by reading a workspace's arrival keys through Databases#arrivalScan (each entry
 *     comes out as its number and its target's hash, nothing copied), never inside a write
 *     transaction: in slices of read transactions with the event loop free between them
 *     (`catchUp`, by the consumer's thread after it opens the store, and by a write that found
 *     the map behind). Built under the write lock, as it once was, every writer of every process
 *     on the directory waited for it (bench/NOTES.md, "Consumer: the first apply after a start");
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
import { arrivalKey, arrivalRange, targetKeyRange } from './key-layout.js'
import { META, type Databases } from './layout.js'
import { accessRuleTargetIdentity, targetIdentityHash } from './rule-codec.js'

/**
 * hash → arrival number, several numbers per hash allowed: open addressing with linear probing,
 * deletion by shifting the run back (no tombstones). A number is never 0 (the counter starts at
 * 1): 0 marks an empty slot. Exported for its test only.
 */
export class ArrivalTable {
  hashes: Float64Array
  numbers: Float64Array
  mask: number
  size = 0

  constructor (capacity = 1024) {
    this.hashes = new Float64Array(capacity)
    this.numbers = new Float64Array(capacity)
    this.mask = capacity - 1
  }

  /** The slot a hash's probe starts at. */
  home (hash: number): number {
    return (hash >>> 0) & this.mask
  }

  insert (hash: number, n: number): void {
    if ((this.size + 1) * 4 > this.numbers.length * 3) this.#grow()
    let i = this.home(hash)
    while (this.numbers[i] !== 0) i = (i + 1) & this.mask
    this.hashes[i] = hash
    this.numbers[i] = n
    this.size++
  }

  /** Empties slot i, moving back what followed it in its run so that every probe still finds it. */
  removeAt (i: number): void {
    const { hashes, numbers, mask } = this
    numbers[i] = 0
    this.size--
    for (let j = (i + 1) & mask; numbers[j] !== 0; j = (j + 1) & mask) {
      const k = this.home(hashes[j]!)
      // The entry at j may move to i unless its home lies cyclically in (i, j].
      if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue
      hashes[i] = hashes[j]!
      numbers[i] = numbers[j]!
      numbers[j] = 0
      i = j
    }
  }

  /** Removes the entry (hash, n), if held. */
  remove (hash: number, n: number): void {
    for (let i = this.home(hash); this.numbers[i] !== 0; i = (i + 1) & this.mask) {
      if (this.numbers[i] === n && this.hashes[i] === hash) {
        this.removeAt(i)
        return
      }
    }
  }

  #grow (): void {
    const { hashes, numbers } = this
    this.hashes = new Float64Array(numbers.length * 2)
    this.numbers = new Float64Array(numbers.length * 2)
    this.mask = numbers.length * 2 - 1
    this.size = 0
    for (let i = 0; i < numbers.length; i++) {
      if (numbers[i] !== 0) this.insert(hashes[i]!, numbers[i]!)
    }
  }
}

interface WorkspaceArrivals {
  readonly table: ArrivalTable
  /** The highest arrival number read or written. */
  high: number
  /** The workspace has unkeyed rules under their target key (as of this transaction). */
  targetKeyed: boolean
  /** Entries the next prune looks at: it follows how many it found gone (see prune). */
  pruneBudget: number
  /** The slot the next prune starts at. */
  pruneAt: number
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
    const { table } = this.#workspaces.get(workspaceId)!
    const hash = targetIdentityHash(identity)
    for (let i = table.home(hash); table.numbers[i] !== 0; i = (i + 1) & table.mask) {
      if (table.hashes[i] !== hash) continue
      const key = arrivalKey(workspaceId, table.numbers[i]!)
      if (holds(dbs, key, identity) === true) return key
    }
    return undefined
  }

  /**
   * Reads up to `limit` more of the workspace's arrival keys into its table, from where it is;
   * true once none is left (as of this transaction). Outside a write (a slice of a warm-up) it
   * only adds committed keys, so it never misleads a later write (see lookup).
   */
  catchUp (dbs: Databases, workspaceId: string, limit: number): boolean {
    const ws = this.entry(workspaceId)
    const { table } = ws
    let read = 0
    const range = limit === Infinity ? arrivalRange(workspaceId, ws.high) : { ...arrivalRange(workspaceId, ws.high), limit: limit + 1 }
    for (const { key, value: hash } of dbs.arrivalScan.getRange(range)) {
      // One past the limit says whether any is left; it is read on the next call.
      if (read === limit) return false
      const n = key as unknown as number
      replaceOrInsert(dbs, workspaceId, table, hash, n)
      if (n > ws.high) ws.high = n
      read++
    }
    return true
  }

  /** After a commit that failed with other transactions' writes in it: forget everything (rebuilt on the next use). */
  clear (): void {
    this.#workspaces.clear()
  }

  /** @internal The workspace's table, made empty on its first use. */
  entry (workspaceId: string): WorkspaceArrivals {
    let ws = this.#workspaces.get(workspaceId)
    if (ws === undefined) {
      ws = { table: new ArrivalTable(), high: 0, targetKeyed: false, pruneBudget: MIN_PRUNE, pruneAt: 0 }
      this.#workspaces.set(workspaceId, ws)
    }
    return ws
  }
}

/**
 * Whether the record under an arrival key is of that target: undefined when there is none.
 * getBinaryFast: the record is looked at in lmdb-js's buffer, not copied.
 */
function holds (dbs: Databases, key: string, identity: string): boolean | undefined {
  const buf = dbs.accessRules.getBinaryFast(key)
  return buf === undefined ? undefined : accessRuleTargetIdentity(buf) === identity
}

/**
 * A catch-up's entry: takes the slot of an entry of the same hash whose record is gone (the
 * target stored again under a later number, the old one removed by another process), else a
 * new one. Another entry of the hash is read only then: rare, a hash is 53 bits.
 */
function replaceOrInsert (dbs: Databases, workspaceId: string, table: ArrivalTable, hash: number, n: number): void {
  for (let i = table.home(hash); table.numbers[i] !== 0; i = (i + 1) & table.mask) {
    if (table.hashes[i] === hash && !dbs.accessRules.doesExist(arrivalKey(workspaceId, table.numbers[i]!))) {
      table.numbers[i] = n
      return
    }
  }
  table.insert(hash, n)
}

/** One change to a table, logged to be undone: the entry (hash, n) was added (true) or removed. */
type Change = [table: ArrivalTable, hash: number, n: number, added: boolean]

/** One write transaction's use of the index. */
export class ArrivalTxn {
  readonly #index: ArrivalIndex
  readonly #dbs: Databases
  readonly #bound: number
  readonly #caughtUp = new Map<string, WorkspaceArrivals>()
  /** What this transaction changed, in order. */
  readonly #undo: Change[] = []
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

  /** Empties slot i of the table, logged. */
  #removeAt (table: ArrivalTable, i: number): void {
    this.#undo.push([table, table.hashes[i]!, table.numbers[i]!, false])
    table.removeAt(i)
  }

  /**
   * The arrival key of the workspace's unkeyed rule of that target, if one is stored. Entries of
   * its hash whose record is gone are dropped on the way.
   */
  find (workspaceId: string, identity: string): string | undefined {
    const { table } = this.#ws(workspaceId)
    const hash = targetIdentityHash(identity)
    for (let i = table.home(hash); table.numbers[i] !== 0;) {
      if (table.hashes[i] === hash) {
        const key = arrivalKey(workspaceId, table.numbers[i]!)
        const held = holds(this.#dbs, key, identity)
        if (held === true) return key
        if (held === undefined) {
          // What followed moves back into slot i: look at it again.
          this.#removeAt(table, i)
          continue
        }
      }
      i = (i + 1) & table.mask
    }
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

  /** A rule was stored under arrivalKey(workspaceId, n); find found none of its target just before. */
  added (workspaceId: string, identity: string, n: number): void {
    const ws = this.#ws(workspaceId)
    const hash = targetIdentityHash(identity)
    ws.table.insert(hash, n)
    this.#undo.push([ws.table, hash, n, true])
    if (n > ws.high) {
      if (!this.#highs.has(ws)) this.#highs.set(ws, ws.high)
      ws.high = n
    }
  }

  /** The rule of that target was removed: drops the entries of its hash whose record is gone. */
  removed (workspaceId: string, identity: string): void {
    const { table } = this.#ws(workspaceId)
    const hash = targetIdentityHash(identity)
    for (let i = table.home(hash); table.numbers[i] !== 0;) {
      if (table.hashes[i] === hash && !this.#dbs.accessRules.doesExist(arrivalKey(workspaceId, table.numbers[i]!))) {
        this.#removeAt(table, i)
        continue
      }
      i = (i + 1) & table.mask
    }
  }

  /**
   * After the transaction rolled back (a throw inside it, or its own commit failing): undoes
   * every change it made, newest first. Only when nothing else changed the table since it began:
   * right after it, in the same synchronous run.
   */
  revert (): void {
    for (let i = this.#undo.length - 1; i >= 0; i--) {
      const [table, hash, n, added] = this.#undo[i]!
      if (added) table.remove(hash, n)
      else table.insert(hash, n)
    }
    this.#undo.length = 0
    for (const [ws, high] of this.#highs) ws.high = high
    this.#highs.clear()
  }

  /**
   * Looks at some entries of the workspace, slot after slot from where the last prune stopped,
   * dropping those whose record is gone, so that every entry is looked at in turn. How many: four
   * times as many as the last prune found gone, at least MIN_PRUNE — so while rules lapse at r
   * per pass, it settles where a quarter of what it looks at is gone (about 4r reads a pass, the
   * table at most a third larger than the live rules), and costs next to nothing when none lapse.
   * Only a workspace this transaction already caught up: a batch without unkeyed access rules of
   * a workspace never makes its table be built.
   */
  prune (workspaceId: string): void {
    const ws = this.#caughtUp.get(workspaceId)
    if (ws === undefined) return
    const { table } = ws
    let budget = Math.min(ws.pruneBudget, table.size)
    let gone = 0
    let i = ws.pruneAt & table.mask
    // Each slot once at most: the budget counts entries, the slots between them are empty.
    for (let slots = table.numbers.length; budget > 0 && slots > 0; slots--) {
      if (table.numbers[i] !== 0) {
        budget--
        if (!this.#dbs.accessRules.doesExist(arrivalKey(workspaceId, table.numbers[i]!))) {
          // What followed moves back into slot i: look at it again.
          this.#removeAt(table, i)
          gone++
          continue
        }
      }
      i = (i + 1) & table.mask
    }
    ws.pruneAt = i
    ws.pruneBudget = MIN_PRUNE + 4 * gone
  }
}
