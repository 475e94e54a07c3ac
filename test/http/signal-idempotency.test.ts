/**
 * The Idempotency-Key header on POST /v1/signal and /v2/signal (docs/signals.md): a batch posted
 * again with its key is answered as the first time and stored once; the key with another batch
 * is refused; a malformed key is refused. Through front-end threads, which hand the header over.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { block, post, startTestServer } from '../helpers/server.js'

const srv = await startTestServer({ frontThreads: true })
t.teardown(() => srv.close())

const waf = (ref: string) => ({ kind: 'waf_rule', op: 'upsert', rule_ref: ref, rule: { type: 'custom', expression: 'http.request.uri.path contains "/admin"', action: 'block' } })
const key = (k: string): Record<string, string> => ({ 'Idempotency-Key': k })

t.test('a retried batch is stored once and answered the same', async (t) => {
  const cases = [
    { description: 'v1, all processed', api: 'v1' as const, body: [block({ ip: '198.51.100.1' }), block({ ip: '198.51.100.2' })], status: 200, stored: 2 },
    { description: 'v1, some failed', api: 'v1' as const, body: [block({ ip: '198.51.100.3' }), block({ asn: 'AS64512' })], status: 206, stored: 1 },
    { description: 'v2', api: 'v2' as const, body: [waf('idem-1'), waf('idem-2')], status: 200, stored: 2 },
  ]
  for (const c of cases) {
    const k = randomUUID()
    const head = await srv.store.stream.head()
    const first = await post(srv, c.api, c.body, 'all', key(k))
    t.equal(first.status, c.status, `${c.description}: first status`)
    const again = await post(srv, c.api, c.body, 'all', key(`"${k}"`)) // the Structured Field form of the same key
    t.equal(again.status, first.status, `${c.description}: retry status`)
    t.same(again.body, first.body, `${c.description}: retry body`)
    t.equal(await srv.store.stream.head(), head + c.stored, `${c.description}: stored once`)
  }
})

t.test('concurrent retries of one batch: one append, one answer', async (t) => {
  const k = randomUUID()
  const head = await srv.store.stream.head()
  const body = [block({ ip: '198.51.100.10' })]
  const answers = await Promise.all(Array.from({ length: 6 }, () => post(srv, 'v1', body, 'all', key(k))))
  t.same(answers.map((a) => a.status), [200, 200, 200, 200, 200, 200])
  t.ok(answers.every((a) => JSON.stringify(a.body) === JSON.stringify(answers[0]!.body)), 'the same body')
  t.equal(await srv.store.stream.head(), head + 1)
})

t.test('a key reused for another batch is refused, and nothing is stored', async (t) => {
  const k = randomUUID()
  t.equal((await post(srv, 'v1', [block({ ip: '198.51.100.20' })], 'all', key(k))).status, 200)
  const head = await srv.store.stream.head()
  const cases = [
    { description: 'another body', api: 'v1' as const, body: [block({ ip: '198.51.100.21' })] },
    { description: 'a batch of the other API version', api: 'v2' as const, body: [waf('idem-3')] },
  ]
  for (const c of cases) {
    const r = await post(srv, c.api, c.body, 'all', key(k))
    t.equal(r.status, 400, c.description)
    t.same(r.body, { error: 'IdempotencyKeyReusedError', message: 'this Idempotency-Key was used with a different batch within the last 24 hours; use a new key for a new batch', code: 400 }, c.description)
  }
  t.equal(await srv.store.stream.head(), head, 'nothing stored')
})

t.test('malformed keys are refused before anything is stored', async (t) => {
  const message = 'Idempotency-Key must be 1 to 255 visible ASCII characters, without quotes or backslashes inside'
  const cases = [
    { description: 'too long', value: 'k'.repeat(256) },
    { description: 'a space inside', value: 'a b' },
    { description: 'empty quotes', value: '""' },
    { description: 'a quote inside', value: 'a"b' },
    { description: 'a backslash', value: 'a\\b' },
  ]
  const head = await srv.store.stream.head()
  for (const c of cases) {
    const r = await post(srv, 'v1', [block({ ip: '198.51.100.30' })], 'all', key(c.value))
    t.equal(r.status, 400, c.description)
    t.same(r.body, { error: 'BadRequestError', message, code: 400 }, c.description)
  }
  t.equal((await post(srv, 'v1', [block({ ip: '198.51.100.31' })], 'all', key('k'.repeat(255)))).status, 200, '255 characters are accepted')
  t.equal(await srv.store.stream.head(), head + 1)
})
