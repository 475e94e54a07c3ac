/**
 * One consumer shape (issue 36 item 8): GET /v1/admin/consumers and `threatfeed consumers ls
 * --json` answer the same array for the same store, field for field and in the same order, and
 * every field name is spelled as the admin API spells them (snake_case).
 */
import t from 'tap'
import { rmSync } from 'node:fs'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { consumersLs, makeFixture, poll, serverEnv, start, storedConsumers } from '../helpers/consumers.js'

const f = await makeFixture()
t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
const admin = generateApiKey()
{
  const store = await openStore({ kind: 'embedded', dataDir: f.dir })
  await store.keys.create({ workspaceId: f.workspaceId, hash: hashApiKey(admin), scopes: ['admin'] })
  await store.close()
}
const { server } = await start(serverEnv(f.dir, { THREATFEED_CONSUMER_STALE: '1h', THREATFEED_LOG_LEVEL: 'silent' }))
t.teardown(() => server.stop())
const port = server.port

/** Every key of a JSON value, at any depth. */
function keysOf (v: unknown): string[] {
  if (Array.isArray(v)) return v.flatMap(keysOf)
  if (typeof v !== 'object' || v === null) return []
  return Object.entries(v).flatMap(([k, x]) => [k, ...keysOf(x)])
}

t.test('the admin API\'s consumers and consumers ls --json are one array', async (t) => {
  await poll(port, { key: f.key, from: '127.0.0.2', userAgent: 'FortiGate-600E' })
  await poll(port, { key: f.key, from: '127.0.0.2', userAgent: 'FortiGate-600E' })
  await poll(port, { key: f.key, from: '127.0.0.3', userAgent: 'PAN-OS/10.2', path: `/v1/threat/feeds/${f.listId}?client=fw-b` })
  // Three 4xx in a row: stale (failing), so the order has a stale one to put first.
  for (let i = 0; i < 3; i++) await poll(port, { key: f.key, from: '127.0.0.4', userAgent: 'misconfigured', path: '/v1/threat/feeds?family=v5' })
  await storedConsumers(server, (c) => c.length === 3 && c.reduce((n, x) => n + x.polls, 0) === 6)
  const res = await fetch(`http://127.0.0.1:${port}/v1/admin/consumers`, { headers: { authorization: `Bearer ${admin}` } })
  t.equal(res.status, 200)
  const api = (await res.json() as { items: unknown[] }).items
  const cli = await consumersLs(f.dir, ['--stale', '1h'])
  t.equal(api.length, 3)
  t.same(cli, api, 'deep equal, in the same order')
  t.same(Object.keys(cli[0]!), Object.keys(api[0] as object), 'the same fields in the same order')
  const bad = [...new Set(keysOf(api))].filter((k) => !/^[a-z0-9]+(_[a-z0-9]+)*$/.test(k))
  t.same(bad, [], 'every field name in snake_case')
  t.match(api.find((c) => (c as { user_agent: string }).user_agent === 'PAN-OS/10.2'), { client: 'fw-b', list: f.listId, list_name: 'edl', polls: { total: 1, ok: 1, not_modified: 0, client_errors: 0, server_errors: 0 } })
  t.match(api[0], { user_agent: 'misconfigured', stale: true, stale_reason: 'failing' }, 'stale first')
})
