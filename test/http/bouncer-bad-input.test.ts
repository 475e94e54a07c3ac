/**
 * Bad input to the bouncer routes (docs/bouncers.md), as a table: every case answers with LAPI's
 * error body, `{"message": …, "errors": CODE}`, which go-cs-bouncer prints as
 * "API error: MESSAGE (CODE)"; what LAPI accepts (an unknown scope, unknown parameters) is
 * accepted here too.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startRealServer } from '../helpers/real-server.js'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'

t.setTimeout(120_000)
const dir = mkdtempSync(join(tmpdir(), 'tf-bouncer-bad-'))
// A key without feeds:read, made in the store before the server opens it.
const writeOnly = generateApiKey()
{
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = await store.workspaces.create({ name: 'other', subscription: 'active' })
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(writeOnly), scopes: ['signals:write'] })
  await store.close()
}
const s = await startRealServer(dir, { THREATFEED_FEED_REBUILD_MS: '0' })
t.teardown(async () => {
  await s.server.stop()
  rmSync(dir, { recursive: true, force: true })
})
await s.postBlocks(['192.0.2.7'])

interface Case {
  readonly description: string
  readonly path: string
  readonly headers?: Record<string, string>
  readonly status: number
  /** The body exactly; for 200, only the status and a JSON body are checked. */
  readonly body?: { message: string, errors: string }
}
const key = { 'x-api-key': s.key }
const cases: Case[] = [
  { description: 'no X-Api-Key', path: '/v1/decisions/stream?startup=true', status: 401, body: { message: 'invalid or missing API key', errors: 'TF_ERR_UNAUTHORIZED' } },
  { description: 'an empty X-Api-Key', path: '/v1/decisions/stream?startup=true', headers: { 'x-api-key': '' }, status: 401, body: { message: 'invalid or missing API key', errors: 'TF_ERR_UNAUTHORIZED' } },
  { description: 'a wrong X-Api-Key', path: '/v1/decisions/stream?startup=true', headers: { 'x-api-key': 'tf_live_nope' }, status: 401, body: { message: 'invalid or missing API key', errors: 'TF_ERR_UNAUTHORIZED' } },
  { description: 'a wrong key, live mode', path: '/v1/decisions?ip=192.0.2.7', headers: { 'x-api-key': 'x' }, status: 401, body: { message: 'invalid or missing API key', errors: 'TF_ERR_UNAUTHORIZED' } },
  { description: 'a key without feeds:read', path: '/v1/decisions/stream?startup=true', headers: { 'x-api-key': writeOnly }, status: 403, body: { message: 'API key lacks the feeds:read scope', errors: 'TF_ERR_FORBIDDEN' } },
  { description: 'a key without feeds:read, live mode', path: '/v1/decisions?ip=192.0.2.7', headers: { 'x-api-key': writeOnly }, status: 403, body: { message: 'API key lacks the feeds:read scope', errors: 'TF_ERR_FORBIDDEN' } },
  { description: 'startup=1', path: '/v1/decisions/stream?startup=1', headers: key, status: 400, body: { message: 'startup must be true or false, not "1"', errors: 'TF_ERR_BAD_REQUEST' } },
  { description: 'startup=True', path: '/v1/decisions/stream?startup=True', headers: key, status: 400, body: { message: 'startup must be true or false, not "True"', errors: 'TF_ERR_BAD_REQUEST' } },
  { description: 'startup empty', path: '/v1/decisions/stream?startup=', headers: key, status: 400, body: { message: 'startup must be true or false, not ""', errors: 'TF_ERR_BAD_REQUEST' } },
  { description: 'a scope that is not a word', path: '/v1/decisions/stream?scopes=ip,r%20ange', headers: key, status: 400, body: { message: 'scopes: "r ange" is not a scope (ip, range)', errors: 'TF_ERR_BAD_REQUEST' } },
  { description: 'a scope of punctuation', path: '/v1/decisions/stream?scopes=%2A', headers: key, status: 400, body: { message: 'scopes: "*" is not a scope (ip, range)', errors: 'TF_ERR_BAD_REQUEST' } },
  { description: 'an unknown scope selects nothing (as LAPI)', path: '/v1/decisions/stream?startup=true&scopes=as', headers: key, status: 200 },
  { description: 'unknown parameters are ignored (as LAPI)', path: '/v1/decisions/stream?startup=true&community_pull=false&foo=bar', headers: key, status: 200 },
  { description: 'ip not an address', path: '/v1/decisions?ip=192.0.2', headers: key, status: 400, body: { message: 'ip: "192.0.2" is not an IPv4 or IPv6 address', errors: 'TF_ERR_INVALID_ARGUMENT' } },
  { description: 'ip with a prefix', path: '/v1/decisions?ip=192.0.2.7/32', headers: key, status: 400, body: { message: 'ip: "192.0.2.7/32" is a network; give one address', errors: 'TF_ERR_INVALID_ARGUMENT' } },
  { description: 'ip empty', path: '/v1/decisions?ip=', headers: key, status: 400, body: { message: 'ip: an address is required (?ip=ADDR)', errors: 'TF_ERR_INVALID_ARGUMENT' } },
  { description: 'ip with leading zeros', path: '/v1/decisions?ip=192.0.2.007', headers: key, status: 400, body: { message: 'ip: "192.0.2.007" is not an IPv4 or IPv6 address', errors: 'TF_ERR_INVALID_ARGUMENT' } },
  { description: 'range not a CIDR', path: '/v1/decisions?range=192.0.2.0/33', headers: key, status: 400, body: { message: 'range: "192.0.2.0/33" is not a CIDR network', errors: 'TF_ERR_BAD_REQUEST' } },
  { description: 'range garbage', path: '/v1/decisions?range=banana', headers: key, status: 400, body: { message: 'range: "banana" is not a CIDR network', errors: 'TF_ERR_BAD_REQUEST' } },
  { description: 'ip and range together', path: '/v1/decisions?ip=192.0.2.7&range=192.0.2.0/24', headers: key, status: 400, body: { message: 'give ip or range, not both', errors: 'TF_ERR_BAD_REQUEST' } },
  { description: 'contains=false', path: '/v1/decisions?range=192.0.2.0/24&contains=false', headers: key, status: 400, body: { message: 'contains: only true (the decisions holding the address or range) is answered', errors: 'TF_ERR_BAD_REQUEST' } },
]

