/**
 * The admin API's journal (issue 22): what it records and how it stays bounded.
 *
 * - Signal batches: the ingester tells of each (src/ingest/batch.ts BatchReport); reports wait in
 *   memory (at most MAX_PENDING) and go to the store in one write per flush, so the ingest path
 *   pays a push, not a write.
 * - Feed sizes: every sampleMs the built snapshots' variants (entries, bytes, gzip bytes) are
 *   written under the start of their hour, so each variant keeps one point an hour for 30 days.
 *   The sampler keeps the last snapshot each swap published (FeedService#onSwap) rather than ask
 *   for the current one: asking counts as a request (the feed would never be let go after its
 *   hour without polls) and finds none at all while a feed of expiring rules is between its
 *   expiry and its rebuild, which under a pipeline's churn is nearly always (bench/soak).
 * - Audit: every change made through the admin API, written before the change is answered, and
 *   logged as a JSON line (`audit: true`).
 *
 * A sweep drops what is older than its table keeps or beyond its partition's cap. It runs every
 * sweepMs — at most 10 minutes, and a tenth of the shortest keepMs, so no entry outlives its table's
 * age by more than a tenth — and also as soon as one partition has had a tenth of its cap written
 * since the last sweep began: a workspace posting 50 batches/s would otherwise put 30,000 reports
 * past a 10,000 cap between two timed sweeps. Each partition so holds at most its cap plus a tenth
 * (plus what one flush and the sweep's own run add), whatever the rate, and a quiet journal is swept
 * by the timer alone. The count is this process's writes: N servers sharing a store may each add
 * their tenth before sweeping.
 */
import { randomUUID } from 'node:crypto'
import type { BatchReport } from '../ingest/batch.js'
import type { Logger } from '../log.js'
import { FEED_CHANGE_BUCKET_MS, FEED_CHANGE_DAYS_MS, type JournalBounds, type JournalEntry, type JournalStore, type JournalTable, type Store } from '../store/types.js'
import type { FeedId, FeedSnapshot } from '../feed/snapshot-types.js'

const DAY_MS = 86_400_000

/** Reasons kept per batch: a 1000-entry batch of failures keeps the first hundred and a count. */
export const MAX_BATCH_ERRORS = 100
/** Batch reports waiting for a flush at most; beyond it they are counted as dropped. */
const MAX_PENDING = 10_000
/** The timed sweep's longest interval. */
const SWEEP_MAX_MS = 600_000
/** The share of a partition's cap written since the last sweep that starts one at once, and of a table's age the timer may lag. */
const SWEEP_SLACK = 0.1

/** The batch journal's defaults (THREATFEED_BATCH_JOURNAL_MAX and _RETENTION, src/config.ts). */
export const BATCH_JOURNAL_MAX = 10_000
export const BATCH_JOURNAL_RETENTION_MS = 7 * DAY_MS

/** The bounds with the batch journal's defaults; the server's come from journalBounds(config). */
export const JOURNAL_BOUNDS: Readonly<Record<JournalTable, JournalBounds>> = journalBounds({ keepMs: BATCH_JOURNAL_RETENTION_MS, maxPerPartition: BATCH_JOURNAL_MAX })

/**
 * Every table's bounds given the batch journal's, the one the operator sets: how many batch
 * reports a pipeline's diagnostics need depends on its rate (50 batches/s fill 10,000 in minutes,
 * one an hour keeps a year). Feed sizes follow the console's 30-day chart; audit lines are also
 * logged, so a longer record belongs in the log store.
 *
 * @example
 *   new AdminJournal({ store, log, bounds: journalBounds({ keepMs: 86_400_000, maxPerPartition: 1000 }) })
 */
export function journalBounds (batch: JournalBounds): Readonly<Record<JournalTable, JournalBounds>> {
  return Object.freeze({
    batch: Object.freeze({ ...batch }),
    // One point an hour for 30 days per variant; 48 variants is every format, family and action
    // with and without a checksum.
    feed_size: Object.freeze({ keepMs: FEED_CHANGE_DAYS_MS, maxPerPartition: 720 * 48 }),
    audit: Object.freeze({ keepMs: 90 * DAY_MS, maxPerPartition: 100_000 }),
  })
}

/** The timed sweep's interval for these bounds: a tenth of the shortest age kept, 1 s to 10 min. */
export function journalSweepMs (bounds: Readonly<Record<JournalTable, JournalBounds>>): number {
  const shortest = Math.min(...Object.values(bounds).map((b) => b.keepMs))
  return Math.max(1000, Math.min(SWEEP_MAX_MS, Math.floor(shortest * SWEEP_SLACK)))
}

