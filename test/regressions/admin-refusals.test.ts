/**
 * The smaller findings of issue 35, each through HTTP: the consumers view answered 200 and an
 * empty list for another workspace's list (every other route answers 404); explain ignored a
 * `workspace=` it cannot honour; refused admin writes left no audit line; the console's 404 for
 * `/console/index.html` had no `X-Content-Type-Options`.
 */
import t from 'tap'
import { startAdminServer, type AdminKeyName } from '../helpers/admin-server.js'

const srv = await startAdminServer()
t.teardown(() => srv.close())
const store = srv.server.store
const mine = await store.lists.create({ workspaceId: srv.main.id, name: 'mine', description: '', defaults: {}, selector: {} })
const theirs = await store.lists.create({ workspaceId: srv.other.id, name: 'theirs', description: '', defaults: {}, selector: {} })
await new Promise((resolve) => setTimeout(resolve, 1200)) // the server picks the lists up within a second

t.test('consumers?list=: another workspace\'s list, or none, is a 404 as on other routes', async (t) => {
  const cases: Array<{ description: string, list: string, key: AdminKeyName, status: number }> = [
    { description: 'its own list', list: mine.id, key: 'admin', status: 200 },
    { description: 'the workspace feed', list: '*', key: 'admin', status: 200 },
    { description: 'another workspace\'s list', list: theirs.id, key: 'admin', status: 404 },
    { description: 'a list that does not exist', list: '7d444840-9dc0-41e5-9c2e-1a2b3c4d5e6f', key: 'admin', status: 404 },
    { description: 'not an id at all', list: 'nope', key: 'admin', status: 404 },
    { description: 'admin:all, naming the other workspace', list: `${theirs.id}&workspace=${srv.other.id}`, key: 'root', status: 200 },
  ]
  for (const c of cases) {
    const r = await srv.call('GET', `/v1/admin/consumers?list=${c.list}`, c.key)
    t.equal(r.status, c.status, c.description)
    if (c.status === 404) t.same(r.body, { error: 'NotFoundError', message: 'no such access-rules list', code: 404 }, c.description)
    else t.same(r.body, { items: [], dropped: { evicted: 0, refused: 0, removed: 0 } }, c.description)
  }
})

t.test('explain refuses workspace= instead of answering for the key\'s own workspace', async (t) => {
  const explain = (query: string): Promise<Response> => fetch(`${srv.base}/v1/threat/explain?${query}`, { headers: { authorization: `Bearer ${srv.keys.rules}` } })
  const message = 'workspace is not a parameter of /v1/threat/explain: a key explains its own workspace (an admin key names one at /v1/admin/explain)'
  for (const [description, query] of <Array<[string, string]>>[['another workspace', `ip=192.0.2.1&workspace=${srv.other.id}`], ['its own workspace', `ip=192.0.2.1&workspace=${srv.main.id}`], ['empty', 'ip=192.0.2.1&workspace=']]) {
    const r = await explain(query!)
    t.equal(r.status, 400, description)
    t.same(await r.json(), { success: false, error: message, details: { parameter: 'workspace' } }, description)
  }
  t.equal((await explain('ip=192.0.2.1')).status, 200, 'without it: answered')
})

t.test('refused admin writes (403, 404, 409) are audited', async (t) => {
  const cases: Array<{ description: string, method: string, path: string, key: AdminKeyName, body?: unknown, status: number, line: Record<string, unknown> }> = [
    { description: 'an admin key creating a workspace (needs admin:all)', method: 'POST', path: '/v1/admin/workspaces', key: 'admin', body: { name: 'x' }, status: 403, line: { action: 'workspace.create', target: '', key_id: srv.keyIds.admin } },
    { description: 'a feeds key revoking a key', method: 'DELETE', path: `/v1/admin/keys/${srv.keyIds.signals}`, key: 'feeds', status: 403, line: { action: 'key.revoke', target: srv.keyIds.signals, key_id: srv.keyIds.feeds } },
    { description: 'deleting another workspace\'s list', method: 'DELETE', path: `/v1/admin/lists/${theirs.id}`, key: 'admin', status: 404, line: { action: 'list.delete', target: theirs.id, key_id: srv.keyIds.admin } },
    { description: 'accepting a list with no held build', method: 'POST', path: `/v1/admin/lists/${mine.id}/accept`, key: 'admin', body: {}, status: 409, line: { action: 'list.accept', target: mine.id, key_id: srv.keyIds.admin } },
  ]
  for (const c of cases) {
    const r = await srv.call(c.method, c.path, c.key, c.body)
    t.equal(r.status, c.status, c.description)
    const audit = await srv.call('GET', '/v1/admin/audit?limit=1', 'admin')
    t.match(JSON.parse(audit.text.trim()), { ...c.line, status: c.status, address: '127.0.0.1', workspace: srv.main.id }, `${c.description}: audited`)
  }
  const before = (await srv.call('GET', '/v1/admin/audit', 'admin')).text
  t.equal((await srv.call('DELETE', `/v1/admin/lists/${mine.id}`, null)).status, 401)
  t.equal((await srv.call('GET', `/v1/admin/lists/${theirs.id}`, 'admin')).status, 404)
  t.equal((await srv.call('GET', '/v1/admin/audit', 'admin')).text, before, 'no line for a 401 (no key to name) or a refused read')
})

t.test('the console\'s 404 for a path it does not serve carries its headers', async (t) => {
  for (const path of ['/console/index.html', '/console/nope/deeper']) {
    const r = await fetch(`${srv.base}${path}`)
    t.equal(r.status, 404, path)
    t.equal(r.headers.get('x-content-type-options'), 'nosniff', `${path}: nosniff`)
    t.same(await r.json(), { error: 'NotFoundError', message: 'not found', code: 404 }, path)
  }
})
