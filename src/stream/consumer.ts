/**
 * The stream consumer: applies accepted signals to the rule stores in acceptance order.
 *
 *   stream:     … 41 42 43 44 45 46 …
 *                        ^checkpoint (in the store, moved in the same transaction as the rules)
 *   each pass:  read up to `batchSize` records after the checkpoint → decode each → one
 *               applyRuleBatch({ ops, checkpoint: { seq: last, expected: checkpoint } })
 *               → repeat until the head
 *
 * Exactly once: the rules and the checkpoint commit together, so after a crash the consumer
 * resumes at the first record whose effects are not in the store. Several consumers of one name
 * (two servers on one data directory, several nodes on one MongoDB) each try every slice: the
 * checkpoint is a compare-and-set on the position the slice continues from, so one of them
 * applies it and the others learn the new position, drop what they had and read on from there —
 * nothing is applied twice or rolled back. With the store's leases (the default) only one of them
 * applies at a time and the others follow its checkpoint (applier-lease.ts). Read-your-writes (DECISIONS §3, within 1 s): the ingest
 * path nudges the consumer right after each append; a poll timer picks up records appended by
 * other processes (a CLI, another server on the same store).
 *
 * Records this process appended are handed over already decoded (`offer`): the consumer then
 * applies them from memory instead of reading back and re-normalizing what it has just written
 * (bench/NOTES.md, "Consumer: records handed over"). The handed-over
 * commands are exactly what decoding the records would give (the canonical v2 payload is a fixed
 * point of normalization; a v1 record is the entry's own text), so the result is the same; records
 * appended by other processes, or once the memory is dropped, are read from the store.
 *
 * A record that cannot be decoded (an unknown schema_version written by a newer version, a
 * corrupt payload) is logged and passed over: one poisoned record must not stop every later one.
 */
import type { AppendedBatch } from '../ingest/batch.js'
import type { Logger } from '../log.js'
import type { BatchingStore, RuleBatchResult, RuleOp } from '../store/batch-types.js'
import { sweepCut, type SweepPass } from '../store/types.js'
import { ApplierLease } from './applier-lease.js'
import { decodeRecord, toRuleOp } from './apply.js'
import { HealthTracker, type ConsumerHealth } from './consumer-health.js'
import { PositionWaiters } from './position-waiters.js'

export interface ConsumerOptions {
  /** Checkpoint name; one per consumer of the stream. */
  readonly name?: string
  /** How often to look for records appended by other processes. */
  readonly pollMs: number
  /**
   * Most records applied in one transaction: larger passes share flushes but hold up the event
   * loop longer (bench/NOTES.md, "Consumer: batch size").
   */
  readonly batchSize?: number
  readonly log?: Pick<Logger, 'warn' | 'error'>
  /** Hears the new position after every pass (the consumer thread reports it to the server). */
  readonly onApplied?: (position: number) => void
  /**
   * When fewer than `batchSize` records are known to wait, wait up to this long for more before
   * a pass (default 0: never). For the consumer thread, which holds up nobody: a commit costs much
   * the same however many records it carries (the B-tree pages it rewrites are spread over the
   * tree), and without waiting the thread committed every 1000-entry batch on its own — 217
   * commits for 200 batches where the consumer in the server's thread, always a little late,
   * made 97 (bench/ingest.ts).
   */
  readonly gatherMs?: number
  /** Hears every failed pass: what failed, when, and the pass's first record when it was read
   *  from the stream (the consumer thread reports it to the server). */
  readonly onError?: (message: string, at: number, first: FailedRecord | null) => void
  /** false: apply every slice whoever else does (the checkpoint compare-and-set alone); by
   *  default one consumer of the name applies at a time when the store has leases (applier-lease.ts). */
  readonly lease?: false
  /** Hears every sweep pass the consumer made (setSweep): the server adds them to its counters. */
  readonly onSwept?: (pass: SweepPass) => void
}

/** The first record of a pass that failed. */
export interface FailedRecord {
  readonly seq: number
  readonly acceptedAt: number
}

/** An error as one line: ours name the store's own error in their cause (disk full, map full). */
export function describeError (e: unknown): string {
  const message = e instanceof Error ? e.message : String(e)
  const cause = (e as { cause?: unknown } | null)?.cause
  return cause instanceof Error ? `${message}: ${cause.message}` : message
}