export interface AuditLine {
  readonly keyId: string
  readonly address: string
  /** `list.create`, `key.revoke`, `workspace.update`, `list.accept` … */
  readonly action: string
  /** The id of what changed. */
  readonly target: string
  readonly workspaceId: string
  readonly status: number
}

/** The snapshots published, as the feed service announces them (src/feed/feed-service.ts). */
export interface SnapshotSwaps {
  /** `snapshot` null: the feed was let go. Returns the unsubscribe. */
  onSwap (listener: (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null) => void): () => void
}

export interface AdminJournalOptions {
  readonly store: Store
  readonly log: Logger
  /** The snapshots to sample feed sizes from; absent: none are sampled. */
  readonly feeds?: SnapshotSwaps
  /** Default JOURNAL_BOUNDS. */
  readonly bounds?: Readonly<Record<JournalTable, JournalBounds>>
  readonly flushMs?: number
  readonly sampleMs?: number
  /** Default journalSweepMs(bounds). */
  readonly sweepMs?: number
}

export class AdminJournal {
  readonly journal: JournalStore | null
  readonly #store: Store
  readonly #log: Logger
  /** The last snapshot published per feed, keyed `workspace/feed`; null until the feeds are given. */
  #published: Map<string, { workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot }> | null = null
  #unsubscribe: () => void = () => {}
  #pending: JournalEntry[] = []
  #dropped = 0
  readonly #timers: NodeJS.Timeout[] = []
  readonly #flushMs: number
  readonly #sampleMs: number
  readonly #sweepMs: number
  readonly #bounds: Readonly<Record<JournalTable, JournalBounds>>
  #flushing: Promise<void> = Promise.resolve()
  #sweeping: Promise<number> = Promise.resolve(0)
  /** Entries this process wrote per table and partition since the last sweep began. */
  #written = new Map<string, number>()
  /** A sweep is queued behind the running one, and the time it sweeps at. */
  #sweepQueued = false
  #sweepAt = 0

  constructor (options: AdminJournalOptions) {
    this.#store = options.store
    this.journal = options.store.journal ?? null
    this.#log = options.log
    if (options.feeds !== undefined) this.#watch(options.feeds)
    this.#bounds = options.bounds ?? JOURNAL_BOUNDS
    this.#flushMs = options.flushMs ?? 1000
    this.#sampleMs = options.sampleMs ?? 300_000
    this.#sweepMs = options.sweepMs ?? journalSweepMs(this.#bounds)
  }

  /** The ingester's onBatch: a push onto the pending writes (none when the cap is 0). */
  readonly recordBatch = (r: BatchReport): void => {
    if (this.journal === null || this.#bounds.batch.maxPerPartition === 0) return
    if (this.#pending.length >= MAX_PENDING) { this.#dropped++; return }
    this.#pending.push({
      table: 'batch',
      partition: r.workspaceId,
      at: r.at,
      id: randomUUID(),
      data: {
        api: r.api,
        key_id: r.keyId,
        entries: r.entries,
        accepted: r.accepted,
        failed: r.failed,
        status: r.status,
        errors: r.errors.slice(0, MAX_BATCH_ERRORS),
        errors_truncated: Math.max(0, r.errors.length - MAX_BATCH_ERRORS),
        batch: r.receipt,
      },
    })
  }

  /** Writes the line (durably, before the change is answered) and logs it. */
  async audit (line: AuditLine): Promise<void> {
    const at = Date.now()
    const data = { key_id: line.keyId, address: line.address, action: line.action, target: line.target, workspace: line.workspaceId, status: line.status }
    this.#log.info({ audit: true, at: new Date(at).toISOString(), ...data }, 'admin change')
    if (this.journal === null) return
    const entries: JournalEntry[] = [{ table: 'audit', partition: line.workspaceId, at, id: randomUUID(), data }]
    await this.journal.put(entries)
    this.#wrote(entries)
  }

