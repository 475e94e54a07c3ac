/**
 * Who may use /v1/admin/ (issue 22): 401 and 403 per scope on every route, admin:all only for
 * workspace changes, an inactive subscription does not block, the security headers on every
 * answer (errors too), no cookies, and failed authentication limited per client address.
 */
import t, { type Test } from 'tap'
import { startAdminServer, type AdminKeyName } from '../helpers/admin-server.js'

// Behind a trusted proxy, so each case can come from an address of its own (X-Forwarded-For).
const srv = await startAdminServer({ THREATFEED_TRUSTED_PROXIES: '127.0.0.1/32' })
t.teardown(() => srv.close())
let nextHost = 1
const freshAddress = (): string => `198.18.${Math.floor(nextHost / 250)}.${(nextHost++ % 250) + 1}`

const ROUTES: Array<[string, string, unknown?]> = [
  ['GET', '/v1/admin/workspaces'],
  ['GET', '/v1/admin/keys'],
  ['POST', '/v1/admin/keys', { scopes: ['feeds:read'] }],
  ['GET', '/v1/admin/lists'],
  ['POST', '/v1/admin/lists', { name: 'x' }],
  ['GET', '/v1/admin/rules'],
  ['GET', '/v1/admin/consumers'],
  ['GET', '/v1/admin/batches'],
  ['GET', '/v1/admin/feed-versions'],
  ['GET', '/v1/admin/audit'],
  ['POST', '/v1/admin/workspaces', { name: 'x' }],
]

function checkHeaders (t: Test, h: Headers, what: string): void {
  t.equal(h.get('content-security-policy'), "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'", `${what}: CSP`)
  t.equal(h.get('x-content-type-options'), 'nosniff', `${what}: nosniff`)
  t.equal(h.get('referrer-policy'), 'no-referrer', `${what}: referrer`)
  t.equal(h.get('x-frame-options'), 'DENY', `${what}: frame`)
  t.equal(h.get('set-cookie'), null, `${what}: no cookie`)
}

t.test('401 on every route without a usable admin key, with the SPEC 2.6 body', async (t) => {
  const cases: Array<{ description: string, headers: Record<string, string> }> = [
    { description: 'no Authorization', headers: {} },
    { description: 'unknown key', headers: { authorization: 'Bearer tf_nope' } },
    { description: 'revoked admin key', headers: { authorization: `Bearer ${srv.keys.revoked}` } },
    { description: 'Basic is feeds-only', headers: { authorization: `Basic ${Buffer.from(`api:${srv.keys.admin}`).toString('base64')}` } },
    { description: 'empty bearer', headers: { authorization: 'Bearer ' } },
  ]
  for (const c of cases) {
    for (const [method, path, body] of ROUTES) {
      const r = await srv.call(method, path, null, body, { ...c.headers, 'x-forwarded-for': freshAddress() })
      t.equal(r.status, 401, `${c.description}: ${method} ${path}`)
      t.same(r.body, { error: 'UnauthorizedError', message: 'invalid or missing API key', code: 401 })
      t.equal(r.headers.get('www-authenticate'), 'Bearer realm="threatfeed"')
      checkHeaders(t, r.headers, `${c.description} ${method} ${path}`)
    }
  }
})

t.test('403 for keys without an admin scope; admin:all only for workspace changes', async (t) => {
  for (const key of ['feeds', 'signals', 'rules'] as AdminKeyName[]) {
    for (const [method, path, body] of ROUTES) {
      const r = await srv.call(method, path, key, body)
      t.equal(r.status, 403, `${key}: ${method} ${path}`)
      t.equal(r.body.error, 'ForbiddenError')
      t.equal(r.body.code, 403)
      checkHeaders(t, r.headers, `${key} ${method} ${path}`)
    }
  }
  const cases: Array<{ description: string, method: string, path: string, body?: unknown }> = [
    { description: 'create a workspace', method: 'POST', path: '/v1/admin/workspaces', body: { name: 'x' } },
    { description: 'update its own workspace', method: 'PATCH', path: `/v1/admin/workspaces/${srv.main.id}`, body: { name: 'y' } },
    { description: 'delete its own workspace', method: 'DELETE', path: `/v1/admin/workspaces/${srv.main.id}` },
  ]
  for (const c of cases) {
    const r = await srv.call(c.method, c.path, 'admin', c.body)
    t.equal(r.status, 403, c.description)
    t.same(r.body, { error: 'ForbiddenError', message: 'API key lacks the admin:all scope', code: 403 }, c.description)
  }
  t.equal((await srv.server.store.workspaces.get(srv.main.id))?.name, 'main', 'nothing changed')
})

t.test('admin and admin:all keys get 200, with the headers and no cookie', async (t) => {
  for (const key of ['admin', 'root'] as AdminKeyName[]) {
    for (const [method, path] of ROUTES.filter(([m]) => m === 'GET')) {
      const r = await srv.call(method, path, key)
      t.equal(r.status, 200, `${key}: ${path}`)
      t.equal(r.headers.get('cache-control'), 'no-store')
      checkHeaders(t, r.headers, `${key} ${path}`)
    }
  }
})

