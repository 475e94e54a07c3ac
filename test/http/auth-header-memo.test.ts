/**
 * The Authenticator's header cache (src/http/auth.ts): a canonical `Bearer <key>` header that
 * authenticated once is answered from the header alone, and the last one that hit from a string
 * compare. Through HTTP, with the default catalog poll (250 ms): a cached header is still judged
 * per interface and scope (a hit on the feed interface does not carry to the signal interface),
 * and a revocation, a subscription change or a deleted workspace reaches a header that is being
 * polled within 1 s (DECISIONS §1, §2). In process: a hit returns one decision object.
 */
import t from 'tap'
import { eventually, startTestServer } from '../helpers/server.js'
import { feedModule } from '../helpers/feed-module.js'
import { hashApiKey, generateApiKey } from '../../src/store/api-key.js'
import { Authenticator } from '../../src/http/auth.js'
import type { Scope } from '../../src/store/types.js'

const feeds = feedModule()
const srv = await startTestServer({ modules: feeds.modules, env: { THREATFEED_POLL_MS: '250' } })
t.teardown(async () => { await feeds.stop(); await srv.close() })

const b64 = (s: string): string => Buffer.from(s).toString('base64')
type Interface = 'feeds' | 'v1' | 'v2'
async function call (on: Interface, authorization: string): Promise<number> {
  const r = on === 'feeds'
    ? await fetch(`${srv.url}/v1/threat/feeds`, { headers: { Authorization: authorization } })
    : await fetch(`${srv.url}/${on}/signal`, { method: 'POST', headers: { Authorization: authorization, 'Content-Type': 'application/json' }, body: '[]' })
  await r.arrayBuffer()
  return r.status
}

t.test('a cached header is judged per interface and scope', async (t) => {
  const bearer = (k: keyof typeof srv.keys): string => `Bearer ${srv.keys[k]}`
  // Each row primes the caches with its first request (twice: a #byHeader hit, then the memo),
  // then asks with the same header elsewhere. Past authentication an empty batch is a 400.
  const cases: Array<{ description: string, prime: [Interface, string, number], then: [Interface, string, number] }> = [
    { description: 'feeds:read key, then signals v1', prime: ['feeds', bearer('read'), 200], then: ['v1', bearer('read'), 403] },
    { description: 'feeds:read key, then signals v2', prime: ['feeds', bearer('read'), 200], then: ['v2', bearer('read'), 401] },
    { description: 'signals:write key, then feeds', prime: ['v1', bearer('write'), 400], then: ['feeds', bearer('write'), 403] },
    { description: 'both scopes, feeds then v2', prime: ['feeds', bearer('all'), 200], then: ['v2', bearer('all'), 400] },
    { description: 'inactive workspace stays 402', prime: ['feeds', bearer('inactive'), 402], then: ['v1', bearer('inactive'), 402] },
    { description: 'revoked key stays 401', prime: ['feeds', bearer('revoked'), 401], then: ['feeds', bearer('revoked'), 401] },
    { description: 'Basic on feeds, then the same Basic on v1', prime: ['feeds', `Basic ${b64(`api:${srv.keys.all}`)}`, 200], then: ['v1', `Basic ${b64(`api:${srv.keys.all}`)}`, 401] },
    { description: 'cached key, header with a trailing space', prime: ['feeds', bearer('all'), 200], then: ['feeds', `${bearer('all')} `, 200] },
    { description: 'cached key, one character changed', prime: ['feeds', bearer('all'), 200], then: ['feeds', `${bearer('all').slice(0, -1)}${bearer('all').endsWith('A') ? 'B' : 'A'}`, 401] },
  ]
  for (const c of cases) {
    for (let i = 0; i < 2; i++) t.equal(await call(c.prime[0], c.prime[1]), c.prime[2], `${c.description}: priming ${i + 1}`)
    t.equal(await call(c.then[0], c.then[1]), c.then[2], c.description)
    t.equal(await call(c.then[0], c.then[1]), c.then[2], `${c.description} (again)`)
  }
})

