/**
 * A front-end thread hands every request it does not answer itself (explain, health, readiness,
 * metrics, the OpenAPI document, unknown paths, the methods a signal route refuses) to the main
 * thread, which answers it with its own routes: one rate limiter per key, one /metrics for the
 * process (README "Architecture"). Signals go over a MessagePort instead (handover.ts).
 *
 *   client ──► thread's uWS app ──► forward(): request line, headers, body
 *                                     ──► main thread's internal listener (127.0.0.1, a token header)
 *              ◄── status, headers, body ◄──
 *
 * The internal listener is a plain uWS app on loopback with the same routes; a request without
 * the process's token (another local program) is refused there. TLS and its client-certificate
 * check stay on the thread that took the connection (the router's gate runs before this).
 */
import { Agent, request, type IncomingHttpHeaders } from 'node:http'
import type { HttpRequest, HttpResponse } from 'uWebSockets.js'
import { ThreatfeedError } from '../errors.js'
import { readBody } from './body.js'
import { asLatin1Bytes } from './request-target.js'
import { statusLine, writeCorked, type Exchange } from './respond.js'

/** The header a front-end thread's forwarded request carries; its value is a secret of the process. */
export const THREAD_TOKEN_HEADER = 'x-threatfeed-thread'

/** Hop-by-hop and framing headers: each leg sets its own (RFC 9110 §7.6.1); uWS writes Date and Content-Length. */
/**
 * The client's address as the forwarding thread resolved it (THREATFEED_TRUSTED_PROXIES
 * applied): the main thread reads it only on a request that came through its internal listener
 * with the thread token (isForwarded), so no client can set it. The bouncer cursors are per
 * address (bouncer-routes.ts): without it every forwarded pull would be 127.0.0.1's.
 */
export const CLIENT_ADDRESS_HEADER = 'x-threatfeed-client-address'
const forwardedResponses = new WeakSet<HttpResponse>()

/** Marks a response of the internal listener (the thread token checked): its request's CLIENT_ADDRESS_HEADER is ours. */
export function markForwarded (res: HttpResponse): void {
  forwardedResponses.add(res)
}

export function isForwarded (res: HttpResponse): boolean {
  return forwardedResponses.has(res)
}

const NOT_FORWARDED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'te', 'upgrade', 'proxy-connection', 'expect', THREAD_TOKEN_HEADER, CLIENT_ADDRESS_HEADER])
const NOT_RETURNED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date'])

export interface ForwardTarget {
  readonly port: number
  readonly token: string
  /** The main thread's body cap (THREATFEED_MAX_BODY_BYTES): a larger body is refused here as there. */
  readonly maxBodyBytes: number
  /** The client's address as this thread resolves it (sent as CLIENT_ADDRESS_HEADER). */
  readonly clientAddress?: (res: HttpResponse, req: HttpRequest) => string
}

/** The forwarding handler of one front-end thread (a Router handler, see app.ts). */
export function forwarder (target: ForwardTarget): { handle: (ex: Exchange, req: HttpRequest) => Promise<void>, close: () => void } {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 })
  const handle = async (ex: Exchange, req: HttpRequest): Promise<void> => {
    // Everything is copied out of `req` before the first await (it is invalid after).
    const method = req.getCaseSensitiveMethod()
    const query = req.getQuery()
    // As bytes (request-target.ts): node:http throws on a character above U+00FF — a raw byte
    // uWS decoded — and the main thread is to see the request as this thread did.
    const path = asLatin1Bytes(req.getUrl() + (query === undefined || query === '' ? '' : `?${query}`))
    const headers: Record<string, string> = {}
    req.forEach((name, value) => {
      if (NOT_FORWARDED.has(name)) return
      const v = asLatin1Bytes(value)
      headers[name] = headers[name] === undefined ? v : `${headers[name]}, ${v}`
    })
    if (target.clientAddress !== undefined) headers[CLIENT_ADDRESS_HEADER] = target.clientAddress(ex.res, req)
    const lower = method.toLowerCase()
    const body = lower === 'get' || lower === 'head' ? null : await readBody(ex, target.maxBodyBytes)
    if (ex.aborted) return
    headers[THREAD_TOKEN_HEADER] = target.token
    headers['content-length'] = String(body?.byteLength ?? 0)
    const answer = await new Promise<{ status: number, headers: IncomingHttpHeaders, body: Buffer }>((resolve, reject) => {
      const r = request({ host: '127.0.0.1', port: target.port, method, path, headers, agent }, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => { chunks.push(c) })
        res.on('end', () => { resolve({ status: res.statusCode ?? 500, headers: res.headers, body: Buffer.concat(chunks) }) })
        res.on('error', reject)
      })
      r.on('error', (e) => { reject(new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: e })) })
      r.end(body ?? undefined)
    })
    if (ex.aborted) return
    ex.status = answer.status
    writeCorked(ex, () => {
      const res = ex.res
      res.writeStatus(statusLine(answer.status))
      for (const [name, value] of Object.entries(answer.headers)) {
        if (value === undefined || NOT_RETURNED.has(name)) continue
        for (const v of Array.isArray(value) ? value : [value]) res.writeHeader(name, v)
      }
      if (ex.head) {
        // The main thread's HEAD answer names the length GET would send (respond.ts sendBody).
        const length = answer.headers['content-length']
        if (length !== undefined) res.writeHeader('Content-Length', length)
        res.endWithoutBody()
      } else {
        res.end(answer.body)
      }
      ex.ended = true
    })
  }
  return { handle, close: () => { agent.destroy() } }
}
