/**
 * Feed authentication (SPEC §5, DECISIONS §2): Bearer or Basic `api:<key>`; 401 with
 * `WWW-Authenticate` (Bearer and Basic challenges) and the same body whatever was wrong; 402,
 * 403; and authentication before any conditional header, so no error ever becomes a 304.
 */
import t from 'tap'
import { basic, bearer, buildTestSnapshot, rawRequest, StaticFeedSource, startFeedServer } from '../helpers/feed-server.js'

const source = new StaticFeedSource()
const server = await startFeedServer(() => source)
t.teardown(() => server.stop())
source.set(buildTestSnapshot({ workspaceId: server.workspace.id, feedId: '*', networks: ['192.0.2.0/24'], lastModified: Date.UTC(2026, 0, 1) }))

const UNAUTHORIZED = { success: false, error: 'invalid or missing API key', details: {} }
const CHALLENGE = 'Bearer realm="threatfeed", Basic realm="threatfeed", charset="UTF-8"'

t.test('credential table', async (t) => {
  const cases: Array<{ description: string, authorization: Record<string, string>, status: number, body?: unknown }> = [
    { description: 'Bearer', authorization: bearer(server.key), status: 200 },
    { description: 'bearer scheme in lower case', authorization: { authorization: `bearer ${server.key}` }, status: 200 },
    { description: 'Basic api:<key>', authorization: basic(server.key), status: 200 },
    { description: 'BASIC scheme in capitals', authorization: { authorization: basic(server.key).authorization!.replace('Basic', 'BASIC') }, status: 200 },
    { description: 'no Authorization', authorization: {}, status: 401, body: UNAUTHORIZED },
    { description: 'unknown key', authorization: bearer('tf_0000000000000000000000000000000000000000000'), status: 401, body: UNAUTHORIZED },
    { description: 'revoked key', authorization: bearer(server.revokedKey), status: 401, body: UNAUTHORIZED },
    { description: 'Basic with another user name', authorization: basic(server.key, 'admin'), status: 401, body: UNAUTHORIZED },
    { description: 'Basic with an empty password', authorization: basic(''), status: 401, body: UNAUTHORIZED },
    { description: 'Basic that is not base64 of user:pass', authorization: { authorization: 'Basic !!!notbase64' }, status: 401, body: UNAUTHORIZED },
    { description: 'unknown scheme', authorization: { authorization: `Token ${server.key}` }, status: 401, body: UNAUTHORIZED },
    { description: 'Bearer without a key', authorization: { authorization: 'Bearer ' }, status: 401, body: UNAUTHORIZED },
    { description: 'key lacks feeds:read', authorization: bearer(server.signalsOnlyKey), status: 403, body: { success: false, error: 'API key lacks the feeds:read scope', details: {} } },
    { description: 'inactive subscription', authorization: basic(server.inactiveKey), status: 402, body: { success: false, error: 'subscription required', details: {} } },
  ]
  for (const c of cases) {
    for (const path of ['/v1/threat/feeds', '/v1/threat/feeds?format=dialect_a', '/v1/threat/feeds/no-such-list']) {
      const expected = c.status === 200 && path.endsWith('no-such-list') ? 404 : c.status
      const r = await rawRequest(server.base, path, { headers: c.authorization })
      t.equal(r.status, expected, `${c.description} ${path}`)
      if (c.body !== undefined) t.same(JSON.parse(r.body.toString()), c.body, `${c.description} body`)
      if (expected === 401) t.equal(r.headers['www-authenticate'], CHALLENGE, `${c.description} challenge`)
      else t.notOk('www-authenticate' in r.headers, `${c.description}: no challenge`)
    }
  }
})

t.test('no error becomes a 304, whatever the conditional headers say', async (t) => {
  const ok = await rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(server.key) })
  const conditionals: Array<Record<string, string>> = [
    { 'if-none-match': ok.headers.etag! },
    { 'if-none-match': '*' },
    { 'if-modified-since': 'Fri, 31 Dec 2100 23:59:59 GMT' },
    { 'if-modified-since': ok.headers['last-modified']! },
  ]
  const callers: Array<{ description: string, headers: Record<string, string>, path: string, status: number }> = [
    { description: 'no key', headers: {}, path: '/v1/threat/feeds', status: 401 },
    { description: 'bad key', headers: bearer('tf_nope'), path: '/v1/threat/feeds', status: 401 },
    { description: 'scope', headers: bearer(server.signalsOnlyKey), path: '/v1/threat/feeds', status: 403 },
    { description: 'subscription', headers: bearer(server.inactiveKey), path: '/v1/threat/feeds', status: 402 },
    { description: 'unknown list', headers: bearer(server.key), path: '/v1/threat/feeds/nope', status: 404 },
    { description: 'bad parameter', headers: bearer(server.key), path: '/v1/threat/feeds?format=x', status: 400 },
  ]
  for (const c of callers) {
    for (const cond of conditionals) {
      for (const method of ['GET', 'HEAD']) {
        const r = await rawRequest(server.base, c.path, { method, headers: { ...c.headers, ...cond } })
        t.equal(r.status, c.status, `${method} ${c.description} with ${JSON.stringify(cond)}`)
        t.notOk('etag' in r.headers, 'no validator leaks into an error')
      }
    }
  }
})

t.test('HEAD errors: status and headers of GET, no body, connection still usable', async (t) => {
  const get = await rawRequest(server.base, '/v1/threat/feeds', { headers: {} })
  const head = await rawRequest(server.base, '/v1/threat/feeds', { method: 'HEAD', headers: {} })
  t.equal(head.status, 401)
  t.equal(head.headers['www-authenticate'], CHALLENGE)
  t.equal(head.headers['content-type'], 'application/json')
  t.equal(head.headers['content-length'], String(get.body.length))
  t.equal(head.body.length, 0)
})

t.test('keys never show in the answer', async (t) => {
  const r = await rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(server.revokedKey) })
  t.notMatch(r.body.toString(), server.revokedKey)
})
