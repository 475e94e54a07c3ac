/**
 * The floor of any uWebSockets.js front end: a bare uWS app that answers every request the way
 * threatfeed would — a 304 with threatfeed's status line and headers when the request carries
 * If-None-Match, otherwise the 200 body (gzip when Accept-Encoding asks for it) with threatfeed's
 * 200 headers — and does nothing else: no authentication, no ETag compare, no routing, no metrics.
 * It says `Connection: close` when uWS will close, as threatfeed does. A 200 body goes out as
 * threatfeed's does, with tryEnd and onWritable from one shared buffer (no per-connection copy).
 *
 * It writes the cheapest way uWebSockets.js allows, a way open to any front end on it: the status
 * line and every header as one prebuilt byte buffer passed to a single writeStatus (uWS copies it
 * verbatim after `HTTP/1.1 `), then endWithoutBody or tryEnd — two crossings into C++ per answer —
 * and no cork, since uWS corks the socket around its request callback already. So what it costs
 * per request is uWS's own HTTP parsing, its call into JS and the three header reads that decide
 * the answer (names and block as ArrayBuffers, the argument uWS reads cheapest), plus the
 * kernel's socket work; no application on uWS can answer for less.
 * With FLOOR_CALLS=1 it writes call by call instead — the status, then one writeHeader per
 * header, inside cork — what the floor was before (bench/NOTES.md, "Feeds: the poll path").
 * With FLOOR_ADDRESS=1 it also reads the peer's address per request (res.getRemoteAddress), as
 * consumer tracking must (issue 20): what that read alone costs any uWS front end.
 * With FLOOR_READS=1 it reads what any front end of a feed poll must read before it may answer
 * (SPEC: every poll is authenticated, its query names the variant, and the ETag it compares is
 * the chosen encoding's): the Authorization header, compared with the one key
 * (FLOOR_AUTH), the query string, Accept-Encoding and If-None-Match, compared with that
 * encoding's ETag (FLOOR_TAGS), and Connection — the reads threatfeed makes for a 304, with
 * none of its work behind them (no key lookup, no parsing, no snapshot).
 * Prints `READY <port>`.
 *
 * Usage: FLOOR_HEADERS='{"304":[["ETag","…"],…],"identity":[…],"gzip":[…]}'
 *        FLOOR_BODIES=<dir with feed.txt and feed.txt.gz> PORT=… node bench/feeds/serve-uws-floor.ts
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import uWS from 'uWebSockets.js'

// Without the `uWebSockets: 20` mark, as threatfeed (src/http/uws.ts): the same answer bytes.
(uWS as unknown as { _cfg: (setting: string) => void })._cfg('silent')

type Pairs = Array<[string, string]>
const headers = JSON.parse(process.env.FLOOR_HEADERS ?? '{}') as { '304'?: Pairs, identity?: Pairs, gzip?: Pairs }
const dir = process.env.FLOOR_BODIES ?? ''
const bodies = dir === '' ? null : { identity: readFileSync(join(dir, 'feed.txt')), gzip: readFileSync(join(dir, 'feed.txt.gz')) }

/**
 * Latin-1 text as an ArrayBuffer of its own: the argument uWS reads cheapest (a string it
 * converts to UTF-8 per call, a Buffer it must resolve to its buffer first; src/http/uws-bytes.ts).
 */
function bytes (text: string): ArrayBuffer {
  return Uint8Array.from(Buffer.from(text, 'latin1')).buffer
}

/** `304 Not Modified\r\nETag: …\r\n…`: the argument of the one writeStatus call. */
function block (status: string, pairs: Pairs): ArrayBuffer {
  let text = status
  for (const [name, value] of pairs) text += `\r\n${name}: ${value}`
  return bytes(text)
}

const blocks = {
  304: block('304 Not Modified', headers['304'] ?? []),
  identity: block('200 OK', headers.identity ?? []),
  gzip: block('200 OK', headers.gzip ?? []),
}
const ADDRESS = process.env.FLOOR_ADDRESS === '1'
const READS = process.env.FLOOR_READS === '1'
const AUTH = process.env.FLOOR_AUTH ?? ''
const TAGS = JSON.parse(process.env.FLOOR_TAGS ?? '{"identity":"","gzip":""}') as { identity: string, gzip: string }
const UNAUTHORIZED = block('401 Unauthorized', [])
/** Keeps the address reads observable, so no engine can drop them. */
let addressBytes = 0
/** Likewise for the query strings read. */
let queryBytes = 0
const CONNECTION = bytes('Connection')
const CLOSE = bytes('close')
// The header names read, in the same cheapest form.
const AUTHORIZATION = bytes('authorization')
const IF_NONE_MATCH = bytes('if-none-match')
const ACCEPT_ENCODING = bytes('accept-encoding')
const CONNECTION_NAME = bytes('connection')

