/**
 * The poll path as written since issue 17: a whole answer's status line and headers go out in
 * one library call, uncorked inside uWS's callback and corked after an await, and onAborted is
 * registered only for an answer that outlives the callback. These tests pin what a client sees:
 * the exact header lists of the snapshot, in order, on one keep-alive connection (so every block
 * ends where the next answer begins), and a client that leaves while its poll waits for a build.
 */
import t from 'tap'
import { connect } from 'node:net'
import { gunzipSync } from 'node:zlib'
import { bearer, buildTestSnapshot, rawRequest, StaticFeedSource, startFeedServer } from '../helpers/feed-server.js'
import { parseResponses, rawExchange } from '../helpers/raw-http.js'
import type { HeaderList } from '../../src/feed/snapshot-types.js'

const source = new StaticFeedSource()
const server = await startFeedServer(() => source)
t.teardown(() => server.stop())
const auth = bearer(server.key).authorization!
const snapshot = buildTestSnapshot({ workspaceId: server.workspace.id, feedId: '*', networks: ['192.0.2.0/24', '198.51.100.7/32'], lastModified: Date.UTC(2026, 0, 2, 3, 4, 5) })
source.set(snapshot)
const variant = snapshot.variants.get('plain|both|block|')!

/** The header lines a client reads, without the ones uWS adds itself (Date, Content-Length). */
function ours (names: string[], headers: Record<string, string>): Array<[string, string]> {
  return names.filter((n) => !['date', 'content-length'].includes(n.toLowerCase())).map((n) => [n, headers[n.toLowerCase()]!])
}
const listOf = (h: HeaderList): Array<[string, string]> => h.map(([n, v]) => [n, v])

t.test('304, 200 gzip, 200 identity and HEAD on one connection: the snapshot\'s header lists, in order, and nothing else', async (t) => {
  const request = (lines: string[]): string => `GET /v1/threat/feeds HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\n${lines.map((l) => l + '\r\n').join('')}\r\n`
  const text = await rawExchange(server.port, [
    request([`If-None-Match: ${variant.gzip.etag}`, 'Accept-Encoding: gzip']),
    request(['Accept-Encoding: gzip']),
    request([`If-None-Match: ${variant.identity.etag}`]),
    request([]),
    request([]).replace(/^GET/, 'HEAD'),
    request(['Connection: close']),
  ].join(''), 500)
  const [notModifiedGzip, gzip, notModified, identity, head, last, extra] = parseResponses(text, ['GET', 'GET', 'GET', 'GET', 'HEAD', 'GET'])
  const cases = [
    { name: '304 (gzip)', r: notModifiedGzip, status: 'HTTP/1.1 304 Not Modified', headers: variant.gzip.notModifiedHeaders },
    { name: '200 gzip', r: gzip, status: 'HTTP/1.1 200 OK', headers: variant.gzip.headers },
    { name: '304 (identity)', r: notModified, status: 'HTTP/1.1 304 Not Modified', headers: variant.identity.notModifiedHeaders },
    { name: '200 identity', r: identity, status: 'HTTP/1.1 200 OK', headers: variant.identity.headers },
    { name: 'HEAD', r: head, status: 'HTTP/1.1 200 OK', headers: variant.identity.headers },
    { name: '200 with Connection: close', r: last, status: 'HTTP/1.1 200 OK', headers: [...variant.identity.headers, ['Connection', 'close']] as HeaderList },
  ]
  for (const c of cases) {
    t.equal(c.r?.statusLine, c.status, `${c.name}: status line`)
    t.same(ours(c.r!.names, c.r!.headers), listOf(c.headers), `${c.name}: exactly the snapshot's headers, in order`)
    t.ok(c.r!.headers.date !== undefined, `${c.name}: Date from uWS`)
  }
  t.equal(notModifiedGzip!.headers['content-length'], undefined, '304: no Content-Length')
  t.equal(notModifiedGzip!.body, '')
  t.same(gunzipSync(Buffer.from(gzip!.body, 'latin1')), Buffer.from(variant.identity.body), '200 gzip: the body')
  t.equal(identity!.body, Buffer.from(variant.identity.body).toString('latin1'), '200 identity: the body')
  t.equal(head!.headers['content-length'], String(variant.identity.body.byteLength), 'HEAD: the Content-Length GET sends')
  t.equal(head!.body, '', 'HEAD: no body')
  t.equal(extra, undefined, 'nothing after the last answer')
})

t.test('a client that leaves while its poll waits for a build is counted 499; the server writes nothing for it and keeps serving', async (t) => {
  source.delete(server.workspace.id, '*')
  t.teardown(() => { source.set(snapshot) })
  const waitsBefore = source.awaited
  const socket = await new Promise<ReturnType<typeof connect>>((resolve, reject) => {
    const s = connect(server.port, '127.0.0.1', () => {
      s.write(`GET /v1/threat/feeds HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\n\r\n`)
      resolve(s)
    })
    s.on('error', reject)
  })
  let received = ''
  socket.on('data', (d: Buffer) => { received += d.toString('latin1') })
  while (source.awaited === waitsBefore) await new Promise((resolve) => setTimeout(resolve, 10))
  socket.destroy()
  await new Promise((resolve) => setTimeout(resolve, 100))
  // The build finishes after the client left: the answer must not be written to the dead response.
  source.set(snapshot)
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(received, '', 'nothing was sent before the client left')
  const after = await rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(server.key) })
  t.equal(after.status, 200, 'the server keeps serving')
  const metrics = (await rawRequest(server.base, '/metrics')).body.toString()
  t.match(metrics, /threatfeed_http_requests_total\{route="feeds",status="499"\} 1\n/)
})
