/**
 * THREATFEED_TLS_CLIENT_CA: a client certificate signed by that CA is required on the TLS listener,
 * and the API key still is (a second factor). The library verifies a presented certificate in the
 * handshake but lets a client without one through; the server then answers 401 before looking at
 * the key, with the body of the interface asked.
 */
import t from 'tap'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { makePki, startTlsServer, httpsGet, tool } from '../helpers/tls.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-tls-client-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

const serverPki = makePki(dir, 'server')
const appliances = makePki(dir, 'appliances')
const stranger = makePki(dir, 'stranger')
const leaf = serverPki.issue()
const appliance = appliances.issue({ cn: 'fortigate-01', usage: 'client' })
const impostor = stranger.issue({ cn: 'fortigate-01', usage: 'client' })

const s = await startTlsServer(join(dir, 'data'), {
  THREATFEED_TLS_CERT: leaf.certFile,
  THREATFEED_TLS_KEY: leaf.keyFile,
  // The appliances' root only: each client sends its intermediate with its leaf.
  THREATFEED_TLS_CLIENT_CA: appliances.rootFile,
})
t.teardown(() => s.server.stop())
const ca = readFileSync(serverPki.rootFile)
const feed = `${s.httpsBase}/v1/threat/feeds?format=plain`
const bearer = { authorization: `Bearer ${s.key}` }

t.test('no client certificate: 401 with the interface\'s body, before the key is looked at', async (t) => {
  const cases = [
    { description: 'feed, with a valid key', path: '/v1/threat/feeds?format=plain', headers: bearer, body: { success: false, error: 'a client certificate is required', details: {} } },
    { description: 'feed, without a key', path: '/v1/threat/feeds', headers: {}, body: { success: false, error: 'a client certificate is required', details: {} } },
    { description: 'signal v1, with a valid key', path: '/v1/signal', headers: bearer, body: { error: 'UnauthorizedError', message: 'a client certificate is required', code: 401 } },
    { description: 'health', path: '/healthz', headers: {}, body: { error: 'UnauthorizedError', message: 'a client certificate is required', code: 401 } },
  ]
  for (const c of cases) {
    const r = await httpsGet(s.httpsBase + c.path, { ca, headers: c.headers })
    t.equal(r.status, 401, c.description)
    t.same(JSON.parse(r.body.toString()), c.body, c.description)
    t.ok(typeof r.headers['www-authenticate'] === 'string', `${c.description}: a challenge`)
  }
  const curl = await tool('curl', ['-sS', '--cacert', serverPki.rootFile, '-u', `api:${s.key}`, '-w', '\n%{http_code}', feed])
  t.equal(curl.stdout, '{"success":false,"error":"a client certificate is required","details":{}}\n401', 'curl without --cert')
  const plain = await fetch(`http://127.0.0.1:${s.server.port}/healthz`)
  t.equal(plain.status, 200, 'the plain listener does not ask for one')
})

t.test('a certificate from another CA: the handshake fails', async (t) => {
  const curl = await tool('curl', ['-sS', '--cacert', serverPki.rootFile, '--cert', impostor.certFile, '--key', impostor.keyFile, '-u', `api:${s.key}`, feed])
  t.not(curl.code, 0, 'curl gets no answer')
  t.match(curl.stderr, /alert|unknown ca|certificate|handshake/i, curl.stderr)
  const sc = await tool('openssl', ['s_client', '-connect', `127.0.0.1:${s.server.tlsPort}`, '-servername', 'localhost', '-cert', impostor.certFile, '-key', impostor.keyFile, '-tls1_2'])
  t.match(sc.stdout + sc.stderr, /alert|unknown ca|certificate verify failed/i, 'openssl: the server refuses the certificate')
  await t.rejects(httpsGet(feed, { ca, cert: readFileSync(impostor.certFile), key: readFileSync(impostor.keyFile), headers: bearer }), 'node:https: the request fails')
})

t.test('a certificate from the configured CA: the API key decides as without TLS', async (t) => {
  const cert = readFileSync(appliance.certFile)
  const key = readFileSync(appliance.keyFile)
  let r = await httpsGet(feed, { ca, cert, key, headers: bearer })
  t.equal(r.status, 200, 'certificate and key: the feed')
  r = await httpsGet(feed, { ca, cert, key })
  t.equal(r.status, 401, 'certificate without a key: 401')
  t.same(JSON.parse(r.body.toString()), { success: false, error: 'invalid or missing API key', details: {} }, 'the certificate does not replace the key')
  const curl = await tool('curl', ['-sS', '--cacert', serverPki.rootFile, '--cert', appliance.certFile, '--key', appliance.keyFile, '-u', `api:${s.key}`, '-o', '/dev/null', '-w', '%{http_code}', feed])
  t.equal(curl.stdout, '200', 'curl --cert with Basic credentials')
})

t.test('the client CA\'s expiry is a metric too', async (t) => {
  const text = await (await fetch(`http://127.0.0.1:${s.server.port}/metrics`)).text()
  const roles = text.split('\n').filter((l) => l.startsWith('threatfeed_tls_certificate_expiry_seconds{')).map((l) => /role="([^"]+)"/.exec(l)?.[1]).sort()
  t.same(roles, ['chain', 'client_ca', 'server'])
})
