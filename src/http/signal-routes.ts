/**
 * POST /v1/signal and POST /v2/signal (SPEC 4.1, 4.2, §5, 7.1; DECISIONS §2, §3).
 *
 * Order of decisions, cheapest and least revealing first: authentication (401/402/403, v2: 401
 * only) → rate limit per key (429 + Retry-After) → Content-Type → body read under the byte cap,
 * meanwhile room in the consumer's backlog (a wait, then 429 + Retry-After) → the batch itself
 * (src/ingest/batch.ts). Nothing of the body is read for a caller that is not
 * allowed in. Every other method answers 405 with `Allow: POST`.
 *
 * The routes are portable (handover.ts): with front-end threads, a thread reads the body and
 * hands the request over to the main thread, where this same handler answers it.
 */
import { ThreatfeedError } from '../errors.js'
import type { ApiVersion, SignalIngester } from '../ingest/batch.js'
import { checkContentType } from '../ingest/parse-body.js'
import type { HttpContext, RouteModule } from './app.js'
import type { PortableRequest } from './handover.js'
import { errorAnswer, type JsonAnswer } from './respond.js'
import type { Consumer } from '../stream/consumer.js'

export interface SignalRouteDeps {
  readonly ingester: SignalIngester
  /**
   * The consumer applying what is accepted. While more than `maxBacklog` accepted records wait
   * for it, a new batch waits for room — up to `admissionWaitMs`, its body read meanwhile — and is
   * answered 429 + Retry-After: 1 only if none came: a fast client is slowed to the consumer's
   * pace instead of losing a second per refusal (bench/NOTES.md, "Ingest: admission wait").
   */
  readonly consumer?: Pick<Consumer, 'backlog' | 'position' | 'waitFor'>
  /**
   * Default 50 000 records: under half a second of applying, so read-your-writes within 1 s holds,
   * and above what 16 full batches in flight leave waiting (bench/NOTES.md, "Ingest: backlog bound").
   */
  readonly maxBacklog?: number
  /** How long a batch waits for the backlog to fall below `maxBacklog` (default 1000 ms). */
  readonly admissionWaitMs?: number
}

export const DEFAULT_MAX_BACKLOG = 50_000
export const DEFAULT_ADMISSION_WAIT_MS = 1000

/**
 * @example
 *   await startHttpServer(ctx, [signalRoutes({ ingester }), openapiRoutes(buildOpenApiDocument())])
 */
export function signalRoutes (deps: SignalRouteDeps): RouteModule {
  return (router, ctx) => {
    for (const api of ['v1', 'v2'] as const) {
      const pattern = `/${api}/signal`
      const route = `signal_${api}`
      router.portable(pattern, route, 'signal', SIGNAL_HEADERS, (request) => handleSignal(ctx, deps, api, request))
      router.onlyAllow(pattern, route, 'signal', 'POST')
    }
  }
}

/** What the handler reads of a request's headers: a front-end thread hands over these alone. */
const SIGNAL_HEADERS = ['authorization', 'content-type', 'idempotency-key', 'x-api-key'] as const

async function handleSignal (ctx: HttpContext, deps: SignalRouteDeps, api: ApiVersion, request: PortableRequest): Promise<JsonAnswer | null> {
  const authorization = request.headers.authorization!
  const contentType = request.headers['content-type']!

  let decision = ctx.auth.authenticate(authorization, 'signals:write', api)
  let early: Promise<Buffer> | null = null
  if (!decision.ok && decision.unknownKey === true) {
    // A key this node may not know yet: reload before answering 401. The body is read meanwhile,
    // or uWS would drop what arrives before a reader is attached.
    early = request.body()
    early.catch(() => {})
    decision = await ctx.auth.authenticateFresh(authorization, 'signals:write', api)
  }
  // Answering before the body is read is safe: uWS skips the unread body, it is never taken for
  // the next request on the connection (test/http/signal-auth.test.ts).
  if (!decision.ok) throw wrongForm(decision.error, authorization, request.headers['x-api-key']!) ?? decision.error
  const wait = ctx.rateLimiter.take(decision.principal.key.id)
  if (wait > 0) return tooManyRequests(wait)
  checkContentType(contentType)
  // Read from now on (uWS drops body data that arrives before a reader is attached), while the
  // batch waits for room in the backlog.
  const reading = early ?? request.body()
  // The body may fail (over the cap, the client gone) while nothing awaits it yet: handled here,
  // or the rejection would be unhandled and end the process. It still reaches `await reading`.
  reading.catch(() => {})
  if (!await roomInBacklog(deps)) {
    return request.aborted ? null : tooManyRequests(1) // the rest of the body is skipped
  }
  let body: Buffer
  try {
    body = await reading
  } catch (e) {
    if (request.aborted) return null // the client went away: nobody to answer, nothing to report
    throw e
  }
  // The key's id goes with the batch's diagnostics (/v1/admin/batches); the key itself never does.
  // Idempotency-Key (docs/signals.md): a retry of a stored batch gets its first answer again.
  const outcome = await deps.ingester.ingest(api, decision.principal.workspace.id, body, decision.principal.key.id, request.headers['idempotency-key'])
  return { status: outcome.status, body: outcome.body, headers: [] }
}

/** Leading characters of a Basic Authorization header (the scheme is case-insensitive, RFC 9110 §11.1). */
const BASIC_SCHEME = /^basic[ \t]/i

/**
 * A 401 that says which form of the key the signal routes take, when the request used another:
 * Basic credentials (the feed routes' second form) or an X-API-Key header (read nowhere). Said
 * whether or not the key is valid, so the answer tells nothing about the key.
 */
function wrongForm (error: ThreatfeedError, authorization: string, apiKeyHeader: string): ThreatfeedError | null {
  if (error.code !== 'TF_ERR_UNAUTHORIZED') return null
  if (BASIC_SCHEME.test(authorization)) return new ThreatfeedError('TF_ERR_UNAUTHORIZED_FORM', ['Basic credentials are taken by the feed routes only; send Authorization: Bearer <API key>'])
  if (authorization === '' && apiKeyHeader !== '') return new ThreatfeedError('TF_ERR_UNAUTHORIZED_FORM', ['X-API-Key is not read; send Authorization: Bearer <API key>'])
  return null
}

/** True at once when the backlog is under the limit; else once it falls under it, false after the wait. */
function roomInBacklog (deps: SignalRouteDeps): boolean | Promise<boolean> {
  const consumer = deps.consumer
  if (consumer === undefined) return true
  const max = deps.maxBacklog ?? DEFAULT_MAX_BACKLOG
  const backlog = consumer.backlog
  if (backlog <= max) return true
  return consumer.waitFor(consumer.position + backlog - max, deps.admissionWaitMs ?? DEFAULT_ADMISSION_WAIT_MS)
}

function tooManyRequests (seconds: number): JsonAnswer {
  return errorAnswer(new ThreatfeedError('TF_ERR_RATE_LIMITED', [seconds]), 'signal', () => {}, [['Retry-After', String(seconds)]])
}
