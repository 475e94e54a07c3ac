/**
 * The admin API's journal (issue 22): what it records and how it stays bounded.
 *
 * - Signal batches: the ingester tells of each (src/ingest/batch.ts BatchReport); reports wait in
 *   memory (at most MAX_PENDING) and go to the store in one write per flush, so the ingest path
 *   pays a push, not a write.
 * - Feed sizes: every sampleMs the built snapshots' variants (entries, bytes, gzip bytes) are
 *   written under the start of their hour, so each variant keeps one point an hour for 30 days.
 * - Audit: every change made through the admin API, written before the change is answered, and
 *   logged as a JSON line (`audit: true`).
 *
 * A sweep every sweepMs drops what is older than its table keeps or beyond its partition's cap.
 */
import { randomUUID } from 'node:crypto'
import type { BatchReport } from '../ingest/batch.js'
import type { Logger } from '../log.js'
import { FEED_CHANGE_BUCKET_MS, FEED_CHANGE_DAYS_MS, type JournalBounds, type JournalEntry, type JournalStore, type JournalTable, type Store } from '../store/types.js'
import type { FeedSource } from './feed-routes.js'

const DAY_MS = 86_400_000

/** Reasons kept per batch: a 1000-entry batch of failures keeps the first hundred and a count. */
export const MAX_BATCH_ERRORS = 100
/** Batch reports waiting for a flush at most; beyond it they are counted as dropped. */
const MAX_PENDING = 10_000

export const JOURNAL_BOUNDS: Record<JournalTable, JournalBounds> = {
  batch: { keepMs: 7 * DAY_MS, maxPerPartition: 10_000 },
  // One point an hour for 30 days per variant; 48 variants is every format, family and action
  // with and without a checksum.
  feed_size: { keepMs: FEED_CHANGE_DAYS_MS, maxPerPartition: 720 * 48 },
  audit: { keepMs: 90 * DAY_MS, maxPerPartition: 100_000 },
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

export interface AdminJournalOptions {
  readonly store: Store
  readonly log: Logger
  /** The snapshots to sample feed sizes from; absent: none are sampled. */
  readonly feeds?: FeedSource
  readonly flushMs?: number
  readonly sampleMs?: number
  readonly sweepMs?: number
}

export class AdminJournal {
  readonly journal: JournalStore | null
  readonly #store: Store
  readonly #log: Logger
  #feeds: FeedSource | null
  #pending: JournalEntry[] = []
  #dropped = 0
  readonly #timers: NodeJS.Timeout[] = []
  readonly #flushMs: number
  readonly #sampleMs: number
  readonly #sweepMs: number
  #flushing: Promise<void> = Promise.resolve()

  constructor (options: AdminJournalOptions) {
    this.#store = options.store
    this.journal = options.store.journal ?? null
    this.#log = options.log
    this.#feeds = options.feeds ?? null
    this.#flushMs = options.flushMs ?? 1000
    this.#sampleMs = options.sampleMs ?? 300_000
    this.#sweepMs = options.sweepMs ?? 600_000
  }

  /** The ingester's onBatch: a push onto the pending writes. */
  readonly recordBatch = (r: BatchReport): void => {
    if (this.journal === null) return
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
      },
    })
  }

  /** Writes the line (durably, before the change is answered) and logs it. */
  async audit (line: AuditLine): Promise<void> {
    const at = Date.now()
    const data = { key_id: line.keyId, address: line.address, action: line.action, target: line.target, workspace: line.workspaceId, status: line.status }
    this.#log.info({ audit: true, at: new Date(at).toISOString(), ...data }, 'admin change')
    await this.journal?.put([{ table: 'audit', partition: line.workspaceId, at, id: randomUUID(), data }])
  }

  /** Starts the flushes, the sweep and, given the feeds, the size samples. */
  start (feeds?: FeedSource): void {
    if (feeds !== undefined) this.#feeds = feeds
    const every = (ms: number, fn: () => Promise<unknown>): void => {
      const t = setInterval(() => { fn().catch((err: unknown) => { this.#log.warn({ err }, 'admin journal task failed') }) }, ms)
      t.unref()
      this.#timers.push(t)
    }
    every(this.#flushMs, () => this.flush())
    if (this.#feeds !== null) every(this.#sampleMs, () => this.sampleFeeds())
    every(this.#sweepMs, () => this.sweep(Date.now()))
  }

  async stop (): Promise<void> {
    for (const t of this.#timers) clearInterval(t)
    this.#timers.length = 0
    await this.flush()
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
    })
    return this.#flushing
  }

  /** One point per built variant under the start of the current hour (the hour's last sample wins). */
  async sampleFeeds (now = Date.now()): Promise<number> {
    if (this.journal === null || this.#feeds === null) return 0
    const hour = Math.floor(now / FEED_CHANGE_BUCKET_MS) * FEED_CHANGE_BUCKET_MS
    const entries: JournalEntry[] = []
    for (const w of await this.#store.workspaces.list()) {
      if (w.deletedAt !== null) continue
      const feedIds = ['*', ...(await this.#store.lists.list(w.id)).map((l) => l.id)]
      for (const feedId of feedIds) {
        const snap = this.#feeds.getSnapshot(w.id, feedId, now)
        if (snap === null) continue
        for (const [variant, v] of snap.variants) {
          entries.push({
            table: 'feed_size',
            partition: `${w.id}/${feedId}`,
            at: hour,
            id: variant,
            data: { entries: v.entries, bytes: v.identity.body.byteLength, gzip_bytes: v.gzip.body.byteLength, status: v.status, sampled_at: now },
          })
        }
      }
    }
    await this.journal.put(entries)
    return entries.length
  }

  /** Bounded passes until nothing is left to drop. */
  async sweep (now: number): Promise<number> {
    if (this.journal === null) return 0
    let removed = 0
    for (let i = 0; i < 100; i++) {
      const pass = await this.journal.sweep(now, JOURNAL_BOUNDS, 10_000)
      removed += pass.removed
      if (!pass.more) break
    }
    return removed
  }
}
