/**
 * /v1/admin/lists (issue 22): the API twin of `threatfeed list`: defaults, shards, selector and
 * guards; the list's feed answers at once with its defaults; accept of a held build; another
 * workspace's list is a 404; bad bodies as a table; every change audited.
 */
import t from 'tap'
import { startAdminServer, type Json } from '../helpers/admin-server.js'

const srv = await startAdminServer()
t.teardown(() => srv.close())

t.test('create, read, update, delete a list; its feed uses the stored defaults', async (t) => {
  const created = await srv.call('POST', '/v1/admin/lists', 'admin', {
    name: 'edge <img src=x onerror=alert(1)>', description: 'edge routers', format: 'dialect_a', family: 'v4', max_entries: 1000, shards: 4,
    selector: { team: 'edge' }, guards: { min_entries: 1, mode: 'hold' },
  })
  t.equal(created.status, 201)
  t.match(created.body, {
    workspace: srv.main.id, name: 'edge <img src=x onerror=alert(1)>', description: 'edge routers',
    defaults: { format: 'dialect_a', family: 'v4', max_entries: 1000, shards: 4 },
    guards: { min_entries: 1, mode: 'hold', accepted: null }, selector: { team: 'edge' },
    publish: { published_digest: null, held: null },
  })
  t.equal(created.headers.get('content-type'), 'application/json', 'names go out as JSON data, never as a page')
  const id = created.body.id as string
  const stored = await srv.server.store.lists.get(id)
  t.same(stored?.defaults, { format: 'dialect_a', family: 'v4', maxEntries: 1000, shards: 4, guards: { minEntries: 1, mode: 'hold' } })

  const updated = await srv.call('PATCH', `/v1/admin/lists/${id}`, 'admin', { family: 'v6', guards: { max_shrink_pct: 20 }, selector: { team: 'core' } })
  t.equal(updated.status, 200)
  t.match(updated.body, { defaults: { format: 'dialect_a', family: 'v6', shards: 4 }, guards: { min_entries: 1, mode: 'hold', max_shrink_pct: 20 }, selector: { team: 'core' } })
  const cleared = await srv.call('PATCH', `/v1/admin/lists/${id}`, 'admin', { guards: null })
  t.equal(cleared.body.guards, null, 'guards: null removes them')

  const one = await srv.call('GET', `/v1/admin/lists/${id}`, 'admin')
  t.same(one.body, cleared.body)
  const all = await srv.call('GET', '/v1/admin/lists', 'admin')
  t.same(all.body.items.map((l: Json) => l.id), [id])

  const deleted = await srv.call('DELETE', `/v1/admin/lists/${id}`, 'admin')
  t.same(deleted.body, { id, deleted: true })
  t.equal((await srv.call('GET', `/v1/admin/lists/${id}`, 'admin')).status, 404)

  const audit = await srv.call('GET', '/v1/admin/audit', 'admin')
  const actions = audit.text.trim().split('\n').map((l) => JSON.parse(l) as Json).filter((l) => l.target === id).map((l) => l.action)
  t.same(actions, ['list.delete', 'list.update', 'list.update', 'list.create'])
})

