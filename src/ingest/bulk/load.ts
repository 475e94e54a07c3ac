/**
 * The bulk loader behind `threatfeed import`: entries → batches of at most 1000 (and at most
 * `maxBatchBytes`) → `concurrency` senders, each taking the next batch when its last one is
 * answered, so at most `concurrency` batches are in flight and the file is read only as fast as
 * the server takes it.
 *
 * Every entry ends in exactly one of two counts: accepted (in a 200/206 answer) or failed (with
 * its reason: not JSON, refused by the server, or not sent because the import stopped). So a
 * `--failed` file is everything that still needs sending.
 */
import type { SourceEntry } from './read-entries.js'
import { DEFAULT_RETRY, sendBatch, type RetryPolicy, type SendOptions } from './send-batch.js'

export interface LoadOptions {
  /** The signal endpoint, e.g. http://host:8080/v1/signal. */
  readonly url: string
  readonly key: string
  readonly concurrency: number
  readonly batchSize?: number
  readonly maxBatchBytes?: number
  readonly retry?: RetryPolicy
  readonly timeoutMs?: number
  readonly onProgress?: (p: LoadProgress) => void
  /** Every entry that was not accepted, with why. */
  readonly onFailed?: (entry: SourceEntry, reason: string) => void
  /** Overrides for tests (sleep, random). */
  readonly send?: Partial<SendOptions>
}

export interface LoadProgress {
  readonly accepted: number
  readonly failed: number
  readonly retries: number
  readonly batches: number
}

export interface LoadSummary extends LoadProgress {
  readonly entries: number
  readonly elapsedMs: number
  readonly entriesPerSecond: number
  /** Why the import stopped early, or null when every entry was sent. */
  readonly stopped: string | null
}

interface Batch {
  readonly entries: SourceEntry[]
  readonly body: string
}

/**
 * @example
 *   const summary = await loadEntries(readEntries(createReadStream(file)), { url, key, concurrency: 4 })
 *   // { entries: 250000, accepted: 249990, failed: 10, … }
 */
export async function loadEntries (source: AsyncIterable<SourceEntry[]>, opts: LoadOptions): Promise<LoadSummary> {
  const started = performance.now()
  const counts = { accepted: 0, failed: 0, retries: 0, batches: 0 }
  const fail = (entry: SourceEntry, reason: string): void => {
    counts.failed++
    opts.onFailed?.(entry, reason)
  }
  const progress = (): void => { opts.onProgress?.({ ...counts }) }
  const sendOptions: SendOptions = {
    url: opts.url,
    key: opts.key,
    retry: opts.retry ?? DEFAULT_RETRY,
    timeoutMs: opts.timeoutMs ?? 60_000,
    onRetry: () => { counts.retries++; progress() },
    ...opts.send,
  }
  let stopped: string | null = null
  const batches = makeBatches(source, opts.batchSize ?? 1000, opts.maxBatchBytes ?? 4 * 1024 * 1024, (e, reason) => { fail(e, reason); progress() })

  const worker = async (): Promise<void> => {
    while (stopped === null) {
      const next = await batches.next()
      if (next.done === true) return
      const batch = next.value
      const r = await sendBatch(batch.body, batch.entries.length, sendOptions)
      counts.batches++
      if (r.kind === 'fatal') {
        stopped ??= r.message
        for (const e of batch.entries) fail(e, `not sent: ${r.message}`)
      } else {
        batch.entries.forEach((e, i) => {
          const reason = r.failures.get(i)
          if (reason === undefined) counts.accepted++
          else fail(e, reason)
        })
      }
      progress()
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency) }, worker))
  // Stopped early: the rest of the file is reported too, so the failed file can be replayed.
  if (stopped !== null) {
    for await (const batch of batches) {
      for (const e of batch.entries) fail(e, `not sent: import stopped (${stopped})`)
    }
  }
  const elapsedMs = performance.now() - started
  const entries = counts.accepted + counts.failed
  return { ...counts, entries, elapsedMs, entriesPerSecond: elapsedMs > 0 ? entries / (elapsedMs / 1000) : 0, stopped }
}

/**
 * Groups entries into request bodies. An entry that is not JSON is failed here rather than sent:
 * inside a batch it would make the whole body invalid and fail its 999 neighbours. The body joins
 * the entries' own texts, so a v1 entry reaches the server (and its stream) byte for byte.
 */
async function * makeBatches (source: AsyncIterable<SourceEntry[]>, size: number, maxBytes: number, fail: (e: SourceEntry, reason: string) => void): AsyncGenerator<Batch> {
  let entries: SourceEntry[] = []
  let texts: string[] = []
  let bytes = 2
  const flush = (): Batch => {
    const b = { entries, body: `[${texts.join(',')}]` }
    entries = []
    texts = []
    bytes = 2
    return b
  }
  for await (const slice of source) {
    for (const e of slice) {
      try {
        JSON.parse(e.text)
      } catch {
        fail(e, 'not valid JSON')
        continue
      }
      const b = Buffer.byteLength(e.text) + 1
      if (entries.length > 0 && (entries.length >= size || bytes + b > maxBytes)) yield flush()
      entries.push(e)
      texts.push(e.text)
      bytes += b
    }
  }
  if (entries.length > 0) yield flush()
}
