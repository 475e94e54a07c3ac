/**
 * Routes a front-end thread hands over to the main thread through a MessagePort instead of
 * forwarding them over loopback HTTP (forward.ts): the signal routes, whose one writer is the
 * main thread. A handed-over request costs the thread a body read and a postMessage, and the main
 * thread no HTTP parse, no socket and no second copy of the body.
 *
 *   front-end thread                                      main thread
 *   ────────────────                                      ───────────
 *   uWS POST /v1/signal ─ body read under the cap ─┐
 *     headers the route names, the body's          └─► HandOverRequest ─► the route's PortableHandler
 *     ArrayBuffer (transferred, not copied)                               (the same function that
 *                                                                         answers the main thread's
 *   sendJson, corked, unless aborted ◄──────────────── HandOverAnswer ◄── own sockets: portableRequest)
 *
 * The thread puts no deadline of its own on the answer: whether a batch is written is decided on
 * the main thread, once, by its commit gate (store/commit-gate.ts), which answers 500 at the
 * append deadline when the commit has not started and never writes it afterwards. A timer here
 * could answer 500 for a batch that the main thread commits a moment later (DECISIONS §3).
 */
import type { MessagePort } from 'node:worker_threads'
import type { HttpRequest } from 'uWebSockets.js'
import { ThreatfeedError } from '../errors.js'
import { bodyTooLarge, readBody } from './body.js'
import { sendBody, type Exchange, type Headers, type JsonAnswer } from './respond.js'

/** What a portable handler reads of its request: the same from a socket and from a port. */
export interface PortableRequest {
  /** The headers the route named (lowercase names), '' for one the request did not carry. */
  readonly headers: Readonly<Record<string, string>>
  /** Starts reading the body (at most once per request); rejects over the cap or when the client goes away. */
  body (): Promise<Buffer>
  /** True once the client has gone away (a handed-over request: its thread drops the answer instead). */
  readonly aborted: boolean
}

/** Resolves with the answer, or null when there is nobody to answer (the client went away). */
export type PortableHandler = (request: PortableRequest) => Promise<JsonAnswer | null>

/** A POST route the front-end threads hand over: its pattern and the headers its handler reads. */
export interface HandOverRoute {
  readonly pattern: string
  readonly headers: readonly string[]
}

/** Posted by a front-end thread: one request of a HandOverRoute. */
export interface HandOverRequest {
  readonly id: number
  readonly pattern: string
  readonly headers: Readonly<Record<string, string>>
  /**
   * The body, transferred; null when it passed the cap (the thread stopped reading it): the
   * handler then meets the cap where it reads the body, after the checks it makes first, as
   * with a socket of its own (a batch waiting for room in the backlog is still answered 429).
   */
  readonly body: ArrayBuffer | null
}

/** Posted back by the main thread: what sendJson writes. */
export interface HandOverAnswer {
  readonly id: number
  readonly status: number
  readonly headers: Headers
  /** The JSON text of the body. */
  readonly body: string
}

/** A request on one of this thread's own sockets, as a portable handler reads it. */
export function portableRequest (ex: Exchange, req: HttpRequest, names: readonly string[], maxBodyBytes: number): PortableRequest {
  // uWS: the request object is only valid until the first await.
  return {
    headers: copyHeaders(req, names),
    body: () => readBody(ex, maxBodyBytes),
    get aborted () { return ex.aborted },
  }
}

/** A request a front-end thread handed over: its body is read already and its client is the thread's to watch. */
export function handedOverRequest (m: HandOverRequest, maxBodyBytes: number): PortableRequest {
  const body = m.body === null ? null : Buffer.from(m.body)
  return {
    headers: m.headers,
    body: () => body === null ? Promise.reject(bodyTooLarge(maxBodyBytes)) : Promise.resolve(body),
    aborted: false,
  }
}

function copyHeaders (req: HttpRequest, names: readonly string[]): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const name of names) headers[name] = req.getHeader(name)
  return headers
}

/** The body as an ArrayBuffer that may be transferred: its own buffer, or a copy of a slice of a shared one (Buffer's pool). */
function ownBuffer (body: Buffer): ArrayBuffer {
  const buffer = body.buffer as ArrayBuffer
  if (body.byteOffset === 0 && body.byteLength === buffer.byteLength) return buffer
  return buffer.slice(body.byteOffset, body.byteOffset + body.byteLength)
}

/**
 * A front-end thread's side: one handler per HandOverRoute, each reading the body and asking the
 * main thread over `port`. The answer is written as the main thread would write it (sendJson).
 */
export class HandOverClient {
  readonly #port: MessagePort
  readonly #maxBodyBytes: number
  readonly #pending = new Map<number, (answer: HandOverAnswer) => void>()
  #nextId = 0
  #closed = false

  constructor (port: MessagePort, maxBodyBytes: number) {
    this.#port = port
    this.#maxBodyBytes = maxBodyBytes
    port.on('message', (a: HandOverAnswer) => {
      const resolve = this.#pending.get(a.id)
      this.#pending.delete(a.id)
      resolve?.(a)
    })
  }

  /** The Router handler of `route` on this thread. */
  handler (route: HandOverRoute): (ex: Exchange, req: HttpRequest) => Promise<void> {
    return async (ex, req) => {
      const headers = copyHeaders(req, route.headers)
      let body: Buffer | null
      try {
        body = await readBody(ex, this.#maxBodyBytes)
      } catch {
        if (ex.aborted) return // the client went away: nobody to answer, nothing to report
        // Else over the cap (readBody's one other refusal): the handler decides what to answer,
        // and the connection is closed after it (readBody set closeAfter).
        body = null
      }
      const answer = await this.#ask(route.pattern, headers, body)
      // The main thread's JSON text, written as sendJson writes it: nothing to an aborted request,
      // corked after an await.
      sendBody(ex, answer.status, answer.body, 'application/json', answer.headers)
    }
  }

  #ask (pattern: string, headers: Record<string, string>, body: Buffer | null): Promise<HandOverAnswer> {
    if (this.#closed) return Promise.reject(new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error('the hand-over port is closed') }))
    const id = this.#nextId++
    const buffer = body === null ? null : ownBuffer(body)
    return new Promise((resolve) => {
      this.#pending.set(id, resolve)
      this.#port.postMessage({ id, pattern, headers, body: buffer } satisfies HandOverRequest, buffer === null ? [] : [buffer])
    })
  }

  close (): void {
    this.#closed = true
    this.#port.close()
  }
}

/**
 * The main thread's side of one thread's port: each request answered by `answer` (app.ts: the
 * route's handler with the router's metrics, error mapping and drain), posted back. `answer`
 * never rejects: a request left unanswered would hold its thread's client until it gives up.
 */
export function serveHandOvers (port: MessagePort, answer: (m: HandOverRequest) => Promise<JsonAnswer>): void {
  port.on('message', (m: HandOverRequest) => {
    void answer(m).then((a) => {
      port.postMessage({ id: m.id, status: a.status, headers: a.headers, body: JSON.stringify(a.body) } satisfies HandOverAnswer)
    })
  })
}