t.test('changes reach a polled header within 1 s', async (t) => {
  const changes: Array<{ description: string, change: (keyId: string, workspaceId: string) => Promise<unknown>, status: number }> = [
    { description: 'key revoked', change: (keyId) => srv.store.keys.revoke(keyId), status: 401 },
    { description: 'subscription made inactive', change: (_k, ws) => srv.store.workspaces.update(ws, { subscription: 'inactive' }), status: 402 },
  ]
  for (const c of changes) {
    const workspace = await srv.store.workspaces.create({ name: `ws-${c.description}`, subscription: 'active' })
    const key = generateApiKey()
    const stored = await srv.store.keys.create({ workspaceId: workspace.id, hash: hashApiKey(key), scopes: ['feeds:read'] as Scope[] })
    const header = `Bearer ${key}`
    t.equal(await eventually(async () => await call('feeds', header) === 200, 2000) >= 0, true, `${c.description}: the new key is served`)
    // Keep the header hot (the memo holds it) while the change lands.
    let polling = true
    const poller = (async () => { while (polling) await call('feeds', header) })()
    await c.change(stored.id, workspace.id)
    const took = await eventually(async () => await call('feeds', header) === c.status, 1000)
    polling = false
    await poller
    t.ok(took >= 0, `${c.description}: ${c.status} within 1 s (${took} ms)`)
  }
})

t.test('a hit returns one decision object; another scope is judged anew', async (t) => {
  const store = srv.store
  const auth = new Authenticator(store, { pollMs: 250 })
  await auth.start()
  t.teardown(() => { auth.stop() })
  const header = `Bearer ${srv.keys.all}`
  const first = auth.authenticate(header, 'feeds:read', 'feeds')
  t.equal(first.ok, true)
  // A header string built afresh each time, as uWS hands one per request.
  const fresh = (): string => Buffer.from(header, 'latin1').toString('latin1')
  for (let i = 0; i < 3; i++) t.equal(auth.authenticate(fresh(), 'feeds:read', 'feeds'), first, `hit ${i + 1}: the same object`)
  t.equal(auth.authenticate(fresh(), 'signals:write', 'v1'), first, 'the key holds both scopes: the same ok')
  const read = auth.authenticate(`Bearer ${srv.keys.read}`, 'signals:write', 'v1')
  t.equal(read.ok, false)
  t.equal(read.ok ? 0 : read.error.status, 403, 'a feeds-only key is refused the signal scope')
  t.equal(auth.authenticate(fresh(), 'feeds:read', 'feeds'), first, 'the first key still hits after another one')
})

t.test('headers found by their tail: a shared tail, a forged body and other spellings', async (t) => {
  const store = srv.store
  const workspace = await store.workspaces.create({ name: 'ws-tails', subscription: 'active' })
  // Two live keys that end in the same seven characters: one tail, two entries.
  const tail = 'SAMEEND'
  const keys = [generateApiKey().slice(0, -7) + tail, generateApiKey().slice(0, -7) + tail]
  for (const key of keys) await store.keys.create({ workspaceId: workspace.id, hash: hashApiKey(key), scopes: ['feeds:read'] as Scope[] })
  const auth = new Authenticator(store, { pollMs: 250 })
  await auth.start()
  t.teardown(() => { auth.stop() })
  const fresh = (s: string): string => Buffer.from(s, 'latin1').toString('latin1')
  const decisions = keys.map((k) => auth.authenticate(`Bearer ${k}`, 'feeds:read', 'feeds'))
  t.ok(decisions.every((d) => d.ok), 'both keys authenticate')
  const cases: Array<{ description: string, header: string, expected: 'first' | 'second' | 401 }> = [
    { description: 'the first key again', header: `Bearer ${keys[0]}`, expected: 'first' },
    { description: 'the second key, whose tail the first holds', header: `Bearer ${keys[1]}`, expected: 'second' },
    { description: 'a cached tail behind a forged body', header: `Bearer ${generateApiKey().slice(0, -7)}${tail}`, expected: 401 },
    { description: 'a cached tail alone', header: tail, expected: 401 },
    { description: 'the first key, scheme in capitals', header: `BEARER ${keys[0]}`, expected: 'first' },
    { description: 'the first key, two spaces', header: `Bearer  ${keys[0]}`, expected: 'first' },
    { description: 'the first key with its last character changed', header: `Bearer ${keys[0]!.slice(0, -1)}X`, expected: 401 },
  ]
  for (const c of cases) {
    for (let i = 0; i < 2; i++) {
      const d = auth.authenticate(fresh(c.header), 'feeds:read', 'feeds')
      if (c.expected === 401) t.equal(d.ok ? 200 : d.error.status, 401, `${c.description} (${i + 1})`)
      else t.equal(d, decisions[c.expected === 'first' ? 0 : 1], `${c.description} (${i + 1}): that key's decision`)
    }
  }
})
