/**
 * POST /v1/admin/workspaces/{id}/accept (issue 22): `list accept` for the workspace feed
 * (/v1/threat/feeds), whose guards PATCH /v1/admin/workspaces sets. A real guard holds a real
 * build; GET shows the held digest; another digest is a 409 and accepts nothing; the held one
 * is published and audited. An `admin` key accepts in its own workspace only; 401/403; bad bodies
 * as a table.
 */
import t from 'tap'
import { startAdminServer, type AdminKeyName, type Json } from '../helpers/admin-server.js'
import type { AccessRuleInput } from '../../src/store/types.js'

const srv = await startAdminServer()
t.teardown(() => srv.close())
const store = srv.server.store
const ws = srv.main.id
const accept = `/v1/admin/workspaces/${ws}/accept`

const rule = (ip: string): AccessRuleInput => ({
  kind: 'access_rule', workspaceId: ws, ruleRef: null, labels: {}, reason: null, expiresAt: null, seq: 0,
  target: { type: 'ip', value: ip }, action: 'block', name: null, confidence: null, severity: null,
})
const hosts = ['198.51.100.1/32', '198.51.100.3/32', '198.51.100.5/32', '198.51.100.7/32', '198.51.100.9/32']
for (const h of hosts) await store.rules.upsertAccessRule(rule(h))

