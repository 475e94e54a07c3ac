/**
 * Group commit of a process's stream appends (issue 33, item 5).
 *
 * Every append raises the one counter document (signal-stream.ts says why it must be inside the
 * transaction). On a replica set a transaction that writes a document another open transaction
 * has written fails at once with WriteConflict — no lock wait — and is retried whole: with each
 * append in its own transaction, concurrent appends of one process aborted each other while the
 * winner uploaded its body, and p99 rose to the deadline. Here a process has at most one append
 * transaction in flight; appends arriving meanwhile queue and commit together in the next one,
 * each with its own documents, append id, seqs and Idempotency-Key entry. Across processes the
 * counter still conflicts, but between whole groups (at most one per node at a time).
 *
 * A group is one transaction, so it commits or fails whole: a definite failure fails each of its
 * appends; an unknown outcome is resolved for all of them by one lookup of their append ids
 * (mongo-client.ts commit). Each append keeps its own deadline (commit-gate.ts): one whose gate
 * has shut is left out before its group's writes, and if one shuts during them the transaction is
 * aborted and the group runs again without it — a gate's begin() is the last step before the
 * commit, for every append of the group at once.
 *
 * The queue holds only appends whose requests are waiting for their answer (each bounded by the
 * HTTP layer's body and request limits); one whose deadline passed is dropped when its group
 * starts, at the latest when the transaction in flight ends.
 */
import type { ClientSession } from 'mongodb'
import { ThreatfeedError } from '../../errors.js'
import type { CommitGate } from '../commit-gate.js'
import { IDEMPOTENCY_WINDOW_MS, type AppendOnce, type AppendOnceResult } from '../types.js'
import { COUNTERS, type IdempotencyDoc, type StreamDoc } from './collections.js'
import type { MongoContext } from './mongo-context.js'
import { num, text } from './values.js'

/** One append waiting for, or in, a group: its documents shaped, its seqs not yet known. */
export interface PendingAppend {
  /** Its documents before their seqs (the first at the append's first seq), with `n` records each. */
  readonly runs: ReadonlyArray<Omit<StreamDoc, '_id'> & { n: number }>
  readonly n: number
  /** What its documents weigh, roughly (the group's bound). */
  readonly bytes: number
  readonly appendId: string
  readonly once: AppendOnce | null
  readonly gate: CommitGate | undefined
  readonly resolve: (r: AppendOnceResult) => void
  readonly reject: (e: unknown) => void
}

/**
 * A group's bounds: a transaction's writes are held in the primary's cache until its commit, and
 * it must commit within transactionLifetimeLimitSeconds (60 s); an append past them goes alone.
 */
export const GROUP_MAX_APPENDS = 256
export const GROUP_MAX_BYTES = 16 * 1024 * 1024

export class AppendGroups {
  readonly #ctx: MongoContext
  #queue: PendingAppend[] = []
  #inFlight = false

  constructor (ctx: MongoContext) {
    this.#ctx = ctx
  }

