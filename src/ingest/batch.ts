/**
 * One signal batch, from request body to answer (SPEC 2.5, 4.1, 4.2; DECISIONS §3):
 *
 *   parse once → (v2) whole-batch rule.type check → each entry: normalize or fail
 *     → every entry failed: 400 ValidationError with details
 *     → else append the accepted entries to the stream in one durable write → 200 / 206
 *
 * Nothing reaches the rule store from here: the stream is the write-ahead log and the consumer
 * (src/stream/) applies it. An entry that fails leaves no trace; an acknowledged entry is on
 * disk before the answer is written.
 *
 * Every 200/206 answer names its batch: a random id, stored with the append and read back on
 * each of its records (`threatfeed stream tail --json`), and the seqs its entries took, so that
 * a client can later show that what it was told was kept is in the stream (docs/signals.md).
 */
import { randomUUID } from 'node:crypto'
import { ThreatfeedError, isThreatfeedError } from '../errors.js'
import { CommitGate } from '../store/commit-gate.js'
import type { AppendOnce, AppendOnceResult, SignalStream, StreamAppend, StreamRecordInput } from '../store/types.js'
import { toV2Payload, type Command } from './commands.js'
import type { EntryChecks, NormalizeResult } from './entry-rules.js'
import { splitJsonArray } from '../json/array-splitter.js'
import type { AppendHealth } from './append-health.js'
import { parseIdempotencyKey, requestDigest } from './idempotency-key.js'
import { normalizeV1 } from './normalize-v1.js'
import { normalizeV2, RULE_TYPE_MESSAGE } from './normalize-v2.js'
import { parseBatch } from './parse-body.js'
import type { EntryFailure } from './validators.js'

export type ApiVersion = 'v1' | 'v2'

/** SPEC 2.5, and `batch` (docs/signals.md, "Batch receipts"). */
export interface BatchResponse {
  success: boolean
  message: string
  errors?: string[]
  batch?: BatchReceipt
}

/** Where an acknowledged batch is in the stream: its id and its entries' seqs, first to last. */
export interface BatchReceipt {
  id: string
  first_seq: number
  last_seq: number
}

export interface BatchOutcome {
  readonly status: 200 | 206
  readonly body: BatchResponse
  /** Stream seqs of the accepted entries, in entry order. */
  readonly seqs: readonly number[]
  /** The id stored with the batch's append (the answer's `batch.id`). */
  readonly batchId: string
}

/** One item of SPEC 2.6 `details`. */
export interface ErrorDetail {
  field: string
  message: string
  value: unknown
}

/** What one durable append put on the stream, already decoded (see StreamConsumer#offer). */
export interface AppendedBatch {
  readonly workspaceId: string
  readonly acceptedAt: number
  /** Stream seqs, ascending, one per command. */
  readonly seqs: readonly number[]
  readonly commands: readonly Command[]
}

/**
 * What became of one batch, for the admin API's diagnostics (issue 22): counts and the failed
 * entries' reasons, never the entries themselves. `entries` is 0 when the body was not an array.
 */
export interface BatchReport {
  readonly api: ApiVersion
  readonly workspaceId: string
  /** The id of the key that posted the batch (never the key), or null when none was given. */
  readonly keyId: string | null
  readonly at: number
  readonly entries: number
  readonly accepted: number
  readonly failed: number
  readonly status: 200 | 206 | 400
  readonly errors: readonly string[]
  /** The batch's receipt when it was appended (200, 206), else null. */
  readonly receipt: BatchReceipt | null
}

