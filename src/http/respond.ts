/**
 * The one place that writes error responses, and the small helpers every route uses to write JSON.
 *
 * uWebSockets.js rules followed here: a response is written only while the request is not
 * aborted, and corked so headers and body leave in one syscall. Inside uWS's request callback the
 * socket is corked already, so a write there goes straight out (`cork` would only add a crossing
 * into C++ and back); a write after an `await` is wrapped in `cork` (see `writeCorked`).
 */
import type { HttpResponse } from 'uWebSockets.js'
import { toThreatfeedError, type ThreatfeedError } from '../errors.js'
import { AUTH_CHALLENGES } from '../ingest/openapi.js'

const REASONS: Record<number, string> = {
  200: 'OK', 206: 'Partial Content', 304: 'Not Modified', 400: 'Bad Request', 401: 'Unauthorized',
  402: 'Payment Required', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed',
  409: 'Conflict', 413: 'Content Too Large', 429: 'Too Many Requests', 500: 'Internal Server Error',
  503: 'Service Unavailable',
}
const STATUS_LINES = new Map<number, string>(Object.entries(REASONS).map(([k, v]) => [Number(k), `${k} ${v}`]))

/** "200 OK" for 200: precomputed, since uWS wants the whole status line. */
export function statusLine (status: number): string {
  return STATUS_LINES.get(status) ?? String(status)
}

/** Per-request state shared by a handler and its onAborted callback. */
export interface Exchange {
  readonly res: HttpResponse
  /** A HEAD request: answers carry the headers (Content-Length included) of GET's, no body. */
  readonly head: boolean
  aborted: boolean
  /** Status written, for metrics and logs. */
  status: number
  /** Close the connection after the answer (set when a body was cut off at the cap). */
  closeAfter: boolean
  /** True while uWS's request callback runs: the socket is corked and the response may be written as is. */
  inCallback: boolean
  /** The whole answer has been handed to uWS (after which uWS refuses any use of `res`). */
  ended: boolean
  /** Called once if the client goes away (e.g. to fail a pending body read). */
  readonly abortListeners: Array<() => void>
}

/**
 * The Exchange of one request. `onAborted` is registered only for an answer that outlives uWS's
 * callback (`watchAbort`): a poll answered at once never needs it, and registering it costs a
 * crossing, a closure and a V8 global handle per request.
 */
class RequestExchange implements Exchange {
  readonly res: HttpResponse
  readonly head: boolean
  aborted = false
  status = 0
  closeAfter = false
  inCallback = true
  ended = false
  #listeners: Array<() => void> | null = null

  constructor (res: HttpResponse, head: boolean) {
    this.res = res
    this.head = head
  }