  /**
   * Starts the flushes, the sweep and, given the feeds, the size samples. Start it before the
   * feeds start, so that the snapshots they build at start are seen.
   */
  start (feeds?: SnapshotSwaps): void {
    if (feeds !== undefined) this.#watch(feeds)
    const every = (ms: number, fn: () => Promise<unknown>): void => {
      const t = setInterval(() => { fn().catch((err: unknown) => { this.#log.warn({ err }, 'admin journal task failed') }) }, ms)
      t.unref()
      this.#timers.push(t)
    }
    every(this.#flushMs, () => this.flush())
    if (this.#published !== null) every(this.#sampleMs, () => this.sampleFeeds())
    every(this.#sweepMs, () => this.sweep(Date.now()))
  }

  #watch (feeds: SnapshotSwaps): void {
    this.#unsubscribe()
    const published = this.#published = new Map()
    this.#unsubscribe = feeds.onSwap((workspaceId, feedId, snapshot) => {
      if (snapshot === null) published.delete(`${workspaceId}/${feedId}`)
      // A served copy (a restart) holds only the variants polled: sizes are sampled from builds.
      else if (snapshot.restored !== true) published.set(`${workspaceId}/${feedId}`, { workspaceId, feedId, snapshot })
    })
  }

  async stop (): Promise<void> {
    for (const t of this.#timers) clearInterval(t)
    this.#timers.length = 0
    this.#unsubscribe()
    await this.flush()
    this.#sweepQueued = false
    await this.#sweeping
  }

  /** Writes the pending batch reports (one write); flushes never overlap. */
  flush (): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      if (this.journal === null || this.#pending.length === 0) return
      const entries = this.#pending
      this.#pending = []
      if (this.#dropped > 0) {
        this.#log.warn({ dropped: this.#dropped }, 'batch diagnostics dropped: the store is slower than the batches')
        this.#dropped = 0
      }
      await this.journal.put(entries)
      this.#wrote(entries)
    })
    return this.#flushing
  }

  /**
   * Counts what was written towards its partition's next sweep, and starts one when a partition
   * has had a tenth of its cap (feed sizes are not counted: a sample replaces the hour's point).
   */
  #wrote (entries: readonly JournalEntry[]): void {
    let due = false
    for (const e of entries) {
      const k = `${e.table}\0${e.partition}`
      const n = (this.#written.get(k) ?? 0) + 1
      this.#written.set(k, n)
      if (n >= Math.max(1, Math.ceil(this.#bounds[e.table].maxPerPartition * SWEEP_SLACK))) due = true
    }
    if (due) this.sweep(Date.now()).catch((err: unknown) => { this.#log.warn({ err }, 'admin journal task failed') })
  }

  /** One point per built variant under the start of the current hour (the hour's last sample wins). */
  async sampleFeeds (now = Date.now()): Promise<number> {
    if (this.journal === null || this.#published === null || this.#published.size === 0) return 0
    const hour = Math.floor(now / FEED_CHANGE_BUCKET_MS) * FEED_CHANGE_BUCKET_MS
    // Only feeds that still exist: a deleted workspace's or list's last snapshot may outlive it.
    const live = new Set<string>()
    for (const w of await this.#store.workspaces.list()) {
      if (w.deletedAt !== null) continue
      live.add(`${w.id}/*`)
      for (const l of await this.#store.lists.list(w.id)) live.add(`${w.id}/${l.id}`)
    }
    const entries: JournalEntry[] = []
    for (const [partition, { snapshot }] of this.#published) {
      if (!live.has(partition)) continue
      for (const [variant, v] of snapshot.variants) {
        entries.push({
          table: 'feed_size',
          partition,
          at: hour,
          id: variant,
          data: { entries: v.entries, bytes: v.identity.body.byteLength, gzip_bytes: v.gzip.body.byteLength, status: v.status, sampled_at: now, last_modified: v.lastModified },
        })
      }
    }
    await this.journal.put(entries)
    return entries.length
  }

  /**
   * Bounded passes until nothing is left to drop. Sweeps never overlap: one asked for while
   * another runs runs once after it, at the latest `now` asked (asks meanwhile fold into it).
   */
  sweep (now: number): Promise<number> {
    const journal = this.journal
    if (journal === null) return Promise.resolve(0)
    if (this.#sweepQueued) {
      this.#sweepAt = Math.max(this.#sweepAt, now)
      return this.#sweeping
    }
    this.#sweepQueued = true
    this.#sweepAt = now
    this.#sweeping = this.#sweeping.catch(() => 0).then(async () => {
      if (!this.#sweepQueued) return 0
      this.#sweepQueued = false
      this.#written.clear()
      let removed = 0
      for (let i = 0; i < 100; i++) {
        const pass = await journal.sweep(this.#sweepAt, this.#bounds, 10_000)
        removed += pass.removed
        if (!pass.more) break
      }
      return removed
    })
    return this.#sweeping
  }
}
