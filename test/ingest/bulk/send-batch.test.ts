import t from 'tap'
import { backoffMs, parseRetryAfter, readFailures, sendBatch, type SendOptions } from '../../../src/ingest/bulk/send-batch.js'
import { startScriptedServer, type ScriptedAnswer } from './scripted-server.js'

const policy = { attempts: 4, baseMs: 100, maxMs: 1000 }

async function send (script: ScriptedAnswer[], size = 2, extra: Partial<SendOptions> = {}) {
  const srv = await startScriptedServer((n) => script[Math.min(n, script.length - 1)]!)
  const sleeps: number[] = []
  const retries: string[] = []
  try {
    const result = await sendBatch('[1,2]', size, {
      url: srv.url, key: 'k1', retry: policy, timeoutMs: 2000, random: () => 0.5, sleep: async (ms) => { sleeps.push(ms) }, onRetry: (why) => retries.push(why), ...extra,
    })
    return { result, sleeps, retries, requests: srv.bodies.length, auth: srv.authorizations[0] }
  } finally {
    await srv.close()
  }
}

t.test('answers and retries', async (t) => {
  const ok = await send([{ status: 200, body: { success: true } }])
  t.same(ok, { result: { kind: 'done', status: 200, failures: new Map(), retries: 0 }, sleeps: [], retries: [], requests: 1, auth: 'Bearer k1' })

  const partial = await send([{ status: 206, body: { success: false, errors: ['Entry 1: ip: bad: really'] } }])
  t.same(partial.result, { kind: 'done', status: 206, failures: new Map([[1, 'ip: bad: really']]), retries: 0 })

  const throttled = await send([{ status: 429, headers: { 'Retry-After': '2' } }, { status: 503 }, { status: 200 }])
  t.same([throttled.result.kind, throttled.result.status, throttled.requests], ['done', 200, 3])
  t.same(throttled.sleeps, [2000, 100], 'Retry-After is a floor; then full jitter of base·2^n')
  t.same(throttled.retries, ['HTTP 429', 'HTTP 503'])

  const lost = await send([{ status: 0, destroy: true }, { status: 200 }])
  t.same([lost.result.kind, lost.requests, lost.retries.length], ['done', 2, 1], 'a dropped connection is retried')

  const exhausted = await send([{ status: 500 }])
  t.same(exhausted.result, { kind: 'fatal', status: 0, message: 'gave up after 4 attempts: HTTP 500', retries: 3 })
  t.equal(exhausted.requests, 4)

  for (const status of [400, 401, 402, 403]) {
    const r = await send([{ status, body: { error: 'E', message: `m${status}`, code: status } }, { status: 200 }])
    t.equal(r.requests, 1, `${status} is never retried`)
    t.same(r.result.kind, status === 400 ? 'done' : 'fatal')
  }
  const unauthorized = await send([{ status: 401, body: { error: 'UnauthorizedError', message: 'invalid or missing API key', code: 401 } }])
  t.same(unauthorized.result, { kind: 'fatal', status: 401, message: 'HTTP 401: invalid or missing API key', retries: 0 })
  const notFound = await send([{ status: 404 }])
  t.same(notFound.result, { kind: 'fatal', status: 404, message: 'HTTP 404', retries: 0 })

  const refused = await sendBatch('[]', 1, { url: 'http://127.0.0.1:1/v1/signal', key: 'k', retry: { attempts: 2, baseMs: 1, maxMs: 1 }, timeoutMs: 500 })
  t.match(refused, { kind: 'fatal', status: 0, message: /^gave up after 2 attempts: fetch failed/ })
  await t.rejects(sendBatch('[]', 1, { url: 'http://127.0.0.1:1/', key: 'k', retry: { attempts: 0, baseMs: 1, maxMs: 1 }, timeoutMs: 10 }), RangeError)
})

t.test('readFailures: every entry of a 400 fails; details name entries where they can', async (t) => {
  const cases: Array<{ description: string, status: number, body: unknown, size: number, expected: Array<[number, string]> }> = [
    { description: '206 errors', status: 206, body: { errors: ['Entry 0: a', 'Entry 2: b: c', 'junk', 5] }, size: 3, expected: [[0, 'a'], [2, 'b: c']] },
    { description: 'all-failed ValidationError', status: 400, body: { message: 'Validation failed', details: [{ field: '[0].asn', message: 'x' }, { field: '[1]', message: 'must be an object' }] }, size: 2, expected: [[0, 'asn: x'], [1, 'must be an object']] },
    { description: 'whole-batch rule.type', status: 400, body: { message: 'rule.type is required and must be one of custom, generated', details: [{ field: '[1].rule.type', message: 'is required' }] }, size: 3, expected: [[1, 'rule.type: is required'], [0, 'batch rejected: rule.type is required and must be one of custom, generated'], [2, 'batch rejected: rule.type is required and must be one of custom, generated']] },
    { description: 'bad batch', status: 400, body: { message: 'request body exceeds 8 bytes' }, size: 2, expected: [[0, 'batch rejected: request body exceeds 8 bytes'], [1, 'batch rejected: request body exceeds 8 bytes']] },
    { description: 'no body', status: 400, body: null, size: 1, expected: [[0, 'batch rejected: HTTP 400']] },
  ]
  for (const c of cases) t.same([...readFailures(c.status, c.body, c.size)], c.expected, c.description)
})

t.test('backoff and Retry-After', async (t) => {
  t.equal(backoffMs(0, null, policy, () => 0.999), 99)
  t.equal(backoffMs(3, null, policy, () => 0.999), 799)
  t.equal(backoffMs(10, null, policy, () => 0.999), 999, 'capped')
  t.equal(backoffMs(10, 5, policy, () => 0.1), 5000, 'Retry-After above the cap is honoured')
  t.equal(parseRetryAfter('3'), 3)
  t.equal(parseRetryAfter(null), null)
  t.equal(parseRetryAfter('soon'), null)
  t.equal(parseRetryAfter(new Date(Date.UTC(2030, 0, 1, 0, 0, 10)).toUTCString(), Date.UTC(2030, 0, 1)), 10)
})