export interface IngesterOptions {
  readonly stream: SignalStream
  /** Told of every batch answered 200, 206 or 400 (not of a store failure: nothing was decided). */
  readonly onBatch?: (report: BatchReport) => void
  readonly checks: EntryChecks
  /** Called after every successful append (hands the batch to the in-process consumer). */
  readonly onAppended?: (batch: AppendedBatch) => void
  readonly now?: () => number
  /** The answer's deadline (DECISIONS §5: a failing store answers 500 within 2 s). */
  readonly appendTimeoutMs?: number
  /**
   * How long before the deadline the stream commit must have started (default 500 ms, at most a
   * quarter of the deadline): the time a commit that starts at the cutoff has to flush, so that it
   * is answered by the deadline too. An LMDB or MongoDB commit of one batch takes milliseconds to
   * tens of milliseconds (bench/ingest.ts: a whole request's p99 is 50–90 ms); half a second
   * covers a disk or a replica set that is slow but working, and a store slower than that is
   * failing anyway.
   */
  readonly commitMarginMs?: number
  /** Told of every append's outcome (what /readyz says of signals). */
  readonly health?: AppendHealth
}

/** `[3].asn`, `[0].rule.expression`, `[2]` for the entry itself. */
export function detailField (index: number, path: string): string {
  return path === '' ? `[${index}]` : `[${index}].${path}`
}

/** `Entry 3: asn: AS64512 is not in the ASN database`. */
export function entryReason (index: number, f: EntryFailure): string {
  return f.path === '' ? `Entry ${index}: ${f.message}` : `Entry ${index}: ${f.path}: ${f.message}`
}

/**
 * v2 only (DECISIONS §3): an expression rule being upserted whose `rule.type` is missing, null or
 * empty rejects the whole batch. Returns the details of every such entry, or null.
 */
export function findMissingRuleType (entries: readonly unknown[]): ErrorDetail[] | null {
  let details: ErrorDetail[] | null = null
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as { kind?: unknown, op?: unknown, rule?: unknown } | null
    if (typeof e !== 'object' || e === null || (e.kind !== 'waf_rule' && e.kind !== 'smart_firewall_rule') || e.op === 'delete') continue
    const rule = e.rule
    if (typeof rule !== 'object' || rule === null || Array.isArray(rule)) continue
    const type = Object.hasOwn(rule, 'type') ? (rule as { type: unknown }).type : undefined
    if (type === undefined || type === null || type === '') {
      (details ??= []).push({ field: detailField(i, 'rule.type'), message: RULE_TYPE_MESSAGE, value: type ?? null })
    }
  }
  return details
}

function refused (e: ThreatfeedError, entries: number): ThreatfeedError {
  refusedEntries.set(e, entries)
  return e
}

/**
 * The entry count of a batch refused whole, keyed by the error that refused it: the error's
 * details name only the invalid entries (a v2 batch of 7 with 2 missing rule.type names 2).
 */
const refusedEntries = new WeakMap<object, number>()

export class SignalIngester {
  readonly #stream: SignalStream
  readonly #checks: EntryChecks
  readonly #onAppended: (batch: AppendedBatch) => void
  readonly #onBatch: ((report: BatchReport) => void) | null
  readonly #now: () => number
  readonly #appendTimeoutMs: number
  readonly #commitMarginMs: number
  readonly #health: AppendHealth | null

  constructor (options: IngesterOptions) {
    this.#health = options.health ?? null
    this.#stream = options.stream
    this.#checks = options.checks
    this.#onAppended = options.onAppended ?? (() => {})
    this.#onBatch = options.onBatch ?? null
    this.#now = options.now ?? Date.now
    this.#appendTimeoutMs = options.appendTimeoutMs ?? 2000
    this.#commitMarginMs = options.commitMarginMs ?? Math.min(500, this.#appendTimeoutMs / 4)
  }