for (const c of cases) {
  t.test(c.description, async (t) => {
    const r = await fetch(`${s.base}${c.path}`, { headers: { 'user-agent': 'crowdsec-custom-bouncer/v0.0.15', ...c.headers } })
    t.equal(r.status, c.status)
    t.equal(r.headers.get('content-type'), 'application/json')
    const body = await r.json() as unknown
    if (c.body !== undefined) t.same(body, c.body)
    if (c.status === 401) t.ok(r.headers.get('www-authenticate')?.startsWith('Bearer '), 'a 401 says how to authenticate')
  })
}

t.test('a method other than GET or HEAD: 405 in the same shape', async (t) => {
  const r = await fetch(`${s.base}/v1/decisions/stream`, { method: 'POST', headers: key })
  t.equal(r.status, 405)
  t.equal(r.headers.get('allow'), 'GET, HEAD')
  t.same(await r.json(), { message: 'method not allowed; use GET, HEAD', errors: 'TF_ERR_METHOD_NOT_ALLOWED' })
})

t.test('HEAD answers 200 without a body and moves no cursor (as LAPI)', async (t) => {
  const agent = { ...key, 'user-agent': 'head/1' }
  const first = await (await fetch(`${s.base}/v1/decisions/stream?startup=true`, { headers: agent })).json() as { new: unknown[] | null }
  t.equal(first.new?.length, 1)
  const head = await fetch(`${s.base}/v1/decisions/stream`, { method: 'HEAD', headers: agent })
  t.equal(head.status, 200)
  t.same(await (await fetch(`${s.base}/v1/decisions/stream`, { headers: agent })).json(), { new: null, deleted: null })
})
