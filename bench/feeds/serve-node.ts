/**
 * The node:http anchor: what a Node user would write over the same snapshot — the same
 * Authenticator, query parsing, gzip negotiation and conditional logic, and the builder's
 * precomputed headers (flattened once per representation), answered through node:http.
 * Prints `READY <port>`.
 *
 * Usage: THREATFEED_DATA_DIR=… node --import=tsx bench/feeds/serve-node.ts <workspaceId>
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { prefersGzip } from '../../src/http/accept-encoding.js'
import { isNotModified } from '../../src/http/conditional.js'
import { parseFeedQuery, resolveVariant } from '../../src/http/feed-params.js'
import { errorBody } from '../../src/http/respond.js'
import { toThreatfeedError } from '../../src/errors.js'
import { AUTH_CHALLENGES } from '../../src/ingest/openapi.js'
import type { Representation } from '../../src/feed/snapshot-types.js'
import { openFeedBackend } from './feed-backend.js'

const workspaceId = process.argv[2]
if (workspaceId === undefined) throw new Error('usage: serve-node.ts <workspaceId>')
const backend = await openFeedBackend(workspaceId)
const { auth, feeds } = backend

const flat = new WeakMap<Representation, { full: string[], notModified: string[] }>()
function headersOf (rep: Representation): { full: string[], notModified: string[] } {
  let h = flat.get(rep)
  if (h === undefined) {
    h = { full: [...rep.headers.flat(), 'Content-Length', String(rep.body.byteLength)], notModified: rep.notModifiedHeaders.flat() }
    flat.set(rep, h)
  }
  return h
}

function fail (res: ServerResponse, e: unknown): void {
  const err = toThreatfeedError(e)
  const body = JSON.stringify(errorBody(err, 'feed'))
  const headers: string[] = ['Content-Type', 'application/json', 'Content-Length', String(Buffer.byteLength(body))]
  if (err.status === 401) headers.push('WWW-Authenticate', AUTH_CHALLENGES.feed)
  res.writeHead(err.status, headers)
  res.end(body)
}

async function handle (req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = req.url ?? '/'
  const q = url.indexOf('?')
  const path = q < 0 ? url : url.slice(0, q)
  if (path !== '/v1/threat/feeds') throw Object.assign(new Error('not found'), { status: 404 })
  const decision = auth.authenticate(req.headers.authorization ?? '', 'feeds:read', 'feeds')
  if (!decision.ok) throw decision.error
  const variant = resolveVariant(parseFeedQuery(q < 0 ? '' : url.slice(q + 1)), null)
  const ws = decision.principal.workspace.id
  const snapshot = feeds.getSnapshot(ws, '*', Date.now()) ?? await feeds.awaitSnapshot(ws, '*', Date.now())
  const v = snapshot.variants.get(variant.key)!
  const rep = prefersGzip(req.headers['accept-encoding'] ?? '') ? v.gzip : v.identity
  const h = headersOf(rep)
  if (v.status === 200 && isNotModified(req.headers['if-none-match'] ?? '', req.headers['if-modified-since'] ?? '', rep.etag, v.lastModifiedHttp, v.lastModified)) {
    res.writeHead(304, h.notModified)
    res.end()
    return
  }
  res.writeHead(v.status, h.full)
  res.end(req.method === 'HEAD' ? undefined : rep.body)
}

const server = createServer((req, res) => {
  handle(req, res).catch((e: unknown) => { fail(res, e) })
})
server.keepAliveTimeout = 75_000
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(`READY ${typeof address === 'object' && address !== null ? address.port : 0}\n`)
})

process.once('SIGTERM', () => {
  server.close()
  server.closeAllConnections()
  void backend.stop().then(() => process.exit(0))
})
