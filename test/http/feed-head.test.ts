/**
 * HEAD (answered like GET without a body, DECISIONS §5) and the transfer of large bodies: keep-alive
 * survives every kind of answer, a slow reader gets every byte (backpressure), a reader that goes
 * away mid-body is counted and leaves the server serving.
 */
import t from 'tap'
import { connect, type Socket } from 'node:net'
import { Agent, request } from 'node:http'
import { createHash } from 'node:crypto'
import { gzipSync } from 'node:zlib'
import { bearer, buildTestSnapshot, rawRequest, StaticFeedSource, startFeedServer, syncLists } from '../helpers/feed-server.js'
import type { FeedSnapshot, Variant } from '../../src/feed/snapshot-types.js'

const source = new StaticFeedSource()
const server = await startFeedServer(() => source)
t.teardown(() => server.stop())
const ws = server.workspace.id
const small = buildTestSnapshot({ workspaceId: ws, feedId: '*', networks: ['192.0.2.0/24', '2001:db8::/32'], lastModified: Date.UTC(2026, 0, 1) })
source.set(small)
const auth = bearer(server.key)

t.test('HEAD: the headers of GET, Content-Length of the body GET sends, no body', async (t) => {
  for (const query of ['', '?format=dialect_a', '?format=dialect_b&family=v4', '?checksum=md5']) {
    for (const enc of ['', 'gzip']) {
      const headers = { ...auth, 'accept-encoding': enc }
      const get = await rawRequest(server.base, `/v1/threat/feeds${query}`, { headers })
      const head = await rawRequest(server.base, `/v1/threat/feeds${query}`, { method: 'HEAD', headers })
      const what = `${query} ${enc}`
      t.equal(head.status, 200, what)
      t.equal(head.body.length, 0, `${what}: no body`)
      t.equal(head.headers['content-length'], String(get.body.length), `${what}: Content-Length`)
      const { date: _d1, ...getHeaders } = get.headers
      const { date: _d2, ...headHeaders } = head.headers
      t.same(headHeaders, getHeaders, `${what}: same headers`)
    }
  }
})

t.test('HEAD of a 413 list and of a list by name', async (t) => {
  const list = await server.store.lists.create({ workspaceId: ws, name: 'tiny', description: '', defaults: { maxEntries: 1 }, selector: {} })
  await syncLists(server)
  source.set(buildTestSnapshot({ workspaceId: ws, feedId: list.id, networks: ['192.0.2.0/24', '198.51.100.0/24'], lastModified: Date.UTC(2026, 0, 1), limit: 1 }))
  const get = await rawRequest(server.base, '/v1/threat/feeds/tiny', { headers: auth })
  const head = await rawRequest(server.base, '/v1/threat/feeds/tiny', { method: 'HEAD', headers: auth })
  t.equal(get.status, 413)
  t.equal(head.status, 413)
  t.equal(head.headers['content-length'], String(get.body.length))
  t.equal(head.headers['x-feed-entry-count'], '2')
  t.equal(head.headers['x-feed-entry-limit'], '1')
  t.equal(head.body.length, 0)
})

t.test('one keep-alive connection carries HEAD, GET, 304 and errors in any order', async (t) => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const first = await rawRequest(server.base, '/v1/threat/feeds', { headers: auth })
  const steps: Array<{ method: string, path: string, headers: Record<string, string>, status: number, bodyLength: number }> = [
    { method: 'HEAD', path: '/v1/threat/feeds', headers: auth, status: 200, bodyLength: 0 },
    { method: 'GET', path: '/v1/threat/feeds', headers: auth, status: 200, bodyLength: first.body.length },
    { method: 'HEAD', path: '/v1/threat/feeds', headers: { ...auth, 'if-none-match': first.headers.etag! }, status: 304, bodyLength: 0 },
    { method: 'GET', path: '/v1/threat/feeds', headers: { ...auth, 'if-none-match': first.headers.etag! }, status: 304, bodyLength: 0 },
    { method: 'HEAD', path: '/v1/threat/feeds', headers: {}, status: 401, bodyLength: 0 },
    { method: 'HEAD', path: '/v1/threat/feeds?format=bad', headers: auth, status: 400, bodyLength: 0 },
    { method: 'GET', path: '/v1/threat/feeds?format=bad', headers: auth, status: 400, bodyLength: -1 },
    { method: 'HEAD', path: '/v1/threat/feeds/nope', headers: auth, status: 404, bodyLength: 0 },
    { method: 'GET', path: '/v1/threat/feeds', headers: auth, status: 200, bodyLength: first.body.length },
  ]
  let sockets = 0
  agent.on('free', () => {})
  for (const [i, s] of steps.entries()) {
    const r = await new Promise<{ status: number, length: number, reused: boolean }>((resolve, reject) => {
      const req = request(server.base + s.path, { method: s.method, headers: s.headers, agent }, (res) => {
        let length = 0
        res.on('data', (c: Buffer) => { length += c.length })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, length, reused: req.reusedSocket }))
      })
      req.on('socket', () => { if (!req.reusedSocket) sockets++ })
      req.on('error', reject)
      req.end()
    })
    t.equal(r.status, s.status, `${i} ${s.method} ${s.path}`)
    if (s.bodyLength >= 0) t.equal(r.length, s.bodyLength, `${i} body length`)
    if (i > 0) t.ok(r.reused, `${i} reused the connection`)
  }
  t.equal(sockets, 1, 'one connection for everything')
})

