/**
 * The signal endpoints' infrastructure answers: authentication (SPEC §5, DECISIONS §2), 405 with
 * Allow, 429 with Retry-After, Content-Type, the body cap, and connection reuse after an answer
 * given before the body was read.
 */
import t from 'tap'
import { connect } from 'node:net'
import { type KeyName, post, startTestServer, withoutReceipt } from '../helpers/server.js'

const srv = await startTestServer({ frontThreads: true, env: { THREATFEED_MAX_BODY_BYTES: '4096' } })
t.teardown(() => srv.close())
const entry = [{ type: 'access_rules', action: 'block', ip: '192.0.2.1' }]
const v2entry = [{ kind: 'access_rule', op: 'upsert', rule: { target: { ip: '192.0.2.1' } } }]
const unauthorized = { error: 'UnauthorizedError', message: 'invalid or missing API key', code: 401 }
// Issue 36: a key sent in another form gets a 401 that says which form the route takes.
const basicForm = { error: 'UnauthorizedError', message: 'invalid or missing API key: Basic credentials are taken by the feed routes only; send Authorization: Bearer <API key>', code: 401 }
const headerForm = { error: 'UnauthorizedError', message: 'invalid or missing API key: X-API-Key is not read; send Authorization: Bearer <API key>', code: 401 }

t.test('authentication: v1 answers 401/402/403, v2 only 401', async (t) => {
  const cases: Array<{ description: string, key: KeyName | null, headers?: Record<string, string>, v1: [number, unknown], v2: [number, unknown] }> = [
    { description: 'no Authorization', key: null, v1: [401, unauthorized], v2: [401, unauthorized] },
    { description: 'unknown key', key: null, headers: { Authorization: 'Bearer tf_nope' }, v1: [401, unauthorized], v2: [401, unauthorized] },
    { description: 'empty bearer', key: null, headers: { Authorization: 'Bearer ' }, v1: [401, unauthorized], v2: [401, unauthorized] },
    { description: 'Basic is for feeds only', key: null, headers: { Authorization: `Basic ${Buffer.from(`api:${srv.keys.all}`).toString('base64')}` }, v1: [401, basicForm], v2: [401, basicForm] },
    { description: 'Basic, lower case, an unknown key', key: null, headers: { Authorization: `basic ${Buffer.from('api:tf_nope').toString('base64')}` }, v1: [401, basicForm], v2: [401, basicForm] },
    { description: 'X-API-Key with a valid key', key: null, headers: { 'X-API-Key': srv.keys.all }, v1: [401, headerForm], v2: [401, headerForm] },
    { description: 'X-API-Key beside an unknown Bearer key', key: null, headers: { 'X-API-Key': srv.keys.all, Authorization: 'Bearer tf_nope' }, v1: [401, unauthorized], v2: [401, unauthorized] },
    { description: 'revoked key', key: 'revoked', v1: [401, unauthorized], v2: [401, unauthorized] },
    {
      description: 'key without signals:write',
      key: 'read',
      v1: [403, { error: 'ForbiddenError', message: 'API key lacks the signals:write scope', code: 403 }],
      v2: [401, { error: 'UnauthorizedError', message: 'API key lacks the signals:write scope', code: 401 }],
    },
    {
      description: 'inactive subscription',
      key: 'inactive',
      v1: [402, { error: 'PaymentRequiredError', message: 'subscription required', code: 402 }],
      v2: [401, { error: 'UnauthorizedError', message: 'subscription required: the workspace subscription is inactive', code: 401 }],
    },
    { description: 'signals:write only', key: 'write', v1: [200, { success: true, message: 'Processed 1 entries, 0 failed' }], v2: [200, { success: true, message: 'Processed 1 entries, 0 failed', errors: [] }] },
  ]
  for (const c of cases) {
    for (const api of ['v1', 'v2'] as const) {
      const r = await post(srv, api, api === 'v1' ? entry : v2entry, c.key, c.headers)
      const [status, body] = c[api]
      t.equal(r.status, status, `${api} ${c.description}`)
      t.same(withoutReceipt(r.body), body, `${api} ${c.description}`)
      if (status === 401) t.equal(r.headers.get('www-authenticate'), 'Bearer realm="threatfeed"')
    }
  }
})

t.test('other methods: 405 with Allow: POST', async (t) => {
  for (const api of ['v1', 'v2']) {
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const r = await fetch(`${srv.url}/${api}/signal`, { method, headers: srv.auth('all') })
      t.equal(r.status, 405, `${method} /${api}/signal`)
      t.equal(r.headers.get('allow'), 'POST')
      t.same(await r.json(), { error: 'MethodNotAllowedError', message: 'method not allowed; use POST', code: 405 })
    }
  }
})

