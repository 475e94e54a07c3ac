/**
 * A raw non-ASCII byte in the request target (issue 35): a front-end thread forwarded it to the
 * main thread through node:http, which threw on it, and every forwarded route answered 500 — with
 * no key, and past the admin login limiter. Now every route answers 400 in its own error shape
 * (admin answers with the admin headers, after the login limiter), with and without front-end
 * threads; a raw byte in a header value is forwarded as sent.
 */
import t from 'tap'
import { startAdminServer, type AdminServer } from '../helpers/admin-server.js'
import { parseResponses, rawExchange } from '../helpers/raw-http.js'

const E9 = '\xe9' // written as one latin1 byte by `raw`

function raw (port: number, method: string, target: string, headers: Record<string, string> = {}, body = ''): Promise<string> {
  const lines = [`${method} ${target} HTTP/1.1`, 'Host: x', 'Connection: close', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)]
  if (body !== '' || method === 'POST') lines.push(`Content-Length: ${Buffer.byteLength(body, 'latin1')}`)
  return rawExchange(port, Buffer.from(`${lines.join('\r\n')}\r\n\r\n${body}`, 'latin1'), 3000)
}

const BAD_TARGET = 'the request target holds a byte that is not ASCII; percent-encode it (RFC 3986, section 2.1)'
const signalShape = { error: 'BadRequestError', message: BAD_TARGET, code: 400 }
const feedShape = { success: false, error: BAD_TARGET, details: {} }

for (const threads of ['1', '2']) {
  t.test(`${threads} HTTP thread(s)`, async (t) => {
    const srv: AdminServer = await startAdminServer({ THREATFEED_HTTP_THREADS: threads })
    t.teardown(() => srv.close())
    const port = Number(new URL(srv.base).port)
    const bearer = (k: 'admin' | 'feeds' | 'signals'): Record<string, string> => ({ authorization: `Bearer ${srv.keys[k]}` })

    const cases: Array<{ description: string, method?: string, target: string, headers?: Record<string, string>, body?: string, expected: unknown, admin?: boolean }> = [
      { description: 'healthz, in the query', target: `/healthz?x=${E9}`, expected: signalShape },
      { description: 'readyz', target: `/readyz?${E9}`, expected: signalShape },
      { description: 'metrics', target: `/metrics?x=${E9}`, expected: signalShape },
      { description: 'openapi.json', target: `/openapi.json?x=${E9}`, expected: signalShape },
      { description: 'console', target: `/console?x=${E9}`, expected: signalShape },
      { description: 'an unknown path', target: `/nowhere${E9}`, expected: signalShape },
      { description: 'explain', target: `/v1/threat/explain?ip=192.0.2.1&x=${E9}`, headers: bearer('feeds'), expected: feedShape },
      { description: 'the workspace feed', target: `/v1/threat/feeds?x=${E9}`, headers: bearer('feeds'), expected: feedShape },
      { description: 'a feed path with //', target: `/v1/threat/feeds//x?${E9}`, headers: bearer('feeds'), expected: signalShape },
      { description: 'a feed path with a trailing /', target: `/v1/threat/feeds/?${E9}`, headers: bearer('feeds'), expected: signalShape },
      { description: 'a signal post', method: 'POST', target: `/v1/signal?x=${E9}`, headers: { ...bearer('signals'), 'content-type': 'application/json' }, body: '[{"type":"access_rules","action":"block","ip":"192.0.2.9"}]', expected: signalShape },
      { description: 'admin, with a good key', target: `/v1/admin/workspaces?x=${E9}`, headers: bearer('admin'), expected: signalShape, admin: true },
      { description: 'admin, a method it refuses', method: 'PUT', target: `/v1/admin/workspaces?x=${E9}`, headers: bearer('admin'), expected: signalShape, admin: true },
    ]
    for (const c of cases) {
      const method = c.method ?? 'GET'
      const [r] = parseResponses(await raw(port, method, c.target, c.headers, c.body), [method])
      t.equal(r?.status, 400, c.description)
      t.same(r === undefined ? null : JSON.parse(r.body), c.expected, `${c.description}: the route's error shape`)
      if (c.admin === true) t.equal(r?.headers['x-content-type-options'], 'nosniff', `${c.description}: the admin headers`)
    }

    const [header] = parseResponses(await raw(port, 'GET', '/healthz', { 'user-agent': `probe ${E9}` }), ['GET'])
    t.equal(header?.status, 200, 'a raw byte in a header value is no reason to fail')

    // The admin gate comes first: no key → 401, and bad keys count towards the login limiter.
    const [noKey] = parseResponses(await raw(port, 'GET', `/v1/admin/workspaces?x=${E9}`), ['GET'])
    t.equal(noKey?.status, 401, 'admin without a key: 401, as without the byte')
    const statuses: number[] = []
    for (let i = 0; i < 12; i++) {
      const [r] = parseResponses(await raw(port, 'GET', `/v1/admin/workspaces?x=${E9}`, { authorization: `Bearer tf_${'x'.repeat(40)}${i}` }), ['GET'])
      statuses.push(r?.status ?? 0)
    }
    t.ok(statuses.slice(0, 9).every((s) => s === 401) && statuses.at(-1) === 429, `bad keys are limited as ever (${statuses.join(' ')})`)
  })
}