function withBigBody (snapshot: FeedSnapshot, body: Uint8Array): FeedSnapshot {
  const key = 'plain|both|block|'
  const v = snapshot.variants.get(key)!
  const etag = `"big-${createHash('md5').update(body).digest('hex')}"`
  const swap = (headers: Variant['identity']['headers']): Variant['identity']['headers'] => headers.map(([k, val]) => [k, k === 'ETag' ? etag : val] as const)
  const gz = gzipSync(body, { level: 1 })
  const big: Variant = {
    ...v,
    identity: { body, etag, headers: swap(v.identity.headers), notModifiedHeaders: swap(v.identity.notModifiedHeaders) },
    gzip: { ...v.gzip, body: gz },
  }
  return { ...snapshot, variants: new Map(snapshot.variants).set(key, big) }
}

/** Sends a raw GET and returns the socket, paused, without reading. */
function openRawGet (path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(server.port, '127.0.0.1', () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth.authorization}\r\n\r\n`)
      resolve(socket)
    })
    socket.on('error', reject)
  })
}

t.test('a slow reader of a large body gets every byte (backpressure)', async (t) => {
  const body = Buffer.alloc(24 * 1024 * 1024)
  for (let i = 0; i < body.length; i += 16) body.write(`${(i >>> 4).toString(16).padStart(15, '0')}\n`, i)
  source.set(withBigBody(small, body))
  t.teardown(() => source.set(small))

  const socket = await openRawGet('/v1/threat/feeds')
  socket.pause()
  // Let the kernel buffers fill so the server has to wait for the socket to drain.
  await new Promise((resolve) => setTimeout(resolve, 300))
  const received = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = []
    let total = 0
    let expected = -1
    socket.on('data', (c: Buffer) => {
      chunks.push(c)
      total += c.length
      if (expected < 0) {
        const all = Buffer.concat(chunks)
        const end = all.indexOf('\r\n\r\n')
        if (end >= 0) expected = end + 4 + Number(/content-length: (\d+)/i.exec(all.subarray(0, end).toString())![1])
      }
      if (expected >= 0 && total >= expected) resolve(Buffer.concat(chunks))
    })
    socket.on('error', reject)
    socket.resume()
  })
  socket.destroy()
  const end = received.indexOf('\r\n\r\n')
  t.match(received.subarray(0, end).toString(), /^HTTP\/1\.1 200 OK/)
  t.ok(received.subarray(end + 4).equals(body), 'every byte, in order')
})

t.test('a reader that leaves mid-body is counted as 499 and the server keeps serving', async (t) => {
  const body = Buffer.alloc(24 * 1024 * 1024, 0x61)
  source.set(withBigBody(small, body))
  t.teardown(() => source.set(small))
  const socket = await openRawGet('/v1/threat/feeds')
  await new Promise<void>((resolve) => socket.once('data', () => resolve()))
  socket.destroy()
  await new Promise((resolve) => setTimeout(resolve, 100))
  const after = await rawRequest(server.base, '/v1/threat/feeds?family=v4', { headers: auth })
  t.equal(after.status, 200)
  const metrics = (await rawRequest(server.base, '/metrics')).body.toString()
  t.match(metrics, /threatfeed_http_requests_total\{route="feeds",status="499"\} [1-9]/)
})
