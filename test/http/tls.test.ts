/**
 * The HTTPS listener with real clients (curl, openssl s_client, node:https): ECDSA and RSA chains
 * under an intermediate, the host name and expiry checks a client makes, TLS 1.2 and 1.3 only with
 * AEAD suites, and the feed interface over TLS (Bearer and Basic, 304, gzip), beside the plain
 * listener, which stays.
 */
import t, { type Test } from 'tap'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { makePki, startTlsServer, httpsGet, tool, presentedSerial, opensslDate, type KeyType, type TlsServer } from '../helpers/tls.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-tls-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

async function serve (t: Test, name: string, env: Record<string, string>): Promise<TlsServer> {
  const s = await startTlsServer(join(dir, name), env)
  t.teardown(() => s.server.stop())
  return s
}

async function feedWithEntries (s: TlsServer, t: Test): Promise<void> {
  const r = await fetch(`http://127.0.0.1:${s.server.port}/v1/signal`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(['192.0.2.1', '198.51.100.7'].map((ip) => ({ type: 'access_rules', action: 'block', ip }))),
  })
  t.equal(r.status, 200, 'signals accepted on the plain listener')
}

for (const keyType of ['ec', 'rsa'] as const satisfies readonly KeyType[]) {
  t.test(`a valid ${keyType === 'ec' ? 'ECDSA P-256' : 'RSA-2048'} chain: curl, openssl and node:https verify it against the root`, async (t) => {
    const pki = makePki(dir, `pki-${keyType}`, keyType)
    const leaf = pki.issue({ keyType })
    const s = await serve(t, `chain-${keyType}`, { THREATFEED_TLS_CERT: leaf.certFile, THREATFEED_TLS_KEY: leaf.keyFile })
    const port = s.server.tlsPort!

    const curl = await tool('curl', ['-sS', '--cacert', pki.rootFile, '-w', '%{http_code} %{ssl_verify_result}', '-o', '/dev/null', `https://localhost:${port}/healthz`])
    t.equal(curl.code, 0, curl.stderr)
    t.equal(curl.stdout, '200 0', 'curl: 200, chain verified')

    const sc = await tool('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost', '-CAfile', pki.rootFile, '-verify_return_error', '-showcerts'])
    t.match(sc.stdout, /Verify return code: 0 \(ok\)/, 'openssl: verified')
    t.equal((sc.stdout.match(/-----BEGIN CERTIFICATE-----/g) ?? []).length, 2, 'the server sends the leaf and the intermediate')
    t.match(sc.stdout, keyType === 'ec' ? /Server public key is 256 bit/ : /Server public key is 2048 bit/)
    t.equal(await presentedSerial(port), leaf.serial, 'the serial of the configured certificate')

    const node = await httpsGet(`https://localhost:${port}/healthz`, { ca: readFileSync(pki.rootFile) })
    t.equal(node.status, 200)
    t.equal(node.serial, leaf.serial)
    t.equal(node.protocol, 'TLSv1.3')

    const plain = await fetch(`http://127.0.0.1:${s.server.port}/healthz`)
    t.equal(plain.status, 200, 'the plain listener still answers')
  })
}

