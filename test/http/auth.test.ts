import t from 'tap'
import { decideAccess, extractKey, type Principal } from '../../src/http/auth.js'
import type { ApiKey, Workspace } from '../../src/store/types.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'

const b64 = (s: string): string => Buffer.from(s).toString('base64')

t.test('extractKey: Bearer everywhere, Basic api:<key> on feeds only', async (t) => {
  const cases: Array<{ description: string, header: string, api: 'v1' | 'v2' | 'feeds', expected: string | null }> = [
    { description: 'bearer', header: 'Bearer tf_abc', api: 'v1', expected: 'tf_abc' },
    { description: 'bearer scheme is case-insensitive', header: 'bEaReR tf_abc', api: 'v2', expected: 'tf_abc' },
    { description: 'bearer with surrounding spaces', header: 'Bearer   tf_abc  ', api: 'feeds', expected: 'tf_abc' },
    { description: 'empty bearer', header: 'Bearer ', api: 'v1', expected: null },
    { description: 'missing header', header: '', api: 'v1', expected: null },
    { description: 'bare key without scheme', header: 'tf_abc', api: 'v1', expected: null },
    { description: 'basic on feeds', header: `Basic ${b64('api:tf_abc')}`, api: 'feeds', expected: 'tf_abc' },
    { description: 'basic scheme any case', header: `BASIC ${b64('api:tf_abc')}`, api: 'feeds', expected: 'tf_abc' },
    { description: 'basic with another user name', header: `Basic ${b64('admin:tf_abc')}`, api: 'feeds', expected: null },
    { description: 'basic without colon', header: `Basic ${b64('api')}`, api: 'feeds', expected: null },
    { description: 'basic with empty password', header: `Basic ${b64('api:')}`, api: 'feeds', expected: null },
    { description: 'basic is not accepted on signals', header: `Basic ${b64('api:tf_abc')}`, api: 'v1', expected: null },
    { description: 'basic is not accepted on v2', header: `Basic ${b64('api:tf_abc')}`, api: 'v2', expected: null },
    { description: 'password may contain a colon', header: `Basic ${b64('api:a:b')}`, api: 'feeds', expected: 'a:b' },
    { description: 'absurdly long header', header: 'Bearer ' + 'x'.repeat(9000), api: 'v1', expected: null },
    { description: 'other scheme', header: 'Digest username="api"', api: 'feeds', expected: null },
    { description: 'scheme glued to the key', header: 'Bearertf_abc', api: 'v1', expected: null },
    { description: 'basic with junk after the base64', header: `Basic ${b64('api:tf_abc')}!!!`, api: 'feeds', expected: null },
    { description: 'basic without its padding', header: `Basic ${b64('api:tf_abc').replace(/=+$/, '')}`, api: 'feeds', expected: null },
  ]
  for (const c of cases) t.equal(extractKey(c.header, c.api), c.expected, c.description)
})

const ws = (over: Partial<Workspace> = {}): Workspace => ({ id: 'w1', name: 'acme', subscription: 'active', createdAt: 0, deletedAt: null, ...over })
const key = (over: Partial<ApiKey> = {}): ApiKey => ({ id: 'k1', workspaceId: 'w1', hash: 'h', scopes: ['signals:write', 'feeds:read'], createdAt: 0, revokedAt: null, ...over })
const p = (k: Partial<ApiKey> = {}, w: Partial<Workspace> = {}): Principal => ({ key: key(k), workspace: ws(w) })

t.test('decideAccess: 401/402/403 on v1 and feeds, 401 only on v2', async (t) => {
  const cases: Array<{ description: string, principal: Principal | null, scope: 'signals:write' | 'feeds:read', api: 'v1' | 'v2' | 'feeds', status: number, code: string | null, message?: string }> = [
    { description: 'valid', principal: p(), scope: 'signals:write', api: 'v1', status: 200, code: null },
    { description: 'unknown key v1', principal: null, scope: 'signals:write', api: 'v1', status: 401, code: 'TF_ERR_UNAUTHORIZED', message: 'invalid or missing API key' },
    { description: 'unknown key feeds', principal: null, scope: 'feeds:read', api: 'feeds', status: 401, code: 'TF_ERR_UNAUTHORIZED' },
    { description: 'revoked', principal: p({ revokedAt: 1 }), scope: 'signals:write', api: 'v1', status: 401, code: 'TF_ERR_UNAUTHORIZED' },
    { description: 'deleted workspace', principal: p({}, { deletedAt: 1 }), scope: 'feeds:read', api: 'feeds', status: 401, code: 'TF_ERR_UNAUTHORIZED' },
    { description: 'missing scope v1 → 403', principal: p({ scopes: ['feeds:read'] }), scope: 'signals:write', api: 'v1', status: 403, code: 'TF_ERR_FORBIDDEN', message: 'API key lacks the signals:write scope' },
    { description: 'missing scope feeds → 403', principal: p({ scopes: ['signals:write'] }), scope: 'feeds:read', api: 'feeds', status: 403, code: 'TF_ERR_FORBIDDEN' },
    { description: 'missing scope v2 → 401 saying so', principal: p({ scopes: ['feeds:read'] }), scope: 'signals:write', api: 'v2', status: 401, code: 'TF_ERR_UNAUTHORIZED_SCOPE', message: 'API key lacks the signals:write scope' },
    { description: 'inactive v1 → 402', principal: p({}, { subscription: 'inactive' }), scope: 'signals:write', api: 'v1', status: 402, code: 'TF_ERR_PAYMENT_REQUIRED' },
    { description: 'inactive feeds → 402', principal: p({}, { subscription: 'inactive' }), scope: 'feeds:read', api: 'feeds', status: 402, code: 'TF_ERR_PAYMENT_REQUIRED' },
    { description: 'inactive v2 → 401 saying so', principal: p({}, { subscription: 'inactive' }), scope: 'signals:write', api: 'v2', status: 401, code: 'TF_ERR_UNAUTHORIZED_SUBSCRIPTION', message: 'subscription required: the workspace subscription is inactive' },
    { description: 'revocation wins over scope', principal: p({ revokedAt: 1, scopes: [] }), scope: 'signals:write', api: 'v1', status: 401, code: 'TF_ERR_UNAUTHORIZED' },
  ]
  for (const c of cases) {
    const d = decideAccess(c.principal, c.scope, c.api)
    if (c.code === null) {
      t.ok(d.ok, c.description)
      continue
    }
    t.notOk(d.ok, c.description)
    if (!d.ok) {
      t.equal(d.error.status, c.status, `${c.description}: status`)
      t.equal(d.error.code, c.code, `${c.description}: code`)
      if (c.message !== undefined) t.equal(d.error.message, c.message, `${c.description}: message`)
    }
  }
})

t.test('api keys: 256 random bits, hashed with SHA-256', async (t) => {
  const a = generateApiKey()
  const b = generateApiKey()
  t.match(a, /^tf_[A-Za-z0-9_-]{43}$/)
  t.not(a, b)
  t.match(hashApiKey(a), /^[0-9a-f]{64}$/)
  t.equal(hashApiKey(a), hashApiKey(a))
})
