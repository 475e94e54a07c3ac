/**
 * The key's bouncer setting through the admin API (docs/bouncers.md): PUT and DELETE
 * /v1/admin/keys/{id}/bouncer, shown with the key; bad bodies as a table; another workspace's
 * key is not found.
 */
import t from 'tap'
import { startAdminServer } from '../helpers/admin-server.js'

const srv = await startAdminServer()
t.teardown(() => srv.close())

const call = async (method: string, path: string, key: string, body?: unknown): Promise<{ status: number, body: Record<string, unknown> }> => {
  const r = await fetch(`${srv.base}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  return { status: r.status, body: await r.json() as Record<string, unknown> }
}

t.test('set, show, clear', async (t) => {
  const list = await call('POST', '/v1/admin/lists', srv.keys.admin, { name: 'edge', selector: { team: 'a' } })
  t.equal(list.status, 201)
  const path = `/v1/admin/keys/${srv.keyIds.feeds}/bouncer`
  const set = await call('PUT', path, srv.keys.admin, { list: 'edge', action: 'allow' })
  t.equal(set.status, 200)
  t.same(set.body.bouncer, { list: list.body.id, action: 'allow' }, 'the list named, by its id')
  const keys = await call('GET', '/v1/admin/keys', srv.keys.admin)
  t.same((keys.body.items as Array<{ id: string, bouncer?: unknown }>).find((k) => k.id === srv.keyIds.feeds)?.bouncer, { list: list.body.id, action: 'allow' })
  t.same((await call('PUT', path, srv.keys.admin, {})).body.bouncer, { list: null, action: 'block' }, 'an empty body: the workspace feed, block')
  const cleared = await call('DELETE', path, srv.keys.admin)
  t.equal(cleared.status, 200)
  t.equal(cleared.body.bouncer, undefined, 'cleared: the default, not shown')
})

t.test('bad input', async (t) => {
  const path = `/v1/admin/keys/${srv.keyIds.feeds}/bouncer`
  const cases = [
    { description: 'action not an action', body: { action: 'drop' }, status: 400 },
    { description: 'an unknown field', body: { list: null, family: 'v4' }, status: 400 },
    { description: 'list not a string', body: { list: 7 }, status: 400 },
    { description: 'a list that does not exist', body: { list: 'nope' }, status: 404 },
    { description: 'not an object', body: ['edge'], status: 400 },
  ]
  for (const c of cases) {
    const r = await call('PUT', path, srv.keys.admin, c.body)
    t.equal(r.status, c.status, c.description)
  }
  t.equal((await call('PUT', `/v1/admin/keys/${srv.keyIds.feeds}/bouncer`, srv.keys.otherAdmin, {})).status, 404, 'another workspace\'s key: not found')
  t.equal((await call('PUT', `/v1/admin/keys/${srv.keyIds.revoked}/bouncer`, srv.keys.admin, {})).status, 404, 'a revoked key: not found')
})
