/**
 * Writing feed answers: 200 (or 413) with its body, HEAD, and 304 (SPEC §4.3, DECISIONS §5).
 *
 * The snapshot builder lists every header of a representation (src/feed/snapshot-types.ts); this
 * file turns those lists into wire bytes once per variant of a snapshot, not per request (STYLE:
 * hot paths), cached against the Variant object, so a new snapshot naturally gets new blocks and
 * old ones go with it:
 *
 *   Variant ──WeakMap──► PreparedVariant { identity, gzip }
 *                          └─ PreparedRepresentation
 *                               full         status line + headers of GET               (one block)
 *                               head         the same + Content-Length                  (one block)
 *                               notModified  304 line + ETag, Last-Modified, Cache-Control, Vary
 *
 * A block goes out as the argument of ONE writeStatus call: uWS writes `HTTP/1.1 `, the argument
 * and CRLF into its output buffer verbatim, so `304 Not Modified\r\nETag: …\r\n…\r\nVary: …`
 * puts the status line and every header on the wire in one crossing into C++ (then
 * endWithoutBody or tryEnd: two in all, against one per header call by call), and as an
 * ArrayBuffer nothing is re-encoded to UTF-8 per request. Every value is ours (tags, dates, numbers,
 * fixed text; list names never reach a header), not request data, so no CR/LF can be smuggled
 * in; prepareVariant refuses one anyway. uWS adds Date (and Content-Length for a body).
 *
 * Inside uWS's request callback the socket is corked already, so a poll answered there is
 * written as is; only an answer after an await (a feed being built) is wrapped in `cork`.
 *
 * Bodies go out with tryEnd/onWritable: a 2 MB feed to a slow reader waits in our (shared,
 * immutable) snapshot buffer rather than being copied into a per-connection uWS buffer, so 256
 * slow pollers of a large feed cost no memory of their own.
 */
import { ThreatfeedError } from '../errors.js'
import type { HeaderList, Representation, Variant } from '../feed/snapshot-types.js'
import { sendError, writeCorked, type Exchange, type Headers } from './respond.js'
import { uwsBytes } from './uws-bytes.js'

/**
 * A status line and its headers as one writeStatus argument: `200 OK\r\nName: value…` (no final
 * CRLF), in an ArrayBuffer of its own, the form uWS reads cheapest (uws-bytes.ts).
 */
export type HeaderBlock = ArrayBuffer

export interface PreparedRepresentation {
  readonly etag: string
  /** What the body is read from, when it is written (read it only then: it may be fetched first, see `whenBody`). */
  readonly source: Representation
  /** The body's byte length. */
  readonly length: number
  readonly status: 200 | 413
  /** Status line and headers of a GET answer (Content-Length is added by uWS from the body). */
  readonly full: HeaderBlock
  /** The same plus the Content-Length of the body a GET would send (HEAD). */
  readonly head: HeaderBlock
  /** 304 line and headers; null for a 413, which conditionals never turn into a 304. */
  readonly notModified: HeaderBlock | null
  /** When a poll of it was last told to the feed side (FeedSource#notePoll): at most once a second. */
  notedAt: number
}

export interface PreparedVariant {
  readonly identity: PreparedRepresentation
  readonly gzip: PreparedRepresentation
}

const STATUS_200 = '200 OK'
const STATUS_304 = '304 Not Modified'
const STATUS_413 = '413 Content Too Large'
const CONNECTION = uwsBytes('Connection')
const CLOSE = uwsBytes('close')
const CRLF = /[\r\n]/
const CLOSE_HEADERS: Headers = [['Connection', 'close']]

const prepared = new WeakMap<Variant, PreparedVariant>()

function toBlock (status: string, headers: HeaderList): HeaderBlock {
  if (headers.length === 0) throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error('a feed representation has no headers') })
  let text = status
  for (const [name, value] of headers) {
    if (CRLF.test(name) || CRLF.test(value)) throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error(`header ${JSON.stringify(name)} holds a line break`) })
    text += `\r\n${name}: ${value}`
  }
  return uwsBytes(text)
}

function prepareRepresentation (variant: Variant, rep: Representation): PreparedRepresentation {
  const status = variant.status === 200 ? STATUS_200 : STATUS_413
  // The length without the body where it is given: a 304 or a HEAD never waits for the bytes.
  const length = rep.length ?? rep.body.byteLength
  return {
    etag: rep.etag,
    source: rep,
    length,
    status: variant.status,
    full: toBlock(status, rep.headers),
    head: toBlock(status, [...rep.headers, ['Content-Length', String(length)]]),
    notModified: variant.status === 200 && rep.notModifiedHeaders.length > 0 ? toBlock(STATUS_304, rep.notModifiedHeaders) : null,
    notedAt: -Infinity,
  }
}