t.test('what clients check: the host name and the validity dates', async (t) => {
  const pki = makePki(dir, 'pki-checks')
  const good = pki.issue()
  const s = await serve(t, 'hostname', { THREATFEED_TLS_CERT: good.certFile, THREATFEED_TLS_KEY: good.keyFile })
  const port = s.server.tlsPort!
  const curl = await tool('curl', ['-sS', '--cacert', pki.rootFile, '--resolve', `feeds.example.net:${port}:127.0.0.1`, `https://feeds.example.net:${port}/healthz`])
  t.equal(curl.code, 60, 'curl refuses a certificate not issued for the name it asked for')
  t.match(curl.stderr, /subject(Alt)? ?name|does not match/i)
  await t.rejects(httpsGet(`https://127.0.0.1:${port}/healthz`, { ca: readFileSync(pki.rootFile), servername: 'feeds.example.net' }), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' })

  const now = Date.now()
  const expired = pki.issue({ start: opensslDate(now - 40 * 86_400_000), end: opensslDate(now - 86_400_000) })
  const e = await serve(t, 'expired', { THREATFEED_TLS_CERT: expired.certFile, THREATFEED_TLS_KEY: expired.keyFile })
  const ep = e.server.tlsPort!
  const ec = await tool('curl', ['-sS', '--cacert', pki.rootFile, `https://localhost:${ep}/healthz`])
  t.equal(ec.code, 60)
  t.match(ec.stderr, /expired/i, 'curl: certificate has expired')
  await t.rejects(httpsGet(`https://localhost:${ep}/healthz`, { ca: readFileSync(pki.rootFile) }), { code: 'CERT_HAS_EXPIRED' })
  t.ok(e.logs.some((l) => l.level === 50 && l.msg === `TLS certificate CN=localhost in ${expired.certFile} has expired` && l.serial === expired.serial), 'the server logs the expired certificate as an error')
  const metrics = await (await fetch(`http://127.0.0.1:${e.server.port}/metrics`)).text()
  const line = metrics.split('\n').find((l) => l.startsWith('threatfeed_tls_certificate_expiry_seconds{') && l.includes('role="server"'))
  t.ok(line !== undefined && Number(line.split(' ').at(-1)) < -86_000, `negative seconds left: ${line}`)
})

t.test('a certificate 14 days or less from expiry: a warning at start; seconds left in /metrics', async (t) => {
  const pki = makePki(dir, 'pki-expiry')
  const now = Date.now()
  const soon = pki.issue({ end: opensslDate(now + 10 * 86_400_000 - 60_000) })
  const later = pki.issue({ end: opensslDate(now + 15 * 86_400_000) })
  const s = await serve(t, 'expiry-soon', { THREATFEED_TLS_CERT: soon.certFile, THREATFEED_TLS_KEY: soon.keyFile })
  const warnings = s.logs.filter((l) => l.level === 40 && String(l.msg).startsWith('TLS certificate'))
  t.same(warnings.map((l) => [l.msg, l.serial, l.role, l.daysLeft]), [[`TLS certificate CN=localhost in ${soon.certFile} expires in 10 days`, soon.serial, 'server', 9]])
  const metrics = await (await fetch(`http://127.0.0.1:${s.server.port}/metrics`)).text()
  const left = Number(new RegExp(`threatfeed_tls_certificate_expiry_seconds\\{role="server",subject="CN=localhost",serial="${soon.serial}"\\} (-?\\d+)`).exec(metrics)?.[1])
  t.ok(Math.abs(left - (10 * 86_400 - 60)) < 120, `seconds left: ${left}`)
  t.match(metrics, /threatfeed_tls_certificate_expiry_seconds\{role="chain",subject="CN=pki-expiry intermediate",serial="[0-9A-F]+"\} \d+/)
  const l = await serve(t, 'expiry-later', { THREATFEED_TLS_CERT: later.certFile, THREATFEED_TLS_KEY: later.keyFile })
  t.same(l.logs.filter((r) => Number(r.level) >= 40 && String(r.msg).startsWith('TLS certificate')), [], '15 days left: no warning yet')
})

t.test('TLS 1.2 and 1.3 only, with ECDHE and AEAD suites on 1.2', async (t) => {
  const pki = makePki(dir, 'pki-versions')
  const leaf = pki.issue()
  const s = await serve(t, 'versions', { THREATFEED_TLS_CERT: leaf.certFile, THREATFEED_TLS_KEY: leaf.keyFile })
  const port = s.server.tlsPort!
  // SECLEVEL=0 lets the client offer what its defaults would not, so the refusal is the server's.
  const cases = [
    { description: 'TLS 1.0', args: ['-tls1', '-cipher', 'DEFAULT@SECLEVEL=0'], ok: false },
    { description: 'TLS 1.1', args: ['-tls1_1', '-cipher', 'DEFAULT@SECLEVEL=0'], ok: false },
    { description: 'TLS 1.2', args: ['-tls1_2'], ok: true },
    { description: 'TLS 1.3', args: ['-tls1_3'], ok: true },
    { description: 'TLS 1.2 with a CBC suite', args: ['-tls1_2', '-cipher', 'ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA384'], ok: false },
    { description: 'TLS 1.2 with RSA key exchange', args: ['-tls1_2', '-cipher', 'AES128-GCM-SHA256'], ok: false },
  ]
  for (const c of cases) {
    const r = await tool('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost', ...c.args])
    const negotiated = /Protocol *: *(\S+)/.exec(r.stdout)?.[1] ?? /New, (TLSv[\d.]+)/.exec(r.stdout)?.[1]
    if (c.ok) t.ok(r.code === 0 && negotiated !== undefined && !/Cipher is \(NONE\)/.test(r.stdout), `${c.description}: handshake completes (${negotiated})`)
    else t.ok(r.code !== 0 || /Cipher is \(NONE\)/.test(r.stdout), `${c.description}: refused`)
  }
  const curl11 = await tool('curl', ['-sS', '--cacert', pki.rootFile, '--tlsv1.1', '--tls-max', '1.1', '--ciphers', 'DEFAULT@SECLEVEL=0', `https://localhost:${port}/healthz`])
  t.not(curl11.code, 0, 'curl limited to TLS 1.1 gets no answer')
})