/**
 * What the server asks of a consumer, wherever its work runs: StreamConsumer applies records in
 * the calling thread; ThreadedConsumer (consumer-thread.ts) on a thread of its own.
 */
export interface Consumer {
  /** Seq of the last record applied. */
  readonly position: number
  /** Records known to be on the stream and not applied yet (the ingest path sheds load on it). */
  readonly backlog: number
  start (): Promise<void>
  /** Takes a batch this process has just appended, and applies it soon. */
  offer (batch: AppendedBatch): void
  /** Resolves true once every record up to `seq` is applied, false after `timeoutMs`. */
  waitFor (seq: number, timeoutMs: number): Promise<boolean>
  /** Backlog, age of the oldest unapplied record, apply failures (consumer-health.ts). */
  health (): ConsumerHealth
  /**
   * Sweeps lapsed rules itself from now on, at least `limit` expiry references a pass (null:
   * stops): in the transactions it applies records in, and in passes of its own while none come
   * (see StreamConsumer#setSweep). Absent: the store's sweep is run by the Housekeeper.
   */
  setSweep? (limit: number | null): void
  stop (): Promise<void>
}

export const DEFAULT_CONSUMER = 'rules'

/**
 * A batch this process appended, as the consumer keeps it until its pass: the seqs it holds
 * (first, first + 1, …, count of them) and how to make the store operations that apply it, which
 * is done only then — an object per record that lived until its pass was a tenth of the ingest
 * path's garbage-collection time (measured).
 */
export interface OfferedBatch<Own = never> {
  readonly first: number
  readonly count: number
  /** Appends the batch's operations, in seq order, to `out`. */
  pushOps (out: Array<RuleOp | Own>): void
}

function commandsBatch<Own> (batch: AppendedBatch, first: number): OfferedBatch<Own> {
  const { workspaceId, acceptedAt, commands } = batch
  return {
    first,
    count: commands.length,
    pushOps: (out) => {
      for (let i = 0; i < commands.length; i++) out.push(toRuleOp(commands[i]!, workspaceId, first + i, acceptedAt))
    },
  }
}

const DEFAULT_BATCH_SIZE = 4000

/**
 * A pass that applies n records while none wait behind it sweeps this many times n expiry
 * references (and at least the pass limit for each second since the last sweep, below): every
 * lapse was once a record applied, so the sweep outruns the lapses by what is applied and drains
 * a backlog of them (after a pause, a restart) at that surplus. A pass with records waiting
 * behind it sweeps n at most: it keeps pace with the lapses, and applying comes first. The
 * removals are what a sweep costs — each a page at a random place of the rule table for the
 * commit to write — so while records come they are paced by what is applied, not run flat out;
 * passes of its own drain a backlog only once the stream has gone quiet (IDLE_MS). Before, every
 * pass swept the pass limit at least and a pass of its own followed each apply: a backlog of
 * 290,000 lapses after a two-minute pause went at 7,500–8,000 a second under 3,000 entries a
 * second. At 1.5 the surplus (1,600 a second there) did not clear a two-minute pause in the two
 * minutes after it (bench/NOTES.md, "Soak: the sweep's catch-up, paced").
 *
 * A pass with records behind it removes lapses only: the budget they leave is not spent
 * scrubbing later buckets' stale references (RuleBatch#sweep `scrub`). Under a sustained load
 * there are no lapses, so the scrub had the whole budget — a read of one rule per record applied,
 * never stale, since the log grows at the rate it was read — and it was a sixth of the pass
 * (bench/NOTES.md, "Ingest: 16 in flight, the consumer's pass"). A stale reference waits for a
 * pass with nothing behind it, a sweep pass of its own, or the purge when its bucket ends.
 */
const SWEEP_PER_RECORD = 2

/** The consumer is idle once no pass has applied a record for this long: only then does it sweep
 *  in passes of its own. A trickle of records keeps the sweep going at the pass limit a second
 *  (#sweepDue), so a backlog drains under any load. */
const IDLE_MS = 1000

/** A sweep pass of its own (no records to apply) is followed by a pause as long as it took, at
 *  most this long: half the write lock and the disk at most, as the Housekeeper paced them. */
