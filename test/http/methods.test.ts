/**
 * Every route answers every method (DECISIONS §2): its own methods as specified, HEAD wherever GET
 * is served (RFC 9110 §9.3.2: GET's headers, Content-Length included, no body), and every other
 * method 405 with `Allow` and the route's error body — HEAD included, which uWS routes apart from
 * the others (it used to fall through to the 404 of unknown paths on the signal routes).
 * Each request is followed on the same connection by another, so a body sent where none belongs
 * shows up as a broken second answer.
 */
import t from 'tap'
import { startTestServer } from '../helpers/server.js'
import { feedModule } from '../helpers/feed-module.js'
import { parseResponses, rawExchange } from '../helpers/raw-http.js'

const feeds = feedModule()
const srv = await startTestServer({ modules: feeds.modules })
t.teardown(async () => { await feeds.stop(); await srv.close() })

const FOLLOW = 'GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n'
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const

async function ask (method: string, path: string, headers: Record<string, string> = {}) {
  const lines = Object.entries({ Host: 't', ...headers }).map(([k, v]) => `${k}: ${v}\r\n`).join('')
  const text = await rawExchange(srv.port, `${method} ${path} HTTP/1.1\r\n${lines}Content-Length: 0\r\n\r\n${FOLLOW}`)
  return parseResponses(text, [method, 'GET'])
}

const signalBody = (allow: string) => ({ error: 'MethodNotAllowedError', message: `method not allowed; use ${allow}`, code: 405 })
const feedBody = (allow: string) => ({ success: false, error: `method not allowed; use ${allow}`, details: {} })

const routes: Array<{ description: string, path: string, allow: string, shape: 'signal' | 'feed', headers?: Record<string, string> }> = [
  { description: 'health', path: '/healthz', allow: 'GET, HEAD', shape: 'signal' },
  { description: 'readiness', path: '/readyz', allow: 'GET, HEAD', shape: 'signal' },
  { description: 'metrics', path: '/metrics', allow: 'GET, HEAD', shape: 'signal' },
  { description: 'OpenAPI document', path: '/openapi.json', allow: 'GET, HEAD', shape: 'signal' },
  { description: 'v1 signal', path: '/v1/signal', allow: 'POST', shape: 'signal' },
  { description: 'v2 signal', path: '/v2/signal', allow: 'POST', shape: 'signal' },
  { description: 'workspace feed', path: '/v1/threat/feeds', allow: 'GET, HEAD', shape: 'feed', headers: { Authorization: `Bearer ${srv.keys.all}` } },
  { description: 'list feed', path: '/v1/threat/feeds/nope', allow: 'GET, HEAD', shape: 'feed', headers: { Authorization: `Bearer ${srv.keys.all}` } },
]

t.test('methods a route does not serve: 405 with Allow and its error body; to HEAD without the body', async (t) => {
  for (const route of routes) {
    for (const method of METHODS.filter((m) => !route.allow.split(', ').includes(m))) {
      const [r, next, extra] = await ask(method, route.path, route.headers)
      const name = `${method} ${route.path} (${route.description})`
      t.equal(r?.status, 405, name)
      t.equal(r?.headers.allow, route.allow, `${name}: Allow`)
      const body = JSON.stringify(route.shape === 'signal' ? signalBody(route.allow) : feedBody(route.allow))
      t.equal(r?.headers['content-length'], String(Buffer.byteLength(body)), `${name}: Content-Length of the body`)
      t.equal(r?.body, method === 'HEAD' ? '' : body, `${name}: body`)
      t.equal(next?.status, 200, `${name}: the next answer on the connection is intact`)
      t.equal(extra, undefined, `${name}: nothing after it`)
    }
  }
})

t.test('HEAD wherever GET is served: the GET headers and Content-Length, no body', async (t) => {
  // Feeds are built on their first request, asynchronously; uWS closes a connection that pipelines
  // a request behind an answer still pending (README, the library's own answers), so build first.
  for (const route of routes.filter((r) => r.shape === 'feed')) await fetch(`${srv.url}${route.path}`, { headers: route.headers })
  for (const route of routes.filter((r) => r.allow.includes('HEAD'))) {
    const [get] = await ask('GET', route.path, route.headers)
    const [head, next, extra] = await ask('HEAD', route.path, route.headers)
    const name = `HEAD ${route.path} (${route.description})`
    t.equal(head?.status, get?.status, `${name}: GET's status`)
    t.equal(head?.headers['content-type'], get?.headers['content-type'], `${name}: GET's Content-Type`)
    if (route.path !== '/metrics') t.equal(head?.headers['content-length'], String(Buffer.byteLength(get!.body, 'latin1')), `${name}: GET's Content-Length`)
    else t.ok(Number(head?.headers['content-length']) > 0, `${name}: a Content-Length`)
    t.equal(head?.body, '', `${name}: no body`)
    t.equal(next?.status, 200, `${name}: the next answer on the connection is intact`)
    t.equal(extra, undefined, `${name}: nothing after it`)
  }
})

t.test('an unknown path: 404 to every method, without a body to HEAD', async (t) => {
  const body = JSON.stringify({ error: 'NotFoundError', message: 'not found', code: 404 })
  for (const method of METHODS) {
    const [r, next, extra] = await ask(method, '/v3/signal')
    t.equal(r?.status, 404, method)
    t.equal(r?.headers['content-length'], String(Buffer.byteLength(body)), `${method}: Content-Length`)
    t.equal(r?.body, method === 'HEAD' ? '' : body, `${method}: body`)
    t.equal(next?.status, 200, `${method}: the next answer is intact`)
    t.equal(extra, undefined, `${method}: nothing after it`)
  }
})
