/**
 * /v1/admin/workspaces and /v1/admin/keys (issue 22): admin:all manages every workspace, an admin
 * key only its own (another workspace is a 404, as an unknown one), keys are shown once and work
 * at once, admin:all is never granted through the API, bad bodies are 400 with details, and every
 * change is an audit line.
 */
import t from 'tap'
import { startAdminServer, type Json } from '../helpers/admin-server.js'

const srv = await startAdminServer()
t.teardown(() => srv.close())

async function auditLines (workspace: string): Promise<Json[]> {
  const r = await srv.call('GET', `/v1/admin/audit?workspace=${workspace}`, 'root')
  t.equal(r.headers.get('content-type'), 'application/x-ndjson')
  return r.text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l))
}

t.test('admin:all creates, updates and deletes workspaces; each change is audited', async (t) => {
  const created = await srv.call('POST', '/v1/admin/workspaces', 'root', { name: 'fleet-b' })
  t.equal(created.status, 201)
  t.match(created.body, { name: 'fleet-b', subscription: 'active', guards: null })
  const id = created.body.id as string
  const updated = await srv.call('PATCH', `/v1/admin/workspaces/${id}`, 'root', { name: 'fleet-c', subscription: 'inactive', guards: { min_entries: 5, reject_special: true } })
  t.equal(updated.status, 200)
  t.match(updated.body, { id, name: 'fleet-c', subscription: 'inactive', guards: { min_entries: 5, reject_special: true, accepted: null } })
  t.same((await srv.server.store.workspaces.get(id))?.feedGuards, { minEntries: 5, rejectSpecial: true })
  const listed = await srv.call('GET', '/v1/admin/workspaces', 'root')
  t.ok(listed.body.items.some((w: Json) => w.id === id), 'admin:all lists it')
  const deleted = await srv.call('DELETE', `/v1/admin/workspaces/${id}`, 'root')
  t.same(deleted.body, { id, deleted: true })
  t.equal((await srv.call('GET', `/v1/admin/workspaces/${id}`, 'root')).status, 404)
  t.equal((await srv.call('DELETE', `/v1/admin/workspaces/${id}`, 'root')).status, 404, 'deleting twice: 404')
  const lines = await auditLines(id)
  t.same(lines.map((l) => l.action), ['workspace.delete', 'workspace.update', 'workspace.create'], 'newest first')
  for (const l of lines) {
    t.equal(l.key_id, srv.keyIds.root)
    t.equal(l.address, '127.0.0.1')
    t.equal(l.target, id)
    t.ok(Date.parse(l.at) > Date.now() - 60_000, 'when')
  }
})

t.test('an admin key sees its own workspace only; admin:all sees every one', async (t) => {
  const mine = await srv.call('GET', '/v1/admin/workspaces', 'admin')
  t.same(mine.body.items.map((w: Json) => w.id), [srv.main.id])
  const all = await srv.call('GET', '/v1/admin/workspaces', 'root')
  t.ok([srv.main.id, srv.other.id, srv.unpaid.id].every((id) => all.body.items.some((w: Json) => w.id === id)))
  const cases = [
    { description: 'another workspace by id', path: `/v1/admin/workspaces/${srv.other.id}` },
    { description: 'its keys', path: `/v1/admin/keys?workspace=${srv.other.id}` },
    { description: 'its lists', path: `/v1/admin/lists?workspace=${srv.other.id}` },
    { description: 'its rules', path: `/v1/admin/rules?workspace=${srv.other.id}` },
    { description: 'its consumers', path: `/v1/admin/consumers?workspace=${srv.other.id}` },
    { description: 'its batches', path: `/v1/admin/batches?workspace=${srv.other.id}` },
    { description: 'its feed versions', path: `/v1/admin/feed-versions?workspace=${srv.other.id}` },
    { description: 'its audit log', path: `/v1/admin/audit?workspace=${srv.other.id}` },
    { description: 'an unknown workspace', path: '/v1/admin/keys?workspace=00000000-0000-4000-8000-000000000000' },
  ]
  for (const c of cases) {
    const r = await srv.call('GET', c.path, 'admin')
    t.equal(r.status, 404, c.description)
    t.equal(r.body.error, 'NotFoundError', c.description)
    if (c.description !== 'an unknown workspace') t.equal((await srv.call('GET', c.path, 'root')).status, 200, `admin:all: ${c.description}`)
  }
  const revokeOther = await srv.call('DELETE', `/v1/admin/keys/${srv.keyIds.otherAdmin}`, 'admin')
  t.equal(revokeOther.status, 404, 'another workspace\'s key cannot be revoked')
  t.equal((await srv.server.store.keys.get(srv.keyIds.otherAdmin))?.revokedAt, null)
})