const MAX_SWEEP_PAUSE_MS = 250

/** After an apply that carried a sweep failed, passes go without one for this long: a sweep's
 *  fault (a record it cannot read) must never hold up applying. */
const SWEEP_BACKOFF_MS = 60_000

/** Most decoded records kept for the consumer; past that (a consumer far behind) it reads the store. */
const MAX_OFFERED = 100_000

/**
 * `Own` is the store's own op type when the consumer runs on the store's consumer thread
 * (consumer-thread-body.ts: offered batches arrive packed in the store's stored form); the
 * consumer only carries such ops from offerPrepared to the store.
 */
export class StreamConsumer<Own = never> implements Consumer {
  readonly #store: BatchingStore<RuleOp | Own>
  readonly #name: string
  readonly #pollMs: number
  readonly #batchSize: number
  readonly #log: Pick<Logger, 'warn' | 'error'> | null
  #position = 0
  /** Highest seq known to exist (offered, or read from the store). */
  #head = 0
  #running: Promise<void> | null = null
  #again = false
  #stopped = false
  #timer: NodeJS.Timeout | null = null
  readonly #waiters = new PositionWaiters()
  readonly #onApplied: ((position: number) => void) | null
  readonly #gatherMs: number
  readonly #onError: ((message: string, at: number, first: FailedRecord | null) => void) | null
  readonly #health = new HealthTracker()
  /** The first record of the pass under way, when it was read from the stream. */
  #passFirst: FailedRecord | null = null
  /** The next pass that finds nothing offered reads the stream even past the known head (see poll). */
  #storeDue = false
  /** A batch was offered since the poll timer's last tick. */
  #offeredSinceTick = false
  /** Ends the current wait for more records (set while #gather waits). */
  #gathered: (() => void) | null = null
  /** First seq → batch, for batches this process appended and the consumer has not applied yet. */
  #offered = new Map<number, OfferedBatch<Own>>()
  /** Records in #offered. */
  #offeredRecords = 0
  readonly #lease: ApplierLease | null
  readonly #onSwept: ((pass: SweepPass) => void) | null
  /** setSweep's limit; null: the consumer does not sweep. */
  #sweepLimit: number | null = null
  /** The last sweep pass left work, or none ran yet. */
  #sweepMore = true
  /** When the last sweep pass ran (Date.now()). */
  #sweptAt = 0
  /** No sweep before this (Date.now()): one failed. */
  #sweepBackoffUntil = 0
  /** When a pass last applied records (performance.now()). */
  #appliedAt = -Infinity
  /** No sweep pass of its own before this (performance.now()): the pause after the last. */
  #sweepPausedUntil = 0
  #sweepTimer: NodeJS.Timeout | null = null
  /** The last pass found another process holding the applier lease. */
  #following = false

  constructor (store: BatchingStore<RuleOp | Own>, options: ConsumerOptions) {
    this.#store = store
    this.#name = options.name ?? DEFAULT_CONSUMER
    this.#pollMs = options.pollMs
    this.#batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE
    this.#log = options.log ?? null
    this.#onApplied = options.onApplied ?? null
    this.#gatherMs = options.gatherMs ?? 0
    this.#onError = options.onError ?? null
    this.#lease = options.lease === false || store.leases === undefined ? null : new ApplierLease(store.leases, this.#name)
    this.#onSwept = options.onSwept ?? null
  }

  /**
   * From now on the consumer sweeps lapsed rules (RuleStore#sweepLapsed), `limit` expiry
   * references a pass at least (null: stops). A pass that applies records asks the store to
   * sweep in the same transaction (RuleBatch#sweep): on the embedded store the sweep then shares
   * the apply's write lock and flush instead of waiting for the lock and flushing on its own,
   * and runs on the consumer's thread, not the server's (bench/NOTES.md, "Sweep: in the
   * consumer's transactions"). While no records come it sweeps in passes of its own. It sweeps
   * while the last pass left work, and otherwise as soon as a new sweep grain has begun since the
   * last (SWEEP_GRAIN_MS: lapsed rules become sweepable a grain at a time, so within one grain a
   * pass that left nothing has nothing more to find; timed from the last pass instead, a rule
   * could wait two grains).
   */
  setSweep (limit: number | null): void {
    this.#sweepLimit = limit === null ? null : Math.max(1, limit)
    this.#sweepMore = true
    if (limit !== null) this.nudge()
  }