t.test('an inactive subscription does not block administration (it can be reactivated)', async (t) => {
  const r = await srv.call('GET', '/v1/admin/lists', 'unpaid')
  t.equal(r.status, 200)
  const back = await srv.call('PATCH', `/v1/admin/workspaces/${srv.unpaid.id}`, 'root', { subscription: 'active' })
  t.equal(back.status, 200)
  t.equal(back.body.subscription, 'active')
  await srv.call('PATCH', `/v1/admin/workspaces/${srv.unpaid.id}`, 'root', { subscription: 'inactive' })
})

t.test('admin scopes imply rules:read: explain answers an admin key', async (t) => {
  for (const key of ['admin', 'root'] as AdminKeyName[]) {
    const r = await srv.call('GET', '/v1/threat/explain?ip=192.0.2.1', key)
    t.equal(r.status, 200, key)
    t.equal(r.body.ip, '192.0.2.1')
  }
  const feedsOnly = await srv.call('GET', '/v1/threat/explain?ip=192.0.2.1', 'feeds')
  t.equal(feedsOnly.status, 403)
})

t.test('wrong methods answer 405 with Allow and the headers', async (t) => {
  const cases: Array<{ method: string, path: string, allow: string }> = [
    { method: 'PUT', path: '/v1/admin/workspaces', allow: 'GET, POST, HEAD' },
    { method: 'DELETE', path: '/v1/admin/lists', allow: 'GET, POST, HEAD' },
    { method: 'GET', path: `/v1/admin/lists/${srv.main.id}/accept`, allow: 'POST' },
    { method: 'POST', path: '/v1/admin/rules', allow: 'GET, HEAD' },
  ]
  for (const c of cases) {
    const r = await srv.call(c.method, c.path, 'admin')
    t.equal(r.status, 405, `${c.method} ${c.path}`)
    t.equal(r.headers.get('allow'), c.allow)
    checkHeaders(t, r.headers, `${c.method} ${c.path}`)
  }
})

t.test('failed authentication is limited per client address and key prefix, and per address', async (t) => {
  const own = srv
  /** Sends failures until a 429: how many 401s came first, and the seconds it took (1 token a second refills meanwhile). */
  const untilLimited = async (key: (i: number) => string, from: Record<string, string>): Promise<{ failures: number, seconds: number }> => {
    const start = Date.now()
    let failures = 0
    for (let i = 0; i < 1000; i++) {
      const status = (await own.call('GET', '/v1/admin/lists', null, undefined, { authorization: `Bearer ${key(i)}`, ...from })).status
      if (status === 429) break
      t.equal(status, 401)
      failures++
    }
    return { failures, seconds: (Date.now() - start) / 1000 }
  }
  const from = { 'x-forwarded-for': '203.0.113.77' }
  const one = await untilLimited(() => 'tf_wrongkey', from)
  t.ok(one.failures >= 10 && one.failures <= 10 + Math.ceil(one.seconds), `a burst of 10 failures of one prefix, then 429 (${one.failures} in ${one.seconds} s)`)
  const limited = await own.call('GET', '/v1/admin/lists', null, undefined, { authorization: 'Bearer tf_wrongkey_again', ...from })
  t.equal(limited.status, 429, 'a key of that prefix from that address waits')
  t.equal(limited.body.error, 'TooManyRequestsError')
  t.ok(Number(limited.headers.get('retry-after')) >= 1, 'Retry-After')
  checkHeaders(t, limited.headers, '429')
  t.equal((await own.call('GET', '/v1/admin/lists', 'admin', undefined, from)).status, 200, 'a good key from that address is not refused (issue 35)')
  t.equal((await own.call('GET', '/v1/admin/lists', 'admin', undefined, { 'x-forwarded-for': '203.0.113.78' })).status, 200, 'another address is not limited')
  await new Promise((resolve) => setTimeout(resolve, 1100))
  t.equal((await own.call('GET', '/v1/admin/lists', null, undefined, { authorization: 'Bearer tf_wrongkey', ...from })).status, 401, 'after Retry-After the prefix may try again')

  // Keys guessed at random each have a prefix of their own: the address's budget is ten bursts.
  const guesser = { 'x-forwarded-for': '203.0.113.79' }
  const many = await untilLimited((i) => `tf_${String(i).padStart(8, '0')}x`, guesser)
  t.ok(many.failures >= 100 && many.failures <= 100 + Math.ceil(many.seconds), `100 failures of distinct prefixes, then 429 (${many.failures} in ${many.seconds} s)`)
  t.equal((await own.call('GET', '/v1/admin/lists', 'admin', undefined, guesser)).status, 429, 'and then every key from that address waits')
  // Signals and feeds are not touched by the admin limit.
  t.equal((await own.call('GET', '/v1/threat/feeds', 'feeds')).status, 200)
})
