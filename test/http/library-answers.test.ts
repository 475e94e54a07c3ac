/**
 * What uWebSockets.js sends on its own, and what the server sets about it (src/http/uws.ts):
 * - no `uWebSockets: 20` header on any answer (it only tells a client the stack);
 * - the header limit is 16 KiB, set by the server before the library loads — the library reads
 *   UWS_HTTP_MAX_HEADERS_SIZE once, at load, never per App — so a 4 KB Authorization with a long
 *   If-None-Match list is served, and an operator's own value still wins;
 * - the answers that remain the library's (README, decisions): 431, 400 for a missing or
 *   repeated Host, 505 for HTTP/1.0 and bare-LF line ends, each with an HTML body and
 *   `Connection: close`, a HEAD included. Pinned so a library upgrade that changes them is noticed.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { startTestServer } from '../helpers/server.js'
import { feedModule } from '../helpers/feed-module.js'
import { parseResponses, rawExchange } from '../helpers/raw-http.js'

const feeds = feedModule()
const srv = await startTestServer({ modules: feeds.modules })
t.teardown(async () => { await feeds.stop(); await srv.close() })

const key = srv.keys.all
const request = (method: string, path: string, headers: string[] = [], version = 'HTTP/1.1', eol = '\r\n'): string =>
  [`${method} ${path} ${version}`, 'Host: t', ...headers, 'Connection: close', '', ''].join(eol)
const etags = (n: number): string => Array.from({ length: n }, (_, i) => `"${i.toString(16).padStart(40, '0')}"`).join(', ')

t.test('no answer carries the library mark', async (t) => {
  const cases: Array<{ description: string, raw: string, method: string, status: number }> = [
    { description: 'health', raw: request('GET', '/healthz'), method: 'GET', status: 200 },
    { description: 'HEAD of the OpenAPI document', raw: request('HEAD', '/openapi.json'), method: 'HEAD', status: 200 },
    { description: 'a feed', raw: request('GET', '/v1/threat/feeds', [`Authorization: Bearer ${key}`]), method: 'GET', status: 200 },
    { description: 'unknown path', raw: request('GET', '/nope'), method: 'GET', status: 404 },
    { description: 'wrong method', raw: request('GET', '/v1/signal'), method: 'GET', status: 405 },
    { description: 'no credentials', raw: request('POST', '/v1/signal', ['Content-Length: 0']), method: 'POST', status: 401 },
    { description: 'a feed without credentials, HEAD', raw: request('HEAD', '/v1/threat/feeds'), method: 'HEAD', status: 401 },
    { description: "the library's own 431", raw: request('GET', '/healthz', [`X-Pad: ${'a'.repeat(20_000)}`]), method: 'GET', status: 431 },
  ]
  for (const c of cases) {
    const [r] = parseResponses(await rawExchange(srv.port, c.raw), [c.method])
    t.equal(r?.status, c.status, c.description)
    t.notOk(r?.names.some((n) => n.toLowerCase() === 'uwebsockets'), `${c.description}: no uWebSockets header`)
  }
})

t.test('the header limit holds a 4 KB Authorization with a long If-None-Match list, and an 8 KB URL', async (t) => {
  // 4 KB of Authorization: the key after a run of spaces (still one valid credential).
  const authorization = `Authorization: Bearer${' '.repeat(4096 - 'Authorization: Bearer'.length - key.length)}${key}`
  t.equal(authorization.length, 4096)
  const ifNoneMatch = `If-None-Match: ${etags(100)}`
  const [feed] = parseResponses(await rawExchange(srv.port, request('GET', '/v1/threat/feeds', [authorization, ifNoneMatch])), ['GET'])
  t.equal(feed?.status, 200, `a ${authorization.length + ifNoneMatch.length}-byte header block is served`)
  t.equal(feed?.headers['x-feed-entry-count'], '0', 'the (empty) workspace feed')
  const [url] = parseResponses(await rawExchange(srv.port, request('GET', `/healthz?${'a'.repeat(8192)}`)), ['GET'])
  t.same([url?.status, url?.body], [200, '{"status":"ok"}'], 'an 8 KB URL')
})

const HTML_431 = '<h1>Request Header Fields Too Large</h1><hr><i>uWebSockets/20 Server</i>'
const HTML_400 = '<h1>Bad Request</h1><hr><i>uWebSockets/20 Server</i>'
const HTML_505 = '<h1>HTTP Version Not Supported</h1><p>This server does not support HTTP/1.0.</p><hr><i>uWebSockets/20 Server</i>'

t.test("the answers that remain the library's", async (t) => {
  const cases: Array<{ description: string, raw: string, status: string, body: string }> = [
    { description: 'header block just over 16 KiB', raw: request('GET', '/healthz', [`X-Pad: ${'a'.repeat(16_384)}`]), status: '431 Request Header Fields Too Large', body: HTML_431 },
    { description: '20 KB If-None-Match', raw: request('GET', '/v1/threat/feeds', [`Authorization: Bearer ${key}`, `If-None-Match: ${etags(450)}`]), status: '431 Request Header Fields Too Large', body: HTML_431 },
    { description: '100 KB Authorization', raw: request('GET', '/v1/threat/feeds', [`Authorization: Bearer ${'a'.repeat(100_000)}`]), status: '431 Request Header Fields Too Large', body: HTML_431 },
    { description: '200 headers (the compiled-in limit is 98 header lines)', raw: request('GET', '/healthz', Array.from({ length: 200 }, (_, i) => `X-${i}: a`)), status: '431 Request Header Fields Too Large', body: HTML_431 },
    { description: 'HEAD over the limit: a body all the same', raw: request('HEAD', '/healthz', [`X-Pad: ${'a'.repeat(20_000)}`]), status: '431 Request Header Fields Too Large', body: HTML_431 },
    { description: 'repeated Host', raw: request('GET', '/healthz', ['Host: u']), status: '400 Bad Request', body: HTML_400 },
    { description: 'no Host', raw: 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n', status: '400 Bad Request', body: HTML_400 },
    { description: 'HTTP/1.0', raw: request('GET', '/healthz', [], 'HTTP/1.0'), status: '505 HTTP Version Not Supported', body: HTML_505 },
    { description: 'bare LF line ends', raw: request('GET', '/healthz', [], 'HTTP/1.1', '\n'), status: '505 HTTP Version Not Supported', body: HTML_505 },
  ]
  for (const c of cases) {
    const text = await rawExchange(srv.port, c.raw)
    t.equal(text, `HTTP/1.1 ${c.status}\r\nConnection: close\r\n\r\n${c.body}`, c.description)
  }
})

t.test('a repeated Authorization is not refused by the library: it reaches the server', async (t) => {
  const raw = request('GET', '/v1/threat/feeds', [`Authorization: Bearer ${key}`, `Authorization: Bearer ${key}`])
  const [r] = parseResponses(await rawExchange(srv.port, raw), ['GET'])
  t.equal(r?.status, 200)
})

const fixture = fileURLToPath(new URL('../fixtures/uws-header-limit.ts', import.meta.url))
const run = async (mode: string, sizes: number[], env: Record<string, string> = {}): Promise<string[]> => {
  const base = { ...process.env }
  delete base.UWS_HTTP_MAX_HEADERS_SIZE
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', fixture, mode, ...sizes.map(String)], { env: { ...base, ...env } })
  return stdout.trim().split('\n')
}

t.test('UWS_HTTP_MAX_HEADERS_SIZE: set by the server before the library loads; read only at load', async (t) => {
  t.same(await run('through-http', [16_000, 16_385]), ['16000 HTTP/1.1 200 OK', '16385 HTTP/1.1 431 Request Header Fields Too Large'], 'the server sets 16 KiB by itself')
  t.same(await run('through-http', [8000, 9000], { UWS_HTTP_MAX_HEADERS_SIZE: '8192' }), ['8000 HTTP/1.1 200 OK', '9000 HTTP/1.1 431 Request Header Fields Too Large'], "an operator's value wins")
  t.same(await run('library-first', [4000, 5000]), ['4000 HTTP/1.1 200 OK', '5000 HTTP/1.1 431 Request Header Fields Too Large'], 'set after the library loaded, before the App: the 4096 default stays')
})