  /** Queues an append; it joins the transaction in flight's successor, or starts one. */
  submit (append: PendingAppend): void {
    this.#queue.push(append)
    if (!this.#inFlight) this.#next()
  }

  #next (): void {
    if (this.#queue.length === 0) return
    let bytes = 0
    let take = 0
    while (take < this.#queue.length && take < GROUP_MAX_APPENDS && (take === 0 || bytes + this.#queue[take]!.bytes <= GROUP_MAX_BYTES)) {
      bytes += this.#queue[take]!.bytes
      take++
    }
    const group = this.#queue.slice(0, take)
    this.#queue = this.#queue.slice(take)
    this.#inFlight = true
    // #commit settles every append itself; a throw would be our bug, and still fails them.
    void this.#commit(group).catch((e: unknown) => { for (const m of group) m.reject(e) }).finally(() => {
      this.#inFlight = false
      this.#next()
    })
  }

  /** Commits `group` in one transaction; settles each append's promise, never throws. */
  async #commit (group: PendingAppend[]): Promise<void> {
    let live = group
    for (;;) {
      live = live.filter(admit)
      if (live.length === 0) return
      let regroup = false
      /** What the last attempt wrote: what a lookup of an unknown commit returns when it finds it. */
      let attempt: Map<PendingAppend, AppendOnceResult> | null = null
      let appendIds: string[] = []
      try {
        const results = await this.#ctx.write(async (session) => {
          // A conflict's retry: appends whose gate shut meanwhile are left out of it.
          live = live.filter(admit)
          if (live.length === 0) throw gateShut()
          const written = await this.#write(session, live)
          attempt = written.results
          appendIds = written.appendIds
          // Last before runTransaction's commitTransaction, nothing awaited in between: every
          // gate of the group begins here at once, or the transaction is aborted.
          for (const m of live) {
            try {
              m.gate?.begin()
            } catch (e) {
              m.reject(e)
              regroup = true
            }
          }
          if (regroup) throw gateShut()
          return written.results
        }, () => live.every(isShut), async () => {
          // One transaction: any of its append ids found means all of it applied.
          if (appendIds.length === 0) return attempt
          const found = await this.#ctx.c.stream.find({ appendId: { $in: appendIds } }, { projection: { _id: 1 }, readConcern: { level: 'majority' }, readPreference: 'primary' }).limit(1).toArray()
          return found.length === 0 ? null : attempt
        })
        for (const m of live) m.resolve(results.get(m)!)
        return
      } catch (e) {
        if (regroup) {
          live = live.filter((m) => m.gate?.state !== 'abandoned')
          continue
        }
        for (const m of live) m.reject(e)
        return
      }
    }
  }

  /** The group's writes: its keys' entries read, the counter raised once, every document in one insert. */
  async #write (session: ClientSession, live: PendingAppend[]): Promise<{ results: Map<PendingAppend, AppendOnceResult>, appendIds: string[] }> {
    const c = this.#ctx.c
    const results = new Map<PendingAppend, AppendOnceResult>()
    const keyed = live.filter((m) => m.once !== null)
    const entries = new Map<string, IdempotencyDoc>()
    if (keyed.length > 0) {
      // Read in the transaction: two retries of one batch in two processes conflict on the
      // entry's write below, and the one retried finds the winner's entry here.
      const ids = [...new Map(keyed.map((m) => [entryKey(m.once!), entryId(m.once!)])).values()]
      for (const e of await c.idempotency.find({ _id: { $in: ids } }, { session }).toArray()) entries.set(JSON.stringify([e._id.w, e._id.k]), e)
    }
    const appending: PendingAppend[] = []
    /** The append of the group that writes a key's entry; another with that key is answered from it. */
    const byKey = new Map<string, PendingAppend>()
    const repeats: Array<[PendingAppend, PendingAppend]> = []
    for (const m of live) {
      if (m.once !== null) {
        const k = entryKey(m.once)
        const earlier = entries.get(k)
        if (earlier !== undefined && earlier.at > m.once.at - IDEMPOTENCY_WINDOW_MS) {
          results.set(m, { seqs: range(earlier.first, earlier.n), earlier: { digest: earlier.digest, note: JSON.parse(earlier.note) as Record<string, unknown>, at: earlier.at } })
          continue
        }
        const first = byKey.get(k)
        if (first !== undefined) {
          repeats.push([m, first])
          continue
        }
        byKey.set(k, m)
      }
      appending.push(m)
    }
    const total = appending.reduce((sum, m) => sum + m.n, 0)
    if (total > 0) {
      const counter = await c.meta.findOneAndUpdate({ _id: COUNTERS.streamHead }, { $inc: { value: total } }, { session, returnDocument: 'after' })
      if (counter === null) throw new Error('the stream counter is missing')
      let seq = counter.value - total + 1
      const docs: StreamDoc[] = []
      for (const m of appending) {
        const first = seq
        for (const run of m.runs) {
          docs.push({ ...run, _id: seq, appendId: m.appendId })
          seq += run.n
        }
        results.set(m, { seqs: range(first, m.n), earlier: null })
      }
      if (docs.length === 1) await c.stream.insertOne(docs[0]!, { session })
      else await c.stream.insertMany(docs, { session, ordered: true })
    }
    for (const [m, first] of repeats) {
      const once = first.once!
      results.set(m, { seqs: results.get(first)!.seqs, earlier: { digest: once.digest, note: once.note, at: once.at } })
    }
    const writes = [...byKey.values()].map((m) => {
      const once = m.once!
      // The server's TTL monitor removes it after the window (collections.ts); reads also check `at`.
      const replacement = { digest: text(once.digest), note: JSON.stringify(once.note), at: num(once.at), first: results.get(m)!.seqs[0]!, n: m.n, expireAt: new Date(once.at + IDEMPOTENCY_WINDOW_MS) }
      return { replaceOne: { filter: { _id: entryId(once) }, replacement, upsert: true } }
    })
    if (writes.length > 0) await c.idempotency.bulkWrite(writes, { session, ordered: true })
    return { results, appendIds: appending.map((m) => m.appendId) }
  }
}

/** Whether an append may still join a transaction; one whose gate has shut is rejected by it here. */
function admit (m: PendingAppend): boolean {
  if (!isShut(m)) return true
  try {
    m.gate!.begin() // throws: marks it abandoned, with the gate's own error
  } catch (e) {
    m.reject(e)
  }
  return false
}

function isShut (m: PendingAppend): boolean {
  return m.gate !== undefined && (m.gate.state === 'abandoned' || Date.now() >= m.gate.cutoff)
}

/** Ends an attempt some of whose appends' gates shut (they are rejected by then); not a conflict. */
function gateShut (): ThreatfeedError {
  return new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: new Error('the stream commit could not start before its deadline; nothing was written') })
}

/** An entry's `_id`, always built in this field order (collections.ts IdempotencyDoc). */
function entryId (once: AppendOnce): { w: string, k: string } {
  return { w: text(once.workspaceId), k: text(once.key) }
}

function entryKey (once: AppendOnce): string {
  return JSON.stringify([once.workspaceId, once.key])
}

export function range (first: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => first + i)
}
