/**
 * Sends one batch of the bulk loader and reads the answer into per-entry outcomes (SPEC 7.1):
 * 200 all accepted; 206 the `errors` name the failed entries; 400 every entry of the batch failed
 * (with the ValidationError `details` when there are); 429 and 5xx — and a lost connection — are
 * retried with exponential backoff and full jitter, waiting at least `Retry-After`; 401, 402, 403
 * and any other answer stop the whole import, since every later batch would get the same.
 *
 * Retrying is safe: an entry is an upsert or a delete by its identity (DECISIONS §3), so a batch
 * that was applied before its answer was lost is applied again without creating anything twice.
 */

export interface RetryPolicy {
  /** Attempts in all, the first included. */
  readonly attempts: number
  readonly baseMs: number
  readonly maxMs: number
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 10, baseMs: 250, maxMs: 30_000 }

export type BatchResult =
  /** Answered: `failures` maps a position in the batch to its reason (empty on 200). */
  | { readonly kind: 'done', readonly status: number, readonly failures: Map<number, string>, readonly retries: number }
  /**
   * The import must stop: authentication or permission (401/402/403), a wrong URL, or the
   * retries ran out (status 0) — a server that stayed away that long will not serve the rest.
   */
  | { readonly kind: 'fatal', readonly status: number, readonly message: string, readonly retries: number }

export interface SendOptions {
  readonly url: string
  readonly key: string
  readonly retry: RetryPolicy
  readonly timeoutMs: number
  /** Waits; replaced in tests. */
  readonly sleep?: (ms: number) => Promise<void>
  readonly random?: () => number
  readonly onRetry?: (why: string) => void
}

const sleepMs = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Full jitter (AWS Architecture Blog, "Exponential Backoff And Jitter"), floored at Retry-After. */
export function backoffMs (attempt: number, retryAfterSeconds: number | null, policy: RetryPolicy, random: () => number): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** attempt)
  const jittered = Math.floor(random() * ceiling)
  return retryAfterSeconds === null ? jittered : Math.max(retryAfterSeconds * 1000, jittered)
}

/** RFC 9110 §10.2.3: delay-seconds, or an HTTP-date. */
export function parseRetryAfter (value: string | null, now = Date.now()): number | null {
  if (value === null || value === '') return null
  if (/^\d+$/.test(value.trim())) return Number(value.trim())
  const at = Date.parse(value)
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - now) / 1000))
}

/**
 * Per-entry reasons of a 206 or 400 answer body, keyed by position in the batch. A 400 without
 * per-entry details (bad batch, or the v2 whole-batch rule.type rejection) fails every entry
 * with the message, plus the detail where one names the entry.
 */
export function readFailures (status: number, body: unknown, size: number): Map<number, string> {
  const failures = new Map<number, string>()
  const b = (typeof body === 'object' && body !== null ? body : {}) as { errors?: unknown, details?: unknown, message?: unknown }
  if (status === 206 && Array.isArray(b.errors)) {
    for (const e of b.errors) {
      const m = typeof e === 'string' ? /^Entry (\d+): ([\s\S]*)$/.exec(e) : null
      if (m !== null) failures.set(Number(m[1]), m[2]!)
    }
    return failures
  }
  if (Array.isArray(b.details)) {
    for (const d of b.details as Array<{ field?: unknown, message?: unknown }>) {
      const m = typeof d.field === 'string' ? /^\[(\d+)\]\.?(.*)$/.exec(d.field) : null
      if (m !== null) failures.set(Number(m[1]), m[2] === '' ? String(d.message) : `${m[2]}: ${String(d.message)}`)
    }
  }
  const message = typeof b.message === 'string' ? b.message : `HTTP ${status}`
  for (let i = 0; i < size; i++) {
    if (!failures.has(i)) failures.set(i, `batch rejected: ${message}`)
  }
  return failures
}

/**
 * @example
 *   const r = await sendBatch('[{"type":"access_rules","action":"block","ip":"192.0.2.1"}]', 1, opts)
 *   // { kind: 'done', status: 200, failures: Map(0), retries: 0 }
 */
export async function sendBatch (body: string, size: number, opts: SendOptions): Promise<BatchResult> {
  // A negative attempt count would skip the loop and report nothing useful.
  if (opts.retry.attempts < 1) throw new RangeError('retry.attempts must be at least 1')
  const sleep = opts.sleep ?? sleepMs
  const random = opts.random ?? Math.random
  let last = ''
  for (let attempt = 0; attempt < opts.retry.attempts; attempt++) {
    let retryAfter: number | null = null
    try {
      const res = await fetch(opts.url, {
        method: 'POST',
        headers: { Authorization: `Bearer ${opts.key}`, 'Content-Type': 'application/json' },
        body,
        signal: AbortSignal.timeout(opts.timeoutMs),
      })
      const text = await res.text()
      const status = res.status
      if (status === 200 || status === 206 || status === 400) {
        const parsed = parseJson(text)
        return { kind: 'done', status, failures: status === 200 ? new Map() : readFailures(status, parsed, size), retries: attempt }
      }
      if (status !== 429 && status < 500) {
        const message = (parseJson(text) as { message?: unknown } | null)?.message
        return { kind: 'fatal', status, message: `HTTP ${status}${typeof message === 'string' ? `: ${message}` : ''}`, retries: attempt }
      }
      retryAfter = parseRetryAfter(res.headers.get('retry-after'))
      last = `HTTP ${status}`
    } catch (e) {
      last = (e as Error).cause instanceof Error ? `${(e as Error).message}: ${((e as Error).cause as Error).message}` : (e as Error).message
    }
    if (attempt + 1 < opts.retry.attempts) {
      opts.onRetry?.(last)
      await sleep(backoffMs(attempt, retryAfter, opts.retry, random))
    }
  }
  return { kind: 'fatal', status: 0, message: `gave up after ${opts.retry.attempts} attempts: ${last}`, retries: opts.retry.attempts - 1 }
}

function parseJson (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}