/**
 * The prepared wire form of a variant, built on first use and kept as long as the variant is.
 *
 * @example
 *   const rep = prepareVariant(variant)[gzip ? 'gzip' : 'identity']
 */
export function prepareVariant (variant: Variant): PreparedVariant {
  let p = prepared.get(variant)
  if (p === undefined) {
    p = { identity: prepareRepresentation(variant, variant.identity), gzip: prepareRepresentation(variant, variant.gzip) }
    prepared.set(variant, p)
  }
  return p
}

/**
 * True when uWS is going to close the connection after this answer, so the answer must say
 * `Connection: close` (RFC 9112 §9.6; clients that pool connections, wrk among them, count a
 * silent close as a failed read). uWS 20.51 closes after any request whose Connection value is
 * exactly five characters long — meant as `close`, in any case — and keeps every other connection
 * open, including the list form `keep-alive, close` (a uWS limitation: it offers no way to close
 * after endWithoutBody, whose closeConnection flag aborts the process). Mirroring that rule keeps
 * the header truthful; test/http/feed-write.test.ts pins the behaviour.
 *
 * @example
 *   closesAfter('close')      // true
 *   closesAfter('keep-alive') // false
 */
export function closesAfter (connection: string): boolean {
  return connection.length === 5
}

/**
 * 304: ETag, Last-Modified, Cache-Control, Vary (and Date from uWS), no body and no
 * Content-Length (RFC 9110 §15.4.5). One corked write.
 */
export function writeNotModified (ex: Exchange, block: HeaderBlock, close: boolean): void {
  if (ex.aborted) return
  ex.status = 304
  ex.ended = true
  const res = ex.res
  // The poll's steady state: no closure, no cork (uWS's callback has corked the socket).
  if (ex.inCallback) {
    res.writeStatus(block)
    if (close) res.writeHeader(CONNECTION, CLOSE)
    res.endWithoutBody()
    return
  }
  res.cork(() => {
    res.writeStatus(block)
    if (close) res.writeHeader(CONNECTION, CLOSE)
    res.endWithoutBody()
  })
}

/**
 * HEAD: the GET headers with the Content-Length GET would send, and no body.
 *
 * Content-Length is written as a header rather than through `endWithoutBody(length)`: in uWS
 * 20.51 that call leaves the response waiting for `length` body bytes, so the keep-alive
 * connection dies (tested in test/http/feed-head.test.ts).
 */
export function writeHead (ex: Exchange, rep: PreparedRepresentation, close: boolean): void {
  if (ex.aborted) return
  ex.status = rep.status
  ex.ended = true
  const res = ex.res
  writeCorked(ex, () => {
    res.writeStatus(rep.head)
    if (close) res.writeHeader(CONNECTION, CLOSE)
    res.endWithoutBody()
  })
}

/**
 * GET: status, headers and body. Returns a promise only when the body is still being fetched (a
 * front-end thread's first answer from a variant: `Representation.whenBody`) or the socket pushed
 * back; it settles when the last byte is handed to the kernel or the client goes away (so the
 * router's in-flight count and latency cover the whole transfer).
 */
export function writeBody (ex: Exchange, rep: PreparedRepresentation, close: boolean): Promise<void> | undefined {
  if (ex.aborted) return undefined
  const loading = rep.source.whenBody?.() ?? null
  if (loading !== null) return loading.then(() => writeBody(ex, rep, close))
  ex.status = rep.status
  const res = ex.res
  const body = rep.source.body
  const total = body.byteLength
  let pending: Promise<void> | undefined
  writeCorked(ex, () => {
    res.writeStatus(rep.full)
    if (close) res.writeHeader(CONNECTION, CLOSE)
    const [ok, done] = res.tryEnd(body, total)
    if (ok || done) {
      ex.ended = true
      return
    }
    pending = new Promise<void>((resolve) => {
      ex.abortListeners.push(resolve)
      res.onWritable((offset) => {
        // offset counts body bytes written so far (from 0: headers are not counted); resume
        // from there, without copying.
        const [more, finished] = res.tryEnd(body.subarray(offset), total)
        if (finished) resolve()
        return more
      })
    })
  })
  return pending
}

/**
 * An error answer to HEAD: the status and headers of the feed error GET would send (SPEC 2.9),
 * with its Content-Length and no body, written by the one error writer (respond.ts), which
 * leaves the body out for a HEAD exchange.
 */
export function writeHeadError (ex: Exchange, e: ThreatfeedError, close: boolean): void {
  sendError(ex, e, 'feed', () => {}, close ? CLOSE_HEADERS : [])
}