t.test('Content-Type other than application/json → 400; missing is read as JSON', async (t) => {
  const r = await post(srv, 'v1', entry, 'all', { 'Content-Type': 'text/plain' })
  t.equal(r.status, 400)
  t.same(r.body, { error: 'BadRequestError', message: 'Content-Type must be application/json', code: 400 })
  const ok = await fetch(`${srv.url}/v1/signal`, { method: 'POST', headers: { Authorization: `Bearer ${srv.keys.all}` }, body: new Blob([JSON.stringify(entry)]) })
  t.equal(ok.status, 200, 'no Content-Type')
  t.equal((await post(srv, 'v1', entry, 'all', { 'Content-Type': 'application/json; charset=UTF-8' })).status, 200)
})

t.test('invalid UTF-8 → 400', async (t) => {
  const body = Buffer.concat([Buffer.from('[{"type":"access_rules","action":"block","ip":"192.0.2.1","name":"'), Buffer.from([0xff]), Buffer.from('"}]')])
  const r = await post(srv, 'v1', body)
  t.same([r.status, r.body], [400, { error: 'BadRequestError', message: 'request body is not valid UTF-8', code: 400 }])
})

t.test('a body over THREATFEED_MAX_BODY_BYTES → 400, cut off while reading', async (t) => {
  const big = JSON.stringify([{ type: 'access_rules', action: 'block', ip: '192.0.2.1', description: 'x'.repeat(5000) }])
  const r = await post(srv, 'v1', big)
  t.same([r.status, r.body], [400, { error: 'BadRequestError', message: 'request body exceeds 4096 bytes', code: 400 }])
  // Chunked, with no Content-Length, and far more than the cap: answered without reading it all.
  const stream = new ReadableStream({
    start (controller) {
      for (let i = 0; i < 64; i++) controller.enqueue(new TextEncoder().encode(' '.repeat(64 * 1024)))
      controller.close()
    },
  })
  const chunked = await fetch(`${srv.url}/v1/signal`, { method: 'POST', headers: srv.auth('all'), body: stream, duplex: 'half' } as RequestInit).catch((e: Error) => e)
  if (chunked instanceof Error) t.pass('the server closed the connection mid-body')
  else t.equal(chunked.status, 400)
  t.equal((await post(srv, 'v1', entry)).status, 200, 'the server carries on')
})

/** Two requests on one raw connection, the second sent once the first is answered (uWS does not
 *  serve pipelined requests whose answers are asynchronous); resolves with all that was read. */
function twoRequests (first: string, second: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(srv.port, '127.0.0.1')
    let data = ''
    let sent = false
    const timer = setTimeout(() => socket.end(), 3000)
    socket.on('data', (d) => {
      data += d.toString()
      const answers = (data.match(/HTTP\/1\.1 \d{3}/g) ?? []).length
      if (answers === 1 && !sent) { sent = true; socket.write(second) }
      if (answers >= 2) socket.end()
    })
    socket.on('error', reject)
    socket.on('close', () => { clearTimeout(timer); resolve(data) })
    socket.write(first)
  })
}