t.test('keys: shown once, usable at once, revoked at once; admin:all is not granted here', async (t) => {
  const created = await srv.call('POST', '/v1/admin/keys', 'admin', { scopes: ['feeds:read', 'rules:read'] })
  t.equal(created.status, 201)
  t.match(created.body, { workspace: srv.main.id, scopes: ['feeds:read', 'rules:read'], revoked_at: null })
  t.type(created.body.key, 'string')
  const feed = await fetch(`${srv.base}/v1/threat/feeds`, { headers: { authorization: `Bearer ${created.body.key}` } })
  t.equal(feed.status, 200, 'the new key reads feeds at once')
  const listed = await srv.call('GET', '/v1/admin/keys', 'admin')
  const row = listed.body.items.find((k: Json) => k.id === created.body.id)
  t.same(Object.keys(row).sort(), ['created_at', 'id', 'revoked_at', 'scopes', 'workspace'], 'the key is never listed')
  t.notOk(listed.text.includes(created.body.key), 'nor anywhere in the listing')
  const revoked = await srv.call('DELETE', `/v1/admin/keys/${created.body.id}`, 'admin')
  t.same(revoked.body, { id: created.body.id, revoked: true, already_revoked: false })
  t.same((await srv.call('DELETE', `/v1/admin/keys/${created.body.id}`, 'admin')).body, { id: created.body.id, revoked: true, already_revoked: true })
  const after = await fetch(`${srv.base}/v1/threat/feeds`, { headers: { authorization: `Bearer ${created.body.key}` } })
  t.equal(after.status, 401, 'refused once revoked')
  const all = await srv.call('POST', '/v1/admin/keys', 'root', { scopes: ['admin:all'] })
  t.equal(all.status, 403)
  t.same(all.body, { error: 'ForbiddenError', message: 'admin:all keys are made only on the server: threatfeed key create --scopes admin:all', code: 403 })
  const lines = await auditLines(srv.main.id)
  t.match(lines.slice(0, 4).map((l) => [l.action, l.target, l.key_id]), [
    ['key.create', '', srv.keyIds.root], // refused (403), audited all the same
    ['key.revoke', created.body.id, srv.keyIds.admin],
    ['key.revoke', created.body.id, srv.keyIds.admin],
    ['key.create', created.body.id, srv.keyIds.admin],
  ])
  const forOther = await srv.call('POST', '/v1/admin/keys', 'root', { workspace: srv.other.id, scopes: ['signals:write'] })
  t.equal(forOther.status, 201)
  t.equal(forOther.body.workspace, srv.other.id, 'admin:all makes keys for any workspace')
})

t.test('bad bodies are 400 with one detail per problem', async (t) => {
  const cases: Array<{ description: string, method: string, path: string, body: unknown, contentType?: string, expected: unknown }> = [
    { description: 'workspace without a name', method: 'POST', path: '/v1/admin/workspaces', body: {}, expected: [{ field: 'name', message: "must have required property 'name'", value: null }] },
    { description: 'empty name', method: 'POST', path: '/v1/admin/workspaces', body: { name: '' }, expected: [{ field: 'name', message: 'must NOT have fewer than 1 characters', value: '' }] },
    { description: 'name with a newline', method: 'POST', path: '/v1/admin/workspaces', body: { name: 'a\nb' }, expected: [{ field: 'name', message: 'must match pattern "^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]*$"', value: 'a\nb' }] },
    { description: 'unknown subscription and field', method: 'POST', path: '/v1/admin/workspaces', body: { name: 'x', subscription: 'gold', owner: 'me' }, expected: [{ field: 'owner', message: 'must NOT have additional properties', value: 'me' }, { field: 'subscription', message: 'must be equal to one of the allowed values', value: 'gold' }] },
    { description: 'empty update', method: 'PATCH', path: `/v1/admin/workspaces/${srv.other.id}`, body: {}, expected: [{ field: '', message: 'must NOT have fewer than 1 properties', value: {} }] },
    { description: 'guard out of range', method: 'PATCH', path: `/v1/admin/workspaces/${srv.other.id}`, body: { guards: { max_shrink_pct: 101 } }, expected: [{ field: 'guards.max_shrink_pct', message: 'must be <= 100', value: 101 }] },
    { description: 'key without scopes', method: 'POST', path: '/v1/admin/keys', body: { scopes: [] }, expected: [{ field: 'scopes', message: 'must NOT have fewer than 1 items', value: [] }] },
    { description: 'unknown scope', method: 'POST', path: '/v1/admin/keys', body: { scopes: ['root'] }, expected: [{ field: 'scopes.0', message: 'must be equal to one of the allowed values', value: 'root' }] },
    { description: 'a scope twice', method: 'POST', path: '/v1/admin/keys', body: { scopes: ['admin', 'admin'] }, expected: [{ field: 'scopes', message: 'must NOT have duplicate items (items ## 0 and 1 are identical)', value: ['admin', 'admin'] }] },
    { description: 'body an array', method: 'POST', path: '/v1/admin/keys', body: [], expected: [{ field: '', message: 'must be object', value: [] }] },
  ]
  for (const c of cases) {
    const r = await srv.call(c.method, c.path, 'root', c.body)
    t.equal(r.status, 400, c.description)
    t.same(r.body, { error: 'ValidationError', message: 'Validation failed', details: c.expected, code: 400 }, c.description)
  }
  const notJson = await srv.call('POST', '/v1/admin/keys', 'root', '{"scopes":', {})
  t.same(notJson.body, { error: 'BadRequestError', message: 'request body is not valid JSON', code: 400 })
  const wrongType = await srv.call('POST', '/v1/admin/keys', 'root', '{}', { 'content-type': 'text/plain' })
  t.equal(wrongType.status, 400)
  t.equal((await srv.server.store.workspaces.get(srv.other.id))?.name, 'other', 'nothing changed')
})