t.test('a list created here is served at once, with its defaults', async (t) => {
  const created = await srv.call('POST', '/v1/admin/lists', 'admin', { name: 'served', format: 'dialect_a', family: 'v4' })
  const feed = await fetch(`${srv.base}/v1/threat/feeds/${created.body.id as string}`, { headers: { authorization: `Bearer ${srv.keys.feeds}` } })
  t.equal(feed.status, 200)
  const body = await feed.text()
  t.match(body, /^# served\n/, 'dialect_a header with the list name')
  t.match(body, /# family: v4\n/)
})

t.test('accept: the held build by digest; 409 when none is held or the digest is another', async (t) => {
  const l = (await srv.call('POST', '/v1/admin/lists', 'admin', { name: 'guarded', guards: { min_entries: 10 } })).body
  const none = await srv.call('POST', `/v1/admin/lists/${l.id as string}/accept`, 'admin', {})
  t.equal(none.status, 409)
  t.same(none.body, { error: 'ConflictError', message: `list ${l.id as string} has no held build`, code: 409 })
  // What the server records when a guard holds a build (src/feed/guards.ts).
  const diff = { published: 0, held: 1, added: 1, removed: 0, addedSample: ['192.0.2.1/32'], removedSample: [] }
  await srv.server.store.lists.setPublishState(l.id, { held: { digest: 'sha256-abc', guards: { block: 'min_entries' }, since: Date.now(), diff: { block: diff, allow: { ...diff, held: 0, added: 0, addedSample: [] } } }, publishedDigest: null })
  const shown = await srv.call('GET', `/v1/admin/lists/${l.id as string}`, 'admin')
  t.match(shown.body.publish.held, { digest: 'sha256-abc', guards: { block: 'min_entries' } })
  const wrong = await srv.call('POST', `/v1/admin/lists/${l.id as string}/accept`, 'admin', { digest: 'sha256-other' })
  t.equal(wrong.status, 409)
  t.equal((await srv.server.store.lists.get(l.id))?.defaults.guards?.accepted, undefined, 'nothing accepted')
  const ok = await srv.call('POST', `/v1/admin/lists/${l.id as string}/accept`, 'admin', { digest: 'sha256-abc' })
  t.same(ok.body, { id: l.id, accepted: 'sha256-abc' })
  t.equal((await srv.server.store.lists.get(l.id))?.defaults.guards?.accepted, 'sha256-abc')
  const audit = await srv.call('GET', '/v1/admin/audit?limit=1', 'admin')
  t.match(JSON.parse(audit.text.trim()), { action: 'list.accept', target: l.id, key_id: srv.keyIds.admin, address: '127.0.0.1', workspace: srv.main.id })
})

t.test('another workspace\'s list is a 404 to an admin key, and reachable with admin:all', async (t) => {
  const theirs = (await srv.call('POST', '/v1/admin/lists', 'otherAdmin', { name: 'theirs' })).body
  for (const [method, path, body] of [['GET', ''], ['PATCH', '', { name: 'mine' }], ['DELETE', ''], ['POST', '/accept', {}]] as Array<[string, string, unknown?]>) {
    const r = await srv.call(method, `/v1/admin/lists/${theirs.id as string}${path}`, 'admin', body)
    t.equal(r.status, 404, `${method} ${path}`)
    t.same(r.body, { error: 'NotFoundError', message: 'no such access-rules list', code: 404 })
  }
  t.equal((await srv.call('POST', '/v1/admin/lists', 'admin', { workspace: srv.other.id, name: 'x' })).status, 404, 'nor create one there')
  t.equal((await srv.call('GET', `/v1/admin/lists/${theirs.id as string}`, 'root')).status, 200)
  const made = await srv.call('POST', '/v1/admin/lists', 'root', { workspace: srv.other.id, name: 'by-root' })
  t.equal(made.body.workspace, srv.other.id)
})

t.test('bad list bodies: 400 with one detail per problem (the CLI\'s limits)', async (t) => {
  const cases: Array<{ description: string, body: unknown, expected: unknown }> = [
    { description: 'no name', body: { format: 'plain' }, expected: [{ field: 'name', message: "must have required property 'name'", value: null }] },
    { description: 'name too long', body: { name: 'x'.repeat(201) }, expected: [{ field: 'name', message: 'must NOT have more than 200 characters', value: 'x'.repeat(201) }] },
    { description: 'description with a control character', body: { name: 'a', description: 'a\u0007' }, expected: [{ field: 'description', message: 'must match pattern "^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]*$"', value: 'a\u0007' }] },
    { description: 'unknown format', body: { name: 'a', format: 'csv' }, expected: [{ field: 'format', message: 'must be equal to one of the allowed values', value: 'csv' }] },
    { description: 'nftables with both families', body: { name: 'a', format: 'nftables' }, expected: [{ field: 'family', message: 'format nftables needs family v4 or v6 (an nftables set holds one family)', value: null }] },
    { description: 'max_entries 0', body: { name: 'a', max_entries: 0 }, expected: [{ field: 'max_entries', message: 'must be >= 1', value: 0 }] },
    { description: 'max_entries not whole', body: { name: 'a', max_entries: 1.5 }, expected: [{ field: 'max_entries', message: 'must be integer', value: 1.5 }] },
    { description: 'shards 65', body: { name: 'a', shards: 65 }, expected: [{ field: 'shards', message: 'must be <= 64', value: 65 }] },
    { description: 'selector value not a string', body: { name: 'a', selector: { team: 1 } }, expected: [{ field: 'selector.team', message: 'must be string', value: 1 }] },
    { description: 'selector key with $', body: { name: 'a', selector: { $where: 'x' } }, expected: [{ field: 'selector', message: 'must match pattern "^(?!\\$)(?!__proto__$)(?!constructor$)(?!prototype$)[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]*$"', value: { $where: 'x' } }] },
    { description: 'unknown guard', body: { name: 'a', guards: { min_entries: 1, hold_forever: true } }, expected: [{ field: 'guards.hold_forever', message: 'must NOT have additional properties', value: true }] },
    { description: 'guard mode', body: { name: 'a', guards: { mode: 'block' } }, expected: [{ field: 'guards.mode', message: 'must be equal to one of the allowed values', value: 'block' }] },
    { description: 'two problems at once', body: { name: '', confidence: 'sure' }, expected: [{ field: 'name', message: 'must NOT have fewer than 1 characters', value: '' }, { field: 'confidence', message: 'must be equal to one of the allowed values', value: 'sure' }] },
  ]
  const before = (await srv.server.store.lists.list(srv.main.id)).length
  for (const c of cases) {
    const r = await srv.call('POST', '/v1/admin/lists', 'admin', c.body)
    t.equal(r.status, 400, c.description)
    t.same(r.body, { error: 'ValidationError', message: 'Validation failed', details: c.expected, code: 400 }, c.description)
  }
  const some = (await srv.call('POST', '/v1/admin/lists', 'admin', { name: 'nft', format: 'nftables', family: 'v4' })).body
  const updates: Array<{ description: string, body: unknown, expected: unknown }> = [
    { description: 'empty update', body: {}, expected: [{ field: '', message: 'must NOT have fewer than 1 properties', value: {} }] },
    { description: 'merged defaults: nftables then both', body: { family: 'both' }, expected: [{ field: 'family', message: 'format nftables needs family v4 or v6 (an nftables set holds one family)', value: 'both' }] },
    { description: 'a list does not move', body: { workspace: srv.other.id }, expected: [{ field: 'workspace', message: 'must NOT have additional properties', value: srv.other.id }] },
  ]
  for (const c of updates) {
    const r = await srv.call('PATCH', `/v1/admin/lists/${some.id as string}`, 'admin', c.body)
    t.equal(r.status, 400, c.description)
    t.same(r.body.details, c.expected, c.description)
  }
  t.equal((await srv.server.store.lists.list(srv.main.id)).length, before + 1, 'only the good list was made')
})