t.test('an answer given before the body is read leaves the connection usable, the body unread', async (t) => {
  const body = JSON.stringify(entry)
  const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n'
  const early = (auth: string, type = 'application/json') => `POST /v1/signal HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Type: ${type}\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`
  const good = `POST /v1/signal HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${srv.keys.all}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
  const statuses = async (a: string, b: string) => [...(await twoRequests(a, b)).matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1])
  t.same(await statuses(early('Bearer nope'), good), ['401', '200'], 'after a 401')
  t.same(await statuses(early(`Bearer ${srv.keys.all}`, 'text/plain'), good), ['400', '200'], 'after a Content-Type 400')
  t.same(await statuses(good, good), ['200', '200'], 'keep-alive after a read body')
})

t.test('rate limit per key: 429 with Retry-After', async (t) => {
  const limited = await startTestServer({ frontThreads: true, env: { THREATFEED_RATE_LIMIT_RPS: '1', THREATFEED_RATE_LIMIT_BURST: '2' } })
  t.teardown(() => limited.close())
  const statuses: number[] = []
  let last = null as Awaited<ReturnType<typeof post>> | null
  for (let i = 0; i < 3; i++) {
    last = await post(limited, 'v2', v2entry)
    statuses.push(last.status)
  }
  t.same(statuses, [200, 200, 429])
  t.equal(last!.headers.get('retry-after'), '1')
  t.same(last!.body, { error: 'TooManyRequestsError', message: 'too many requests; retry after 1 s', code: 429 })
  t.equal((await post(limited, 'v2', v2entry, 'other')).status, 200, 'another key has its own bucket')
  await new Promise((resolve) => setTimeout(resolve, 1100))
  t.equal((await post(limited, 'v2', v2entry)).status, 200, 'after Retry-After')
})

t.test('a consumer far behind: the batch waits for room, and gets 429 with Retry-After: 1 only if none comes', async (t) => {
  const behind = await startTestServer({ frontThreads: true, maxBacklog: 5, admissionWaitMs: 300 })
  t.teardown(() => behind.close())
  await behind.consumer.stop() // nothing is applied any more: the backlog only grows
  const ten = Array.from({ length: 10 }, (_, i) => ({ type: 'access_rules', action: 'block', ip: `192.0.2.${i}` }))
  t.equal((await post(behind, 'v1', ten)).status, 200, 'the backlog was empty')
  t.equal(behind.consumer.backlog, 10)
  for (const [api, body] of [['v2', v2entry], ['v1', ten]] as const) {
    const t0 = performance.now()
    const r = await post(behind, api, body)
    t.ok(performance.now() - t0 >= 290, `${api}: waited for room first`)
    t.same([r.status, r.headers.get('retry-after'), r.body], [429, '1', { error: 'TooManyRequestsError', message: 'too many requests; retry after 1 s', code: 429 }], `${api}: then refused`)
  }
  t.equal(behind.consumer.backlog, 10, 'nothing refused was accepted')
})

t.test('while a batch waits for room, a body over the cap or a client that goes away is answered or dropped, and the server carries on', async (t) => {
  const behind = await startTestServer({ frontThreads: true, maxBacklog: 5, admissionWaitMs: 300, env: { THREATFEED_MAX_BODY_BYTES: '4096' } })
  t.teardown(() => behind.close())
  await behind.consumer.stop()
  const ten = Array.from({ length: 10 }, (_, i) => ({ type: 'access_rules', action: 'block', ip: `192.0.2.${i}` }))
  t.equal((await post(behind, 'v1', ten)).status, 200)
  const cases: Array<[string, () => Promise<unknown>]> = [
    ['a body over the cap', async () => {
      const big = JSON.stringify([{ type: 'access_rules', action: 'block', ip: '192.0.2.1', description: 'x'.repeat(5000) }])
      const r = await post(behind, 'v1', big)
      t.equal(r.status, 429, 'refused for the backlog, the cap passed meanwhile')
    }],
    ['a client that goes away', async () => {
      const socket = connect(behind.port, '127.0.0.1')
      await new Promise((resolve) => socket.once('connect', resolve))
      socket.write(`POST /v1/signal HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${behind.keys.all}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[`)
      await new Promise((resolve) => setTimeout(resolve, 50))
      socket.destroy()
      await new Promise((resolve) => setTimeout(resolve, 400))
    }],
  ]
  for (const [name, run] of cases) {
    await run()
    // An unhandled rejection would have ended this process (the server runs in it).
    t.equal((await post(behind, 'v2', v2entry)).status, 429, `${name}: the server still answers`)
  }
})

t.test('a full backlog holds a batch until the consumer makes room, then accepts it', async (t) => {
  let position = 0
  let backlog = 10
  const waits: number[] = []
  let makeRoom: (() => void) | null = null
  const consumer = {
    get position () { return position },
    get backlog () { return backlog },
    waitFor: (seq: number) => {
      waits.push(seq)
      return new Promise<boolean>((resolve) => { makeRoom = () => { position = seq; backlog = 0; resolve(true) } })
    },
  }
  const srv = await startTestServer({ frontThreads: true, maxBacklog: 5, admissionWaitMs: 60_000, admissionConsumer: consumer })
  t.teardown(() => srv.close())
  let answered = false
  const answer = post(srv, 'v1', [{ type: 'access_rules', action: 'block', ip: '198.51.100.7' }]).finally(() => { answered = true })
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.notOk(answered, 'held while the backlog is full')
  t.same(waits, [5], 'until the consumer reaches the position that leaves 5 records waiting')
  makeRoom!()
  const r = await answer
  t.same([r.status, withoutReceipt(r.body)], [200, { success: true, message: 'Processed 1 entries, 0 failed' }])
  t.ok(await srv.consumer.waitFor(srv.consumer.backlog + srv.consumer.position, 2000), 'and it is applied')
})