async function until<T> (what: string, get: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await get()
    if (ok(v)) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
const feed = async (): Promise<{ held: string | null, body: string }> => {
  const r = await fetch(`${srv.base}/v1/threat/feeds?family=v4`, { headers: { authorization: `Bearer ${srv.keys.feeds}` } })
  return { held: r.headers.get('x-feed-held'), body: await r.text() }
}

t.test('the workspace feed\'s held build is accepted over the API, by digest, and published', async (t) => {
  const guarded = await srv.call('PATCH', `/v1/admin/workspaces/${ws}`, 'root', { guards: { min_entries: 5 } })
  t.equal(guarded.status, 200)
  await until('the workspace feed to publish five entries', feed, (f) => f.body.includes('198.51.100.1'))
  const none = await srv.call('POST', accept, 'admin', {})
  t.equal(none.status, 409, 'nothing held yet')
  t.same(none.body, { error: 'ConflictError', message: `the feed of workspace ${ws} has no held build`, code: 409 })

  await store.rules.deleteAccessByTarget(ws, { type: 'ip', value: '198.51.100.1/32' })
  await until('the guard to hold', feed, (f) => f.held === 'min_entries')
  const shown = await until('the held build in GET', () => srv.call('GET', `/v1/admin/workspaces/${ws}`, 'admin'), (r) => r.body.publish?.held !== null && r.body.publish?.held !== undefined)
  const held = shown.body.publish.held as Json
  t.match(held, { digest: /^[0-9a-f]{32}$/, guards: { block: 'min_entries' } })
  t.ok(!Number.isNaN(Date.parse(held.since as string)), 'since is a time')

  const wrong = await srv.call('POST', accept, 'admin', { digest: '0'.repeat(32) })
  t.equal(wrong.status, 409)
  t.same(wrong.body, { error: 'ConflictError', message: `the held build of the feed of workspace ${ws} is ${held.digest as string}, not ${'0'.repeat(32)}; nothing accepted`, code: 409 })
  t.equal((await store.workspaces.get(ws))?.feedGuards?.accepted, undefined, 'nothing accepted')
  t.equal((await feed()).held, 'min_entries', 'still held')

  const ok = await srv.call('POST', accept, 'admin', { digest: held.digest })
  t.equal(ok.status, 200)
  t.same(ok.body, { id: ws, accepted: held.digest })
  t.equal(ok.headers.get('x-content-type-options'), 'nosniff')
  t.same((await store.workspaces.get(ws))?.feedGuards, { minEntries: 5, accepted: held.digest }, 'recorded with the guards, as `list accept` records it')
  const published = await until('the accepted build to be served', feed, (f) => f.held === null)
  t.notOk(published.body.includes('198.51.100.1/32'), 'the accepted build is the one served')
  t.ok(published.body.includes('198.51.100.3'), 'with the other four')

  const audit = await srv.call('GET', '/v1/admin/audit?limit=1', 'admin')
  t.match(JSON.parse(audit.text.trim()), { action: 'workspace.accept', target: ws, key_id: srv.keyIds.admin, address: '127.0.0.1', workspace: ws, status: 200 })

  // Guards set later merge, as `workspace update` merges them: the accepted digest stays.
  const merged = await srv.call('PATCH', `/v1/admin/workspaces/${ws}`, 'root', { guards: { max_grow_pct: 500 } })
  t.match(merged.body.guards, { min_entries: 5, max_grow_pct: 500, accepted: held.digest })
  const after = await until('the held state to clear', () => srv.call('GET', `/v1/admin/workspaces/${ws}`, 'admin'), (r) => r.body.publish?.held === null)
  t.equal(after.body.publish.published_digest, held.digest, 'the accepted build is the published one')
  t.equal((await srv.call('POST', accept, 'admin', {})).status, 409, 'nothing held any more')
})

t.test('who may accept: admin in its own workspace, admin:all in any; 401/403', async (t) => {
  const cases: Array<{ key: AdminKeyName | null, path: string, status: number, error: string }> = [
    { key: null, path: accept, status: 401, error: 'UnauthorizedError' },
    { key: 'revoked', path: accept, status: 401, error: 'UnauthorizedError' },
    { key: 'feeds', path: accept, status: 403, error: 'ForbiddenError' },
    { key: 'signals', path: accept, status: 403, error: 'ForbiddenError' },
    { key: 'rules', path: accept, status: 403, error: 'ForbiddenError' },
    { key: 'otherAdmin', path: accept, status: 404, error: 'NotFoundError' },
    { key: 'admin', path: `/v1/admin/workspaces/${srv.other.id}/accept`, status: 404, error: 'NotFoundError' },
    { key: 'root', path: '/v1/admin/workspaces/00000000-0000-4000-8000-000000000000/accept', status: 404, error: 'NotFoundError' },
    // Reached: nothing is held in the other workspace.
    { key: 'root', path: `/v1/admin/workspaces/${srv.other.id}/accept`, status: 409, error: 'ConflictError' },
    { key: 'otherAdmin', path: `/v1/admin/workspaces/${srv.other.id}/accept`, status: 409, error: 'ConflictError' },
  ]
  for (const c of cases) {
    const r = await srv.call('POST', c.path, c.key, {})
    t.equal(r.status, c.status, `${String(c.key)} ${c.path}`)
    t.equal(r.body.error, c.error, `${String(c.key)} ${c.path}`)
    t.equal(r.headers.get('content-security-policy'), "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
  }
  const get = await srv.call('GET', accept, 'admin')
  t.equal(get.status, 405)
  t.equal(get.headers.get('allow'), 'POST')
})

t.test('bad accept bodies', async (t) => {
  const cases: Array<{ description: string, body: unknown, headers?: Record<string, string>, status: number, expected: Json }> = [
    { description: 'digest not a string', body: { digest: 5 }, status: 400, expected: { error: 'ValidationError', details: [{ field: 'digest', message: 'must be string', value: 5 }] } },
    { description: 'an unknown field', body: { digest: 'a', force: true }, status: 400, expected: { error: 'ValidationError', details: [{ field: 'force', message: 'must NOT have additional properties', value: true }] } },
    { description: 'not an object', body: '[]', status: 400, expected: { error: 'ValidationError', details: [{ field: '', message: 'must be object' }] } },
    { description: 'not JSON', body: '{', status: 400, expected: { error: 'BadRequestError', message: 'request body is not valid JSON' } },
    { description: 'not application/json', body: '{}', headers: { 'content-type': 'text/plain' }, status: 400, expected: { code: 400, message: /Content-Type/ } },
  ]
  for (const c of cases) {
    const r = await srv.call('POST', accept, 'admin', c.body, c.headers)
    t.equal(r.status, c.status, c.description)
    t.match(r.body, c.expected, c.description)
  }
})
