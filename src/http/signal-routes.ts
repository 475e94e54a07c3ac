/**
 * POST /v1/signal and POST /v2/signal (SPEC 4.1, 4.2, §5, 7.1; DECISIONS §2, §3).
 *
 * Order of decisions, cheapest and least revealing first: authentication (401/402/403, v2: 401
 * only) → rate limit per key, and the consumer's backlog (429 + Retry-After) → Content-Type → body read under the byte cap →
 * the batch itself (src/ingest/batch.ts). Nothing of the body is read for a caller that is not
 * allowed in. Every other method answers 405 with `Allow: POST`.
 */
import type { HttpRequest } from 'uWebSockets.js'
import { ThreatfeedError } from '../errors.js'
import type { ApiVersion, SignalIngester } from '../ingest/batch.js'
import { checkContentType } from '../ingest/parse-body.js'
import type { HttpContext, RouteModule } from './app.js'
import { readBody } from './body.js'
import { sendError, sendJson, type Exchange } from './respond.js'

export interface SignalRouteDeps {
  readonly ingester: SignalIngester
  /**
   * Accepted records not yet applied to the rule stores (StreamConsumer#backlog). Above
   * `maxBacklog` new batches get 429 + Retry-After: 1, so that a client faster than the consumer
   * is slowed to its pace and an acknowledged entry still shows within 1 s (DECISIONS §3).
   */
  readonly backlog?: () => number
  /**
   * Default 50 000 records: under half a second of applying on the bench machine (the consumer
   * applies 115–135k records/s, bench/ingest.ts), so read-your-writes within 1 s holds, while 16
   * full batches in flight (16 000 records accepted before a pass runs) do not trip it: at 20 000
   * they did, 80 times in 200 batches, and the 1-second Retry-After cut throughput to 31k/s.
   */
  readonly maxBacklog?: number
}

export const DEFAULT_MAX_BACKLOG = 50_000

/**
 * @example
 *   await startHttpServer(ctx, [signalRoutes({ ingester }), openapiRoutes(buildOpenApiDocument())])
 */
export function signalRoutes (deps: SignalRouteDeps): RouteModule {
  return (router, ctx) => {
    for (const api of ['v1', 'v2'] as const) {
      const pattern = `/${api}/signal`
      const route = `signal_${api}`
      router.on('post', pattern, route, 'signal', (ex, req) => handleSignal(ctx, deps, api, ex, req))
      router.onlyAllow(pattern, route, 'signal', 'POST')
    }
  }
}

async function handleSignal (ctx: HttpContext, deps: SignalRouteDeps, api: ApiVersion, ex: Exchange, req: HttpRequest): Promise<void> {
  // uWS: the request object is only valid until the first await.
  const authorization = req.getHeader('authorization')
  const contentType = req.getHeader('content-type')

  const decision = ctx.auth.authenticate(authorization, 'signals:write', api)
  // Answering before the body is read is safe: uWS skips the unread body, it is never taken for
  // the next request on the connection (test/http/signal-auth.test.ts).
  if (!decision.ok) throw decision.error
  let wait = ctx.rateLimiter.take(decision.principal.key.id)
  if (wait === 0 && deps.backlog !== undefined && deps.backlog() > (deps.maxBacklog ?? DEFAULT_MAX_BACKLOG)) wait = 1
  if (wait > 0) {
    const e = new ThreatfeedError('TF_ERR_RATE_LIMITED', [wait])
    sendError(ex, e, 'signal', () => {}, [['Retry-After', String(wait)]])
    return
  }
  checkContentType(contentType)
  let body: Buffer
  try {
    body = await readBody(ex, ctx.config.maxBodyBytes)
  } catch (e) {
    if (ex.aborted) return // the client went away: nobody to answer, nothing to report
    throw e
  }
  const outcome = await deps.ingester.ingest(api, decision.principal.workspace.id, body)
  sendJson(ex, outcome.status, outcome.body)
}