/**
 * Sends `body`, waiting for the socket to drain whenever it fills. Only a body still going out
 * needs to hear of an abort, so only then is onAborted registered (a 304 costs no more than it must).
 */
function send (res: uWS.HttpResponse, body: Buffer): void {
  const [ok, done] = res.tryEnd(body, body.length)
  if (ok || done) return
  let aborted = false
  res.onAborted(() => { aborted = true })
  res.onWritable((offset) => {
    if (aborted) return true
    // offset counts body bytes written so far (from 0: headers are not counted); resume from
    // there, without copying.
    const [more] = res.tryEnd(body.subarray(offset), body.length)
    return more
  })
}

/** The floor: one writeStatus with the prebuilt block, no cork (uWS's callback corks the socket). */
function oneBlock (res: uWS.HttpResponse, req: uWS.HttpRequest): void {
  // uWS closes after a request whose Connection value is five characters long; the answer then
  // says so, as threatfeed's does (src/http/feed-write.ts closesAfter).
  const close = req.getHeader(CONNECTION_NAME).length === 5
  const conditional = req.getHeader(IF_NONE_MATCH) !== ''
  const kind = conditional ? '304' : req.getHeader(ACCEPT_ENCODING).includes('gzip') ? 'gzip' : 'identity'
  if (ADDRESS) addressBytes += res.getRemoteAddress().byteLength
  res.writeStatus(blocks[kind])
  if (close) res.writeHeader(CONNECTION, CLOSE)
  if (kind === '304' || bodies === null) res.endWithoutBody()
  else send(res, bodies[kind])
}

/**
 * The floor with the reads a feed poll must make (FLOOR_READS=1): the same one-block answer,
 * decided by comparing the key and the chosen encoding's ETag. The query is read and kept
 * observable (its length), as a front end must read it to know the variant asked for.
 */
function withReads (res: uWS.HttpResponse, req: uWS.HttpRequest): void {
  const authorized = req.getHeader(AUTHORIZATION) === AUTH
  const ifNoneMatch = req.getHeader(IF_NONE_MATCH)
  queryBytes += (req.getQuery() ?? '').length
  const gzip = req.getHeader(ACCEPT_ENCODING).includes('gzip')
  const close = req.getHeader(CONNECTION_NAME).length === 5
  const kind = !authorized ? null : ifNoneMatch === (gzip ? TAGS.gzip : TAGS.identity) ? '304' : gzip ? 'gzip' : 'identity'
  res.writeStatus(kind === null ? UNAUTHORIZED : blocks[kind])
  if (close) res.writeHeader(CONNECTION, CLOSE)
  if (kind === null || kind === '304' || bodies === null) res.endWithoutBody()
  else send(res, bodies[kind])
}

/** The same answer written call by call: the status, one writeHeader per header, inside cork. */
function callByCall (res: uWS.HttpResponse, req: uWS.HttpRequest): void {
  const close = req.getHeader('connection').length === 5
  const conditional = req.getHeader('if-none-match') !== ''
  const kind = conditional ? '304' : req.getHeader('accept-encoding').includes('gzip') ? 'gzip' : 'identity'
  res.cork(() => {
    res.writeStatus(kind === '304' ? '304 Not Modified' : '200 OK')
    for (const [name, value] of headers[kind] ?? []) res.writeHeader(name, value)
    if (close) res.writeHeader('Connection', 'close')
    if (kind === '304' || bodies === null) res.endWithoutBody()
    else send(res, bodies[kind])
  })
}

const app = uWS.App()
app.any('/*', process.env.FLOOR_CALLS === '1' ? callByCall : READS ? withReads : oneBlock)
app.listen('127.0.0.1', Number(process.env.PORT ?? 0), (s) => {
  if (s === false) throw new Error('cannot listen')
  process.stdout.write(`READY ${uWS.us_socket_local_port(s)}\n`)
})
process.once('SIGTERM', () => {
  app.close()
  if (ADDRESS) process.stderr.write(`address bytes read: ${addressBytes}\n`)
  if (READS) process.stderr.write(`query bytes read: ${queryBytes}\n`)
  process.exit(0)
})
