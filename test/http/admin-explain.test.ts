/**
 * GET /v1/admin/explain (issue 22: "explain as in its own issue", for the workspace an admin key
 * names): an `admin:all` key explains an address in any workspace, an `admin` key only in its own
 * (another is the 404 of an unknown one); the answer is /v1/threat/explain's; 401/403 and bad
 * queries as tables; the admin API's headers.
 */
import t from 'tap'
import { startAdminServer, type AdminKeyName, type Json } from '../helpers/admin-server.js'
import type { AccessRuleInput } from '../../src/store/types.js'

const srv = await startAdminServer()
t.teardown(() => srv.close())
const store = srv.server.store

const rule = (workspaceId: string, ip: string, ruleRef: string): AccessRuleInput => ({
  kind: 'access_rule', workspaceId, ruleRef, labels: { feed: 'edge' }, reason: 'seen scanning', expiresAt: null, seq: 0,
  target: { type: 'ip', value: ip }, action: 'block', name: null, confidence: null, severity: null,
})
await store.rules.upsertAccessRule(rule(srv.main.id, '192.0.2.0/24', 'main-net'))
await store.rules.upsertAccessRule(rule(srv.other.id, '198.51.100.0/24', 'other-net'))
const otherList = await store.lists.create({ workspaceId: srv.other.id, name: 'edge', description: '', defaults: {}, selector: { feed: 'edge' } })

const explain = (key: AdminKeyName | null, query: string): ReturnType<typeof srv.call> => srv.call('GET', `/v1/admin/explain?${query}`, key)
const ruleRefs = (body: Json): string[] => body.feeds.flatMap((f: Json) => f.actions.block.rules.map((r: Json) => r.rule_ref as string))

t.test('admin:all explains an address in another workspace, a list of it built as a poll would', async (t) => {
  const r = await explain('root', `workspace=${srv.other.id}&ip=198.51.100.7&list=${otherList.id}`)
  t.equal(r.status, 200)
  t.same(r.body.workspace, { id: srv.other.id, name: 'other' })
  t.equal(r.body.feeds.length, 1)
  t.equal(r.body.feeds[0].feed, otherList.id)
  t.equal(r.body.feeds[0].actions.block.published, true, 'the other workspace\'s list publishes the address')
  t.same(ruleRefs(r.body), ['other-net'])
  t.equal(r.headers.get('content-security-policy'), "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
  t.equal(r.headers.get('cache-control'), 'no-store')

  const byName = await explain('root', `workspace=${srv.other.id}&ip=198.51.100.7&list=edge`)
  t.equal(byName.body.feeds[0].feed, otherList.id, 'a list named, as on /v1/threat/explain')

  const every = await explain('root', `workspace=${srv.other.id}&ip=198.51.100.7`)
  t.same(every.body.feeds.map((f: Json) => f.feed), ['*', otherList.id], 'every feed of that workspace: its workspace feed and its list')
  t.same(ruleRefs(every.body), ['other-net', 'other-net'])
})

t.test('without workspace, the key\'s own; an admin key in its own, never another', async (t) => {
  const own = await explain('root', 'ip=198.51.100.7')
  t.equal(own.body.workspace.id, srv.main.id, 'admin:all without workspace: its own')
  t.same(ruleRefs(own.body), [], 'the other workspace\'s rule is not in the main workspace')

  const admin = await explain('admin', `workspace=${srv.main.id}&ip=192.0.2.9`)
  t.equal(admin.status, 200)
  t.same(ruleRefs(admin.body), ['main-net'])
  const otherAdmin = await explain('otherAdmin', 'ip=198.51.100.7')
  t.equal(otherAdmin.body.workspace.id, srv.other.id)
  t.same(ruleRefs(otherAdmin.body), ['other-net', 'other-net'])

  for (const [key, ws] of [['admin', srv.other.id], ['otherAdmin', srv.main.id], ['admin', '00000000-0000-4000-8000-000000000000']] as const) {
    const r = await explain(key, `workspace=${ws}&ip=198.51.100.7`)
    t.equal(r.status, 404, `${key} naming workspace ${ws}`)
    t.same(r.body, { error: 'NotFoundError', message: `no workspace with id ${ws}`, code: 404 })
  }
})

t.test('the answer is /v1/threat/explain\'s for the same workspace', async (t) => {
  const viaAdmin = await explain('admin', 'ip=192.0.2.9')
  const viaThreat = await srv.call('GET', '/v1/threat/explain?ip=192.0.2.9', 'admin')
  t.equal(viaThreat.status, 200)
  t.same({ ...viaAdmin.body, at: null }, { ...viaThreat.body, at: null })
})

t.test('401 and 403', async (t) => {
  const cases: Array<{ key: AdminKeyName | null, status: number, error: string }> = [
    { key: null, status: 401, error: 'UnauthorizedError' },
    { key: 'revoked', status: 401, error: 'UnauthorizedError' },
    { key: 'feeds', status: 403, error: 'ForbiddenError' },
    { key: 'signals', status: 403, error: 'ForbiddenError' },
    { key: 'rules', status: 403, error: 'ForbiddenError' },
  ]
  for (const c of cases) {
    const r = await explain(c.key, `workspace=${srv.other.id}&ip=198.51.100.7`)
    t.equal(r.status, c.status, String(c.key))
    t.equal(r.body.error, c.error, String(c.key))
    t.equal(r.headers.get('x-content-type-options'), 'nosniff')
  }
})

t.test('bad queries', async (t) => {
  const cases: Array<{ description: string, query: string, status: number, body: Json }> = [
    { description: 'no ip', query: `workspace=${srv.other.id}`, status: 400, body: { error: 'ValidationError', details: [{ field: 'ip', message: 'ip: an address is required (?ip=ADDR)', value: '' }] } },
    { description: 'a network', query: 'ip=198.51.100.0/24', status: 400, body: { error: 'ValidationError', details: [{ field: 'ip', message: /is a network; give one address/, value: '198.51.100.0/24' }] } },
    { description: 'not an address', query: 'ip=nope', status: 400, body: { error: 'ValidationError', details: [{ field: 'ip', message: /is not an IPv4 or IPv6 address/, value: 'nope' }] } },
    { description: 'ip twice', query: 'ip=192.0.2.1&ip=192.0.2.2', status: 400, body: { error: 'ValidationError', details: [{ field: 'ip', message: 'repeated parameter' }] } },
    { description: 'workspace twice', query: `ip=192.0.2.1&workspace=${srv.main.id}&workspace=${srv.other.id}`, status: 400, body: { details: [{ field: 'workspace', message: 'repeated parameter' }] } },
    { description: 'unknown parameter', query: 'ip=192.0.2.1&family=v4', status: 400, body: { details: [{ field: 'family' }] } },
    { description: 'unknown workspace', query: 'ip=192.0.2.1&workspace=nope', status: 404, body: { error: 'NotFoundError' } },
    { description: 'unknown list', query: `ip=192.0.2.1&workspace=${srv.other.id}&list=nope`, status: 404, body: { error: 'NotFoundError' } },
    { description: 'a list of another workspace', query: `ip=192.0.2.1&workspace=${srv.main.id}&list=${otherList.id}`, status: 404, body: { error: 'NotFoundError' } },
  ]
  for (const c of cases) {
    const r = await explain('root', c.query)
    t.equal(r.status, c.status, c.description)
    t.match(r.body, c.body, c.description)
  }
  const wrong = await srv.call('POST', '/v1/admin/explain?ip=192.0.2.1', 'root', {})
  t.equal(wrong.status, 405)
  t.equal(wrong.headers.get('allow'), 'GET, HEAD')
})