  /**
   * Handles one batch for a workspace. Resolves with a 200/206 outcome; throws ThreatfeedError
   * for 400 (bad body, every entry failed, v2 rule.type) and 500 (store unavailable).
   *
   * @example
   *   const out = await ingester.ingest('v1', workspaceId, Buffer.from('[{"type":"access_rules","action":"block","ip":"192.0.2.1"}]'))
   *   // out.status === 200, out.body.message === 'Processed 1 entries, 0 failed'
   */
  async ingest (api: ApiVersion, workspaceId: string, body: Buffer, keyId: string | null = null, idempotencyKey?: string): Promise<BatchOutcome> {
    const key = parseIdempotencyKey(idempotencyKey)
    const digest = key === null ? '' : requestDigest(api, body)
    let accepted: Accepted
    try {
      accepted = this.#accept(api, workspaceId, body, key === null ? null : { key, digest })
    } catch (e) {
      if (this.#onBatch !== null) this.#reportRefused(api, workspaceId, keyId, e)
      throw e
    }
    const { seqs, earlier } = await accepted.appended
    if (earlier !== null) {
      // A retry of a batch stored under this key: its first answer again, nothing appended now.
      if (earlier.digest !== digest) throw new ThreatfeedError('TF_ERR_IDEMPOTENCY_KEY_REUSED')
      return answer(api, earlier.note.message as string, earlier.note.errors as string[], seqs, earlier.note.batchId as string)
    }
    this.#onAppended({ workspaceId, acceptedAt: accepted.acceptedAt, seqs, commands: accepted.commands })
    const { message, errors, batchId } = accepted
    const batch: BatchReceipt = { id: batchId, first_seq: seqs[0]!, last_seq: seqs[seqs.length - 1]! }
    if (this.#onBatch !== null) {
      this.#onBatch({ api, workspaceId, keyId, at: accepted.acceptedAt, entries: seqs.length + errors.length, accepted: seqs.length, failed: errors.length, status: errors.length === 0 ? 200 : 206, errors, receipt: batch })
    }
    return answer(api, message, errors, seqs, batchId)
  }

  /** A batch refused whole (400): every entry failed, or the body was not a batch at all. */
  #reportRefused (api: ApiVersion, workspaceId: string, keyId: string | null, e: unknown): void {
    if (!(e instanceof ThreatfeedError) || e.status !== 400) return
    const details = Array.isArray(e.details) ? e.details as ErrorDetail[] : null
    const errors = details === null ? [e.message] : details.map((d) => `${d.field}: ${d.message}`)
    // failed: the entries found invalid; entries: the whole batch's, none of which was accepted.
    const failed = details === null ? 0 : new Set(details.map((d) => /^\[(\d+)\]/.exec(d.field)?.[1] ?? d.field)).size
    const entries = refusedEntries.get(e) ?? failed
    this.#onBatch!({ api, workspaceId, keyId, at: this.#now(), entries, accepted: 0, failed, status: 400, errors, receipt: null })
  }

