/**
 * What the console shows an operator on day one, right in the admin API (issue 36 item 7): a v2
 * batch refused whole is counted as the batch it was; a list that never published says so
 * (publish.last_modified null) and, once published, carries its feed's Last-Modified — the time
 * of the last change, not of the hourly sample; a held build's diff in the API's spelling; the
 * key a session signed in with.
 */
import t from 'tap'
import { startAdminServer, type Json } from '../helpers/admin-server.js'

const srv = await startAdminServer()
t.teardown(() => srv.close())

async function until<T> (what: string, probe: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await probe()
    if (ok(v)) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

t.test('a v2 batch refused whole (7 entries, 2 without rule.type) is journalled as 7 entries, 2 invalid, none accepted', async (t) => {
  const waf = (ref: string, type?: string) => ({ kind: 'waf_rule', op: 'upsert', rule_ref: ref, rule: { ...(type === undefined ? {} : { type }), name: ref, expression: 'http.request.uri.path eq "/x"', action: 'block' } })
  const body = [
    ...[1, 2, 3, 4, 5].map((i) => ({ kind: 'access_rule', op: 'upsert', rule: { target: { ip: `192.0.2.${i}` }, action: 'block' } })),
    waf('no-type-1'),
    waf('no-type-2'),
  ]
  const r = await fetch(`${srv.base}/v2/signal`, { method: 'POST', headers: { authorization: `Bearer ${srv.keys.signals}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
  t.equal(r.status, 400, 'refused whole (DECISIONS §3)')
  const batches = await until('the batch journalled', () => srv.call('GET', '/v1/admin/batches', 'admin'), (b) => b.body.items.length > 0)
  t.match(batches.body.items[0], { api: 'v2', status: 400, entries: 7, accepted: 0, failed: 2, batch: null })
  t.match(batches.body.items[0].errors, [/^\[5\]\.rule\.type: /, /^\[6\]\.rule\.type: /], 'the two reasons')
  t.equal(batches.body.items[0].errors.length, 2)
})

t.test('a list that never published has publish.last_modified null; once polled, its feed\'s Last-Modified', async (t) => {
  const created = await srv.call('POST', '/v1/admin/lists', 'admin', { name: 'day-one', guards: { max_shrink_pct: 50 } })
  t.equal(created.status, 201)
  const id = created.body.id as string
  t.same(created.body.publish, { last_modified: null, published_digest: null, held: null }, 'never built: not published')
  t.equal((await srv.call('GET', `/v1/admin/lists/${id}`, 'admin')).body.publish.last_modified, null)
  await fetch(`${srv.base}/v1/signal`, { method: 'POST', headers: { authorization: `Bearer ${srv.keys.signals}`, 'content-type': 'application/json' }, body: JSON.stringify([{ type: 'access_rules', action: 'block', ip: '198.51.100.77' }]) })
  const feed = await until('the list\'s feed with the rule', () => fetch(`${srv.base}/v1/threat/feeds/${id}`, { headers: { authorization: `Bearer ${srv.keys.feeds}` } }).then(async (r) => ({ r, text: await r.text() })), ({ text }) => text.includes('198.51.100.77'))
  const lastModified = new Date(feed.r.headers.get('last-modified')!).toISOString()
  const shown = await until('the list published', () => srv.call('GET', `/v1/admin/lists/${id}`, 'admin'), (l) => l.body.publish.last_modified !== null && new Date(l.body.publish.last_modified as string).toISOString().slice(0, 19) === lastModified.slice(0, 19))
  t.equal(new Date(shown.body.publish.last_modified as string).toISOString().slice(0, 19), lastModified.slice(0, 19), 'the feed\'s Last-Modified (whole seconds, as HTTP has them)')
  t.ok(shown.body.publish.published_digest !== null, 'the guard recorded the build it published')
  const listed = (await srv.call('GET', '/v1/admin/lists', 'admin')).body.items.find((l: Json) => l.id === id)
  t.same(listed.publish, shown.body.publish, 'the same in the listing')

  // The hourly sample says when it was taken (at) and when the content last changed (last_modified).
  t.ok(await srv.server.adminJournal.sampleFeeds() > 0)
  const versions = await srv.call('GET', `/v1/admin/feed-versions?list=${id}`, 'admin')
  const plain = versions.body.items.find((v: Json) => v.variant === 'plain|both|block|')
  t.ok(plain, 'the polled variant sampled')
  const point = plain.points[plain.points.length - 1]
  t.equal(Date.parse(point.at) % 3_600_000, 0, 'at: the start of the hour sampled')
  t.equal(new Date(point.last_modified as string).toISOString().slice(0, 19), lastModified.slice(0, 19), 'last_modified: the change\'s time')

  // The workspace feed too: GET /v1/admin/workspaces/ID carries it.
  const ws = await srv.call('GET', `/v1/admin/workspaces/${srv.main.id}`, 'admin')
  t.match(ws.body.publish, { last_modified: null, published_digest: null, held: null }, 'the workspace feed was never polled')
})

t.test('a held build: its guard by its API field, its diff in the API\'s spelling', async (t) => {
  const l = (await srv.call('POST', '/v1/admin/lists', 'admin', { name: 'held-diff', guards: { min_entries: 10 } })).body
  const diff = { published: 3, held: 1, added: 0, removed: 2, addedSample: [], removedSample: ['10.0.0.1/32', '10.0.0.3/32'] }
  // A state recorded before guard names were the API's fields (`min-entries`) reads as the current name.
  await srv.server.store.lists.setPublishState(l.id, { held: { digest: 'd1', guards: { block: 'min-entries' }, since: Date.now(), diff: { block: diff, allow: { ...diff, published: 0, held: 0, removed: 0, removedSample: [] } } }, publishedDigest: 'd0' })
  const shown = await srv.call('GET', `/v1/admin/lists/${l.id as string}`, 'admin')
  t.match(shown.body.publish.held, { digest: 'd1', guards: { block: 'min_entries' } })
  t.same(shown.body.publish.held.diff.block, { published: 3, held: 1, added: 0, removed: 2, added_sample: [], removed_sample: ['10.0.0.1/32', '10.0.0.3/32'] })
})

t.test('whoami: the key a session is signed in with, by id; never the key', async (t) => {
  const cases = [
    { description: 'an admin key', key: 'admin' as const, status: 200, expected: { key_id: srv.keyIds.admin, workspace: srv.main.id, scopes: ['admin'] } },
    { description: 'an admin:all key', key: 'root' as const, status: 200, expected: { key_id: srv.keyIds.root, workspace: srv.main.id, scopes: ['admin:all'] } },
    { description: 'a key without an admin scope', key: 'feeds' as const, status: 403, expected: null },
    { description: 'no key', key: null, status: 401, expected: null },
  ]
  for (const c of cases) {
    const r = await srv.call('GET', '/v1/admin/whoami', c.key)
    t.equal(r.status, c.status, c.description)
    if (c.expected !== null) t.same(r.body, c.expected, c.description)
    if (c.key !== null) t.notOk(r.text.includes(srv.keys[c.key]), `${c.description}: not the key itself`)
  }
})
