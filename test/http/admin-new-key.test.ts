/**
 * A key created after the server's last key reload (by the CLI, another node, a script) is looked
 * up in the store on its first request — an await before the route reads the body. uWS delivers
 * the body meanwhile, so the body must be read from the moment the request arrives: before the
 * fix every write with such a key hung until the client gave up (bench/soak's first admin call).
 * Each case is a write with a body, made with a key created a moment before, no reload between.
 */
import t from 'tap'
import { startAdminServer } from '../helpers/admin-server.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'

const srv = await startAdminServer()
t.teardown(() => srv.close())
const store = srv.server.store

async function freshKey (): Promise<string> {
  const key = generateApiKey()
  await store.keys.create({ workspaceId: srv.main.id, hash: hashApiKey(key), scopes: ['admin'] })
  return key
}

async function send (method: string, path: string, key: string, body: unknown): Promise<{ status: number, json: Record<string, unknown> }> {
  const res = await fetch(srv.base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  })
  return { status: res.status, json: await res.json() as Record<string, unknown> }
}

t.test('writes with a key the server has not loaded yet are answered, with their bodies', async (t) => {
  const created = await send('POST', '/v1/admin/lists', await freshKey(), { name: 'first-call', description: 'd0' })
  t.equal(created.status, 201, 'POST answered')
  t.equal(created.json.name, 'first-call', 'from the body sent')
  const id = created.json.id as string
  const patched = await send('PATCH', `/v1/admin/lists/${id}`, await freshKey(), { description: 'd1' })
  t.equal(patched.status, 200, 'PATCH answered')
  t.equal(patched.json.description, 'd1')
  const bad = await send('POST', '/v1/admin/lists', await freshKey(), '{"name":')
  t.equal(bad.status, 400, 'a bad body is still refused as such')
  const big = await send('POST', '/v1/admin/lists', await freshKey(), { name: 'big', description: 'x'.repeat(2_000_000) })
  t.equal(big.status, 400, 'a body over the cap is refused')
  const unknown = await send('POST', '/v1/admin/lists', generateApiKey(), { name: 'nobody', description: '' })
  t.equal(unknown.status, 401, 'a key that exists nowhere: 401, not a hang')
})