  /**
   * Everything up to the durable write, synchronously, so the parsed batch is garbage while the
   * append waits for the disk instead of surviving scavenges (bench/NOTES.md, "Ingest: the accept frame").
   */
  #accept (api: ApiVersion, workspaceId: string, body: Buffer, once: { key: string, digest: string } | null): Accepted {
    const { text, entries } = parseBatch(body)
    if (api === 'v2') {
      const missing = findMissingRuleType(entries)
      if (missing !== null) throw refused(new ThreatfeedError('TF_ERR_RULE_TYPE_REQUIRED', [], { details: missing }), entries.length)
    }
    const normalize = api === 'v1' ? normalizeV1 : normalizeV2
    const results: NormalizeResult[] = new Array(entries.length)
    let failed = 0
    for (let i = 0; i < entries.length; i++) {
      const r = normalize(entries[i], this.#checks)
      results[i] = r
      if (!r.ok) failed++
    }
    if (failed === entries.length) {
      const details = results.map((r, i) => {
        const f = (r as { failure: EntryFailure }).failure
        return { field: detailField(i, f.path), message: f.message, value: f.value }
      })
      throw refused(new ThreatfeedError('TF_ERR_VALIDATION', [], { details }), entries.length)
    }

    const acceptedAt = this.#now()
    const batchId = randomUUID()
    const message = `Processed ${entries.length} entries, ${failed} failed`
    if (api === 'v1' && failed === 0) {
      // Every entry's own text, byte for byte (SPEC §9.3: the v1 stream format is unchanged): the
      // body is stored whole and split when read back (types.ts WholeV1Batch).
      const commands = results.map((r) => (r as { command: Command }).command)
      return { appended: this.#append({ workspaceId, acceptedAt, body, count: entries.length }, onceOf(workspaceId, acceptedAt, once, message, [], batchId), batchId), acceptedAt, batchId, commands, message, errors: [] }
    }
    // v1 with failures: the accepted entries' texts only (a failed entry leaves no trace).
    const texts = api === 'v1' ? splitJsonArray(text) : null
    const records: StreamRecordInput[] = []
    const commands: Command[] = []
    const errors: string[] = []
    for (let i = 0; i < results.length; i++) {
      const r = results[i]!
      if (!r.ok) {
        errors.push(entryReason(i, r.failure))
        continue
      }
      commands.push(r.command)
      records.push(texts !== null
        ? { workspaceId, payload: texts[i]!, acceptedAt }
        : { workspaceId, schemaVersion: 2, payload: toV2Payload(r.command), acceptedAt })
    }
    return { appended: this.#append(records, onceOf(workspaceId, acceptedAt, once, message, errors, batchId), batchId), acceptedAt, batchId, commands, message, errors }
  }

  /**
   * The stream append under the deadline rule (store/commit-gate.ts): its commit must start
   * before the deadline less the margin. At that cutoff an append whose commit has not started is
   * abandoned — it will never be written — and answered 500; one whose commit has started is
   * waited for, even past the deadline, so a 500 always means "not applied". Not an async
   * function: `records` must not be held by a suspended frame (see #accept).
   */
  #append (records: StreamAppend, once: AppendOnce | null, batchId: string): Promise<AppendOnceResult> {
    const gate = new CommitGate(Date.now() + this.#appendTimeoutMs - this.#commitMarginMs)
    let append: Promise<AppendOnceResult>
    try {
      if (once === null) append = this.#stream.append(records, gate, batchId).then((seqs) => ({ seqs, earlier: null }))
      else if (this.#stream.appendOnce === undefined) throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error('this stream keeps no idempotency keys') })
      else append = this.#stream.appendOnce(records, once, gate, batchId)
    } catch (e) {
      return Promise.reject(e)
    }
    return new Promise<AppendOnceResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (!gate.abandon()) return // the commit has started: its outcome is the answer
        reject(new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], {
          cause: new Error(`the stream commit did not start within ${this.#appendTimeoutMs - this.#commitMarginMs} ms; the batch was abandoned and will not be written`),
        }))
      }, gate.cutoff - Date.now())
      // After an abandon the append still settles (rejected by the gate, as nobody awaits it now).
      append.then((r) => { clearTimeout(timer); resolve(r) }, (e: unknown) => { clearTimeout(timer); reject(e) })
    }).then((r) => {
      this.#health?.succeeded()
      return r
    }, (e: unknown) => {
      if (isThreatfeedError(e) && e.status >= 500) this.#health?.failed(e)
      throw e
    })
  }
}

/** The 200 or 206 of a batch (SPEC 2.5): built the same way for its first answer and a retry's. */
function answer (api: ApiVersion, message: string, errors: string[], seqs: readonly number[], batchId: string): BatchOutcome {
  const batch: BatchReceipt = { id: batchId, first_seq: seqs[0]!, last_seq: seqs[seqs.length - 1]! }
  if (errors.length === 0) {
    return { status: 200, body: api === 'v2' ? { success: true, message, errors, batch } : { success: true, message, batch }, seqs, batchId }
  }
  return { status: 206, body: { success: false, message, errors, batch }, seqs, batchId }
}

/** The append-once request of a batch posted with an Idempotency-Key; what a retry is answered from. */
function onceOf (workspaceId: string, at: number, once: { key: string, digest: string } | null, message: string, errors: string[], batchId: string): AppendOnce | null {
  return once === null ? null : { workspaceId, key: once.key, digest: once.digest, at, note: { message, errors, batchId } }
}

/** A batch accepted by #accept: its answer, and the append under way. */
interface Accepted {
  readonly appended: Promise<AppendOnceResult>
  readonly acceptedAt: number
  readonly batchId: string
  readonly commands: Command[]
  readonly message: string
  readonly errors: string[]
}