  /**
   * The sweep a pass of `records` records carries, if one is due; `behind`: more records wait. A
   * pass with none behind sweeps SWEEP_PER_RECORD times its records, and at least the pass limit
   * for each second since the last sweep (up to one): a pass of a few records after a quiet
   * second still sweeps a whole pass, and records every 300 ms do not each add one.
   */
  #sweepDue (records: number, behind: boolean): { now: number, limit: number, scrub: boolean } | undefined {
    if (this.#sweepLimit === null) return undefined
    const now = Date.now()
    if (now < this.#sweepBackoffUntil || (!this.#sweepMore && sweepCut(now) === sweepCut(this.#sweptAt))) return undefined
    if (records === 0) return { now, limit: this.#sweepLimit, scrub: true } // a pass of its own
    if (behind) return { now, limit: records, scrub: false }
    const sinceSweep = Math.min(1, Math.max(0, now - this.#sweptAt) / 1000)
    return { now, limit: Math.max(1, Math.ceil(SWEEP_PER_RECORD * records), Math.ceil(this.#sweepLimit * sinceSweep)), scrub: true }
  }

  #sweepDone (pass: SweepPass, now: number): void {
    this.#sweepMore = pass.more
    this.#sweptAt = now
    this.#onSwept?.(pass)
  }

  /**
   * While nothing is applied (IDLE_MS since the last pass that applied records): one sweep pass of
   * its own when one is due, then a pause as long as it took (a timer nudges the consumer after
   * it). Records arriving meanwhile are applied, their passes sweeping as they go.
   */
  async #sweepAlone (): Promise<void> {
    // Only the applier sweeps (issue 33): on MongoDB a follower's sweep transactions conflicted
    // with the applier's on the revision documents, and won, starving the apply.
    if (this.#following) return
    const due = this.#sweepDue(0, false)
    if (due === undefined) return
    const paused = Math.max(this.#sweepPausedUntil, this.#appliedAt + IDLE_MS) - performance.now()
    if (paused > 0) {
      // Woken before the pause ended (a timer may fire up to a millisecond early by this clock,
      // or another nudge came), or records were applied within IDLE_MS: the next pass still needs
      // its nudge.
      this.#nudgeAfter(paused)
      return
    }
    const started = performance.now()
    try {
      this.#sweepDone(await this.#store.rules.sweepLapsed(due.now, due.limit), due.now)
    } catch (e) {
      this.#sweepBackoffUntil = Date.now() + SWEEP_BACKOFF_MS
      this.#log?.warn({ err: e }, 'stream consumer: sweep failed; sweeping again in a minute')
      return
    }
    if (!this.#sweepMore || this.#stopped) return
    const pause = Math.min(MAX_SWEEP_PAUSE_MS, performance.now() - started)
    this.#sweepPausedUntil = performance.now() + pause
    this.#nudgeAfter(pause)
  }

  /** Nudges the consumer once `ms` have passed (the sweep's pause), unless a nudge is already set. */
  #nudgeAfter (ms: number): void {
    if (this.#sweepTimer !== null) return
    this.#sweepTimer = setTimeout(() => {
      this.#sweepTimer = null
      this.nudge()
    }, Math.ceil(ms))
    this.#sweepTimer.unref()
  }

  /** Loads the checkpoint, catches up with the stream, then polls. */
  async start (): Promise<void> {
    this.#position = await this.#store.stream.getCheckpoint(this.#name)
    this.#waiters.reached(this.#position)
    this.#head = this.#position
    this.poll()
    await this.#running
    this.#timer = setInterval(() => { this.#tick() }, this.#pollMs)
    this.#timer.unref()
  }

  /**
   * Asks for a pass that also reads the stream for records nobody offered (appended by another
   * process, or whose offer was lost); the poll timer calls it. Other passes read the stream only
   * for a backlog they know of: a batch is durable on the stream a moment before its offer
   * arrives, and a pass that read it then decoded it from the stream — a tenth of the consumer
   * thread's time (bench/ingest.ts --cpu-prof) — only to drop the offer.
   */
  poll (): void {
    this.#storeDue = true
    this.nudge()
  }

  /**
   * The poll timer: reads the stream only when nothing was offered since the last tick. While
   * batches are offered, records another process appends among them are read as gaps (the
   * offers after them move the known head past them); those after the last offer wait until
   * offers pause, which a busy appender's next tick finds. Polling the stream while offers flow
   * read the batches whose offers were still on their way, every tick.
   */
  #tick (): void {
    if (this.#offeredSinceTick) {
      this.#offeredSinceTick = false
      this.nudge()
    } else this.poll()
  }

  /** Seq of the last record applied. */
  get position (): number {
    return this.#position
  }

  /** Records known to be on the stream and not applied yet (the ingest path sheds load on it). */
  get backlog (): number {
    return Math.max(0, this.#head - this.#position)
  }

  /** Asks for a pass soon; passes never overlap, and a nudge during a pass causes one more. */
  nudge (): void {
    if (this.#stopped) return
    if (this.#running !== null) {
      this.#again = true
      return
    }
    this.#running = this.#loop().finally(() => { this.#running = null })
  }

  /**
   * Takes a batch this process has just appended (already decoded) and nudges.
   *
   * @example
   *   new SignalIngester({ stream: store.stream, checks, onAppended: (b) => { consumer.offer(b) } })
   */
  offer (batch: AppendedBatch): void {
    const first = batch.seqs[0]
    const last = batch.seqs[batch.seqs.length - 1]
    if (first === undefined || last === undefined) return
    this.#health.offered(last, batch.acceptedAt)
    // Only contiguous runs (what both stores' appends give): a pass takes a batch whole.
    if (last - first + 1 === batch.seqs.length) this.offerPrepared(commandsBatch(batch, first))
    else this.#heard(last)
  }

  /** Takes a batch this process appended in the form the consumer applies, and nudges. */
  offerPrepared (batch: OfferedBatch<Own>): void {
    const { first, count } = batch
    if (count === 0) return
    if (this.#offeredRecords + count > MAX_OFFERED) {
      this.#offered.clear()
      this.#offeredRecords = 0
    } else if (first > this.#position) {
      this.#offered.set(first, batch)
      this.#offeredRecords += count
    }
    this.#heard(first + count - 1)
  }

  /** Records up to `last` are on the stream: a pass soon (at once when a full pass waits). */
  #heard (last: number): void {
    this.#offeredSinceTick = true
    this.#head = Math.max(this.#head, last)
    if (this.#gathered !== null && this.backlog >= this.#batchSize) this.#gathered()
    this.nudge()
  }

  /**
   * Resolves true once every record up to `seq` is applied, false after `timeoutMs`.
   *
   * @example
   *   const { seqs } = await ingester.ingest('v1', ws, body)
   *   await consumer.waitFor(seqs.at(-1)!, 1000) // the rules are in the store
   */
  waitFor (seq: number, timeoutMs: number): Promise<boolean> {
    return this.#waiters.wait(seq, timeoutMs)
  }

  health (): ConsumerHealth {
    return this.#health.snapshot(this.backlog, Date.now())
  }

  /** Stops polling and waits for the pass in progress. */
  async stop (): Promise<void> {
    this.#stopped = true
    this.#gathered?.()
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    if (this.#sweepTimer !== null) clearTimeout(this.#sweepTimer)
    this.#sweepTimer = null
    await this.#running
    await this.#lease?.release()
  }

  async #loop (): Promise<void> {
    do {
      this.#again = false
      try {
        while (!this.#stopped) {
          await this.#gather()
          if (!await this.#pass()) {
            // At the head: a sweep pass of its own, when one is due.
            await this.#sweepAlone()
            break
          }
          // A turn of the event loop between passes: on microtasks alone lmdb-js's timer that
          // ends a read snapshot never fires, and a catch-up would pin the stream's snapshot (so
          // LMDB could not reuse trimmed pages) until it ended.
          await new Promise<void>((resolve) => { setImmediate(resolve) })
        }
      } catch (e) {
        // The store is failing: the poll timer tries again; nothing is lost, the checkpoint did not move.
        this.#log?.error({ err: e }, 'stream consumer: applying records failed; retrying on the next poll')
        const at = Date.now()
        const message = describeError(e)
        this.#health.failed(message, at, this.#passFirst)
        this.#onError?.(message, at, this.#passFirst)
        return
      }
    } while (this.#again && !this.#stopped)
  }

  /** Waits up to gatherMs while records are known to wait but fewer than a full pass. */
  #gather (): Promise<void> {
    const waiting = this.backlog
    if (this.#gatherMs <= 0 || waiting === 0 || waiting >= this.#batchSize) return Promise.resolve()
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        this.#gathered = null
        resolve()
      }
      const timer = setTimeout(done, this.#gatherMs)
      this.#gathered = done
    })
  }

  /** Applies the next slice; false when there was nothing to apply. */
  async #pass (): Promise<boolean> {
    this.#following = this.#lease !== null && !await this.#lease.mayApply()
    if (this.#following) {
      // Another node applies: follow the shared checkpoint (read-your-writes waits on it).
      const checkpoint = await this.#store.stream.getCheckpoint(this.#name)
      // Back too (issue 33): after a MongoDB failover with rollback the applier's last slices may
      // be gone, and a follower that kept its position would wait for seqs that are reused.
      if (checkpoint !== this.#position) this.#moved(checkpoint, checkpoint)
      return false
    }
    const from = this.#position + 1
    const ops: Array<RuleOp | Own> = []
    let last = from - 1
    this.#passFirst = null
    // The run of batches handed over in memory, if the next record begins one.
    for (let b = this.#offered.get(from); b !== undefined && (ops.length === 0 || ops.length + b.count <= this.#batchSize); b = this.#offered.get(last + 1)) {
      b.pushOps(ops)
      last = b.first + b.count - 1
    }
    if (ops.length === 0) {
      // Read up to the next batch offered, if one is: a gap (records not offered, or offered to
      // a consumer that was not running) is filled, and the batches after it are still taken
      // from memory.
      let limit = this.#batchSize
      for (const first of this.#offered.keys()) if (first > from && first - from < limit) limit = first - from
      if (limit === this.#batchSize && from > this.#head && !this.#storeDue) return false
      const records = await this.#store.stream.read(from, limit)
      if (records.length < limit) this.#storeDue = false // the end of the stream
      if (records.length === 0) return false
      this.#passFirst = { seq: records[0]!.seq, acceptedAt: records[0]!.acceptedAt }
      for (const record of records) {
        const d = decodeRecord(record)
        if (d.ok) ops.push(d.op)
        else this.#log?.warn({ seq: record.seq, reason: d.reason }, 'stream consumer: record skipped')
      }
      last = records[records.length - 1]!.seq
    }
    this.#head = Math.max(this.#head, last)
    const sweep = this.#sweepDue(ops.length, this.#head > last)
    let result: RuleBatchResult
    try {
      result = await this.#store.applyRuleBatch({ ops, checkpoint: { consumer: this.#name, seq: last, expected: from - 1 }, ...(sweep === undefined ? {} : { sweep }) })
    } catch (e) {
      // The retry goes without the sweep, in case the sweep is what failed.
      if (sweep !== undefined) this.#sweepBackoffUntil = Date.now() + SWEEP_BACKOFF_MS
      throw e
    }
    if (sweep !== undefined && result.swept !== undefined) this.#sweepDone(result.swept, sweep.now)
    if (ops.length > 0) this.#appliedAt = performance.now()
    // Applied: the position is `last`. Not applied: another consumer moved the checkpoint (or it
    // was reset); continue from where it stands, reading from the store what is not in memory.
    this.#moved(result.applied ? last : result.checkpoint ?? from - 1, last)
    return true
  }

  /** The position is `position` (`read`: the last record this pass had in hand). */
  #moved (position: number, read: number): void {
    this.#dropOffered(Math.max(read, position))
    this.#position = position
    this.#head = Math.max(this.#head, position)
    this.#waiters.reached(position)
    this.#health.applied(position)
    this.#onApplied?.(position)
  }

  /** Forgets the handed-over batches that begin at or before `to` (applied, by this consumer or
   *  another; of one cut by another consumer's position, the rest is read from the store). */
  #dropOffered (to: number): void {
    for (const [first, b] of this.#offered) {
      if (first <= to) {
        this.#offered.delete(first)
        this.#offeredRecords -= b.count
      }
    }
  }
}