  get abortListeners (): Array<() => void> {
    return (this.#listeners ??= [])
  }

  onAbort (): void {
    this.aborted = true
    if (this.#listeners !== null) for (const f of this.#listeners) f()
  }
}

/** The exchange of a request, at the start of uWS's callback. Call `watchAbort` before returning from it. */
export function beginExchange (res: HttpResponse, head = false): Exchange {
  return new RequestExchange(res, head)
}

/**
 * At the end of uWS's request callback: an answer still pending must hear of an abort, and uWS
 * requires onAborted to be registered before its callback returns.
 */
export function watchAbort (ex: Exchange): void {
  ex.inCallback = false
  if (ex.ended || !(ex instanceof RequestExchange)) return
  ex.res.onAborted(() => { ex.onAbort() })
}

/**
 * Runs `write` corked: as is inside uWS's callback (corked already), in `cork` after an await.
 * `write` must end the response or leave it to onWritable; `ex.ended` is the caller's to set.
 */
export function writeCorked (ex: Exchange, write: () => void): void {
  if (ex.inCallback) write()
  else ex.res.cork(write)
}

export type Headers = ReadonlyArray<readonly [string, string]>

export function sendJson (ex: Exchange, status: number, body: unknown, headers: Headers = []): void {
  sendBody(ex, status, JSON.stringify(body), 'application/json', headers)
}

/**
 * Status, Content-Type, `headers` and the body; to HEAD, the same with the body's Content-Length
 * and no body (RFC 9110 §9.3.2), so the client does not read it as the next response.
 */
export function sendBody (ex: Exchange, status: number, body: string | Uint8Array, contentType: string, headers: Headers = []): void {
  if (ex.aborted) return
  ex.status = status
  ex.ended = true
  writeCorked(ex, () => {
    ex.res.writeStatus(statusLine(status))
    ex.res.writeHeader('Content-Type', contentType)
    for (const [k, v] of headers) ex.res.writeHeader(k, v)
    if (ex.head) {
      // As a header, not endWithoutBody(length): uWS 20.51 would then wait for that many body
      // bytes and the keep-alive connection dies (test/http/feed-head.test.ts).
      ex.res.writeHeader('Content-Length', String(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength))
      ex.res.endWithoutBody()
    } else {
      ex.res.end(body, ex.closeAfter)
    }
  })
}

/**
 * Error body shapes: the signal interface (SPEC 2.6), the feed interface (SPEC 2.9) and the
 * CrowdSec bouncer API (LAPI's `{"message": …}`, which go-cs-bouncer prints; docs/bouncers.md).
 */
export type ErrorShape = 'signal' | 'feed' | 'bouncer'

export interface ErrorReport {
  (error: ThreatfeedError): void
}

/**
 * The one function that writes an error answer, on every route and for every method (HEAD
 * included, without the body). Caller faults show their message; dependency and internal faults
 * are reported (with their cause) and answer with the registry's generic text.
 */
export function sendError (ex: Exchange, thrown: unknown, shape: ErrorShape, report: ErrorReport, extraHeaders: Headers = []): void {
  const a = errorAnswer(thrown, shape, report, extraHeaders)
  sendJson(ex, a.status, a.body, a.headers)
}

/** A JSON answer not yet written: what a handler hands back when its request may have come through a front-end thread's port (handover.ts). */
export interface JsonAnswer {
  readonly status: number
  readonly body: unknown
  readonly headers: Headers
}

/** sendError's answer, unwritten: the same status, headers and body wherever it is written. */
export function errorAnswer (thrown: unknown, shape: ErrorShape, report: ErrorReport, extraHeaders: Headers = []): JsonAnswer {
  const e = toThreatfeedError(thrown)
  if (e.fault !== 'caller') report(e)
  const headers: Array<readonly [string, string]> = [...extraHeaders]
  // The bouncer routes take the feed routes' credentials besides X-Api-Key.
  if (e.status === 401) headers.push(['WWW-Authenticate', AUTH_CHALLENGES[shape === 'bouncer' ? 'feed' : shape]])
  if (e.code === 'TF_ERR_FEED_HELD') headers.push(['X-Feed-Held', (e.details as { held: string }).held], ['Retry-After', String(HELD_RETRY_AFTER_S)])
  return { status: e.status, body: errorBody(e, shape), headers }
}

/**
 * A feed held before it ever published waits for an operator: asked again this often, a poller
 * sees the accepted build within seconds of it (the server publishes it within one).
 */
const HELD_RETRY_AFTER_S = 10

/** The error body of SPEC 2.6 (signal) or SPEC 2.9 (feed); only sendError writes it in src/http. */
export function errorBody (e: ThreatfeedError, shape: ErrorShape): unknown {
  // LAPI's ErrorResponse: `errors` is its free-text field, here the registry code.
  if (shape === 'bouncer') return { message: e.message, errors: e.code }
  if (shape === 'feed') {
    return { success: false, error: e.message, details: isPlainObject(e.details) ? e.details : {} }
  }
  const body: { error: string, message: string, details?: unknown, code: number } = { error: e.errorName, message: e.message, code: e.status }
  if (Array.isArray(e.details)) body.details = e.details
  return body
}

function isPlainObject (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