t.test('the feed interface over TLS: Bearer and Basic, 304, gzip; no key is a 401 with the feed body', async (t) => {
  const pki = makePki(dir, 'pki-feed')
  const leaf = pki.issue()
  const s = await serve(t, 'feed', { THREATFEED_TLS_CERT: leaf.certFile, THREATFEED_TLS_KEY: leaf.keyFile })
  await feedWithEntries(s, t)
  const ca = readFileSync(pki.rootFile)
  const url = `${s.httpsBase}/v1/threat/feeds?format=plain`
  let first = await httpsGet(url, { ca, headers: { authorization: `Bearer ${s.key}` } })
  for (let i = 0; i < 100 && !first.body.toString().includes('198.51.100.7'); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    first = await httpsGet(url, { ca, headers: { authorization: `Bearer ${s.key}` } })
  }
  t.equal(first.status, 200)
  t.equal(first.body.toString(), '192.0.2.1/32\n198.51.100.7/32\n', 'Bearer: the feed')
  const etag = first.headers.etag as string

  const viaBasic = await tool('curl', ['-sS', '--cacert', pki.rootFile, '-u', `api:${s.key}`, url])
  t.equal(viaBasic.code, 0, viaBasic.stderr)
  t.equal(viaBasic.stdout, first.body.toString(), 'Basic (curl -u api:key): the same feed')

  const conditional = await httpsGet(url, { ca, headers: { authorization: `Bearer ${s.key}`, 'if-none-match': etag } })
  t.equal(conditional.status, 304)
  t.equal(conditional.body.length, 0)

  const gz = await httpsGet(url, { ca, headers: { authorization: `Bearer ${s.key}`, 'accept-encoding': 'gzip' } })
  t.equal(gz.status, 200)
  t.equal(gz.headers['content-encoding'], 'gzip')
  t.equal(gunzipSync(gz.body).toString(), first.body.toString(), 'gzip: the same bytes once decompressed')
  const gz304 = await httpsGet(url, { ca, headers: { authorization: `Bearer ${s.key}`, 'accept-encoding': 'gzip', 'if-none-match': gz.headers.etag as string } })
  t.equal(gz304.status, 304, 'gzip representation: 304 on its own ETag')

  const none = await httpsGet(url, { ca })
  t.equal(none.status, 401)
  t.same(JSON.parse(none.body.toString()), { success: false, error: 'invalid or missing API key', details: {} })
})
