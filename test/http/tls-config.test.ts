/**
 * The TLS settings: environment errors name the variable, and a bad or mismatched certificate,
 * key or CA file stops `threatfeed serve` with a message naming the file, before anything opens.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { loadConfig } from '../../src/config.js'
import { makePki } from '../helpers/tls.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'

t.test('settings: defaults, PORT=off, and what is read', async (t) => {
  t.equal(loadConfig({}).tls, null, 'no certificate: no TLS listener')
  const c = loadConfig({ PORT: 'off', THREATFEED_TLS_CERT: 'c.pem', THREATFEED_TLS_KEY: '/k.pem', THREATFEED_TLS_KEY_PASSPHRASE: 'pw', THREATFEED_TLS_CLIENT_CA: 'ca.pem' })
  t.equal(c.port, null, 'PORT=off: no plain listener')
  t.same(c.tls, { port: 8443, certFile: resolve('c.pem'), keyFile: '/k.pem', passphrase: 'pw', clientCaFile: resolve('ca.pem'), reloadMs: 1000 })
  t.equal(loadConfig({ THREATFEED_TLS_CERT: 'c', THREATFEED_TLS_KEY: 'k', THREATFEED_TLS_RELOAD: 'off' }).tls?.reloadMs, null, 'reload on SIGHUP only')
  t.equal(loadConfig({ THREATFEED_TLS_CERT: 'c', THREATFEED_TLS_KEY: 'k', THREATFEED_TLS_RELOAD: '30s', THREATFEED_TLS_PORT: '443' }).tls?.port, 443)
})

t.test('bad settings name the variable', async (t) => {
  const cases = [
    { description: 'key without certificate', env: { THREATFEED_TLS_KEY: 'k' }, message: 'invalid configuration: THREATFEED_TLS_CERT is required when THREATFEED_TLS_KEY is set' },
    { description: 'certificate without key', env: { THREATFEED_TLS_CERT: 'c' }, message: 'invalid configuration: THREATFEED_TLS_KEY is required when THREATFEED_TLS_CERT is set' },
    { description: 'client CA without certificate', env: { THREATFEED_TLS_CLIENT_CA: 'ca' }, message: 'invalid configuration: THREATFEED_TLS_CERT is required when THREATFEED_TLS_CLIENT_CA is set' },
    { description: 'TLS port without certificate', env: { THREATFEED_TLS_PORT: '443' }, message: 'invalid configuration: THREATFEED_TLS_CERT is required when THREATFEED_TLS_PORT is set' },
    { description: 'PORT=off without TLS', env: { PORT: 'off' }, message: 'invalid configuration: PORT may be off only when THREATFEED_TLS_CERT and THREATFEED_TLS_KEY are set (no listener otherwise)' },
    { description: 'TLS port out of range', env: { THREATFEED_TLS_CERT: 'c', THREATFEED_TLS_KEY: 'k', THREATFEED_TLS_PORT: '65536' }, message: 'invalid configuration: THREATFEED_TLS_PORT must be between 0 and 65535, got 65536' },
    { description: 'reload not a duration', env: { THREATFEED_TLS_CERT: 'c', THREATFEED_TLS_KEY: 'k', THREATFEED_TLS_RELOAD: 'often' }, message: 'invalid configuration: THREATFEED_TLS_RELOAD must be a duration such as 90s, 15m, 12h or 7d, or off, got "often"' },
    { description: 'reload too often', env: { THREATFEED_TLS_CERT: 'c', THREATFEED_TLS_KEY: 'k', THREATFEED_TLS_RELOAD: '10ms' }, message: 'invalid configuration: THREATFEED_TLS_RELOAD must be between 100ms and 1d, got 10ms' },
    { description: 'PORT neither a number nor off', env: { PORT: 'on' }, message: 'invalid configuration: PORT must be a whole number, got "on"' },
  ]
  for (const c of cases) t.throws(() => loadConfig(c.env), { code: 'TF_ERR_CONFIG', message: c.message }, c.description)
})

t.test('bad files stop `threatfeed serve` with a message naming the file', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-tls-config-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const pki = makePki(dir, 'pki')
  const a = pki.issue()
  const b = pki.issue({ keyType: 'rsa' })
  const locked = pki.issue({ passphrase: 'correct horse' })
  const file = (name: string, text: string): string => { const p = join(dir, name); writeFileSync(p, text); return p }
  const garbage = file('garbage.pem', 'not a certificate\n')
  const brokenCert = file('broken.pem', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n')
  const keyAsCert = file('key-as-cert.pem', readFileSync(a.keyFile, 'utf8'))
  const missing = join(dir, 'missing.pem')
  const cases: Array<{ description: string, env: Record<string, string>, message: string }> = [
    { description: 'missing certificate', env: { THREATFEED_TLS_CERT: missing, THREATFEED_TLS_KEY: a.keyFile }, message: `THREATFEED_TLS_CERT ${missing} cannot be read: ENOENT` },
    { description: 'not a certificate', env: { THREATFEED_TLS_CERT: garbage, THREATFEED_TLS_KEY: a.keyFile }, message: `THREATFEED_TLS_CERT ${garbage} holds no PEM certificate (-----BEGIN CERTIFICATE-----)` },
    { description: 'a key in the certificate file', env: { THREATFEED_TLS_CERT: keyAsCert, THREATFEED_TLS_KEY: a.keyFile }, message: `THREATFEED_TLS_CERT ${keyAsCert} holds no PEM certificate (-----BEGIN CERTIFICATE-----)` },
    { description: 'a damaged certificate', env: { THREATFEED_TLS_CERT: brokenCert, THREATFEED_TLS_KEY: a.keyFile }, message: `THREATFEED_TLS_CERT ${brokenCert} certificate 1 cannot be parsed` },
    { description: 'missing key', env: { THREATFEED_TLS_CERT: a.certFile, THREATFEED_TLS_KEY: missing }, message: `THREATFEED_TLS_KEY ${missing} cannot be read: ENOENT` },
    { description: 'a certificate in the key file', env: { THREATFEED_TLS_CERT: a.certFile, THREATFEED_TLS_KEY: a.certFile }, message: `THREATFEED_TLS_KEY ${a.certFile} holds no PEM private key it can read` },
    { description: 'mismatched key (RSA key, ECDSA certificate)', env: { THREATFEED_TLS_CERT: a.certFile, THREATFEED_TLS_KEY: b.keyFile }, message: `THREATFEED_TLS_KEY ${b.keyFile} does not match the certificate in ${a.certFile} (subject CN=localhost)` },
    { description: 'encrypted key, no passphrase', env: { THREATFEED_TLS_CERT: locked.certFile, THREATFEED_TLS_KEY: locked.keyFile }, message: `THREATFEED_TLS_KEY ${locked.keyFile} is encrypted and THREATFEED_TLS_KEY_PASSPHRASE is not set` },
    { description: 'encrypted key, wrong passphrase', env: { THREATFEED_TLS_CERT: locked.certFile, THREATFEED_TLS_KEY: locked.keyFile, THREATFEED_TLS_KEY_PASSPHRASE: 'wrong' }, message: `THREATFEED_TLS_KEY ${locked.keyFile} cannot be decrypted with THREATFEED_TLS_KEY_PASSPHRASE` },
    { description: 'client CA not a certificate', env: { THREATFEED_TLS_CERT: a.certFile, THREATFEED_TLS_KEY: a.keyFile, THREATFEED_TLS_CLIENT_CA: garbage }, message: `THREATFEED_TLS_CLIENT_CA ${garbage} holds no PEM certificate (-----BEGIN CERTIFICATE-----)` },
  ]
  const results = await Promise.all(cases.map((c, i) => serve(join(dir, `data-${i}`), c.env)))
  cases.forEach((c, i) => {
    const r = results[i]!
    t.equal(r.code, 1, `${c.description}: exit 1`)
    t.ok(r.stderr.startsWith(`threatfeed: cannot start: invalid configuration: ${c.message}`), `${c.description}: ${r.stderr.trim()}`)
  })

  const ok = await serve(join(dir, 'data-ok'), { THREATFEED_TLS_CERT: locked.certFile, THREATFEED_TLS_KEY: locked.keyFile, THREATFEED_TLS_KEY_PASSPHRASE: 'correct horse' }, 'listening (TLS)')
  t.equal(ok.code, 0, `an encrypted key with its passphrase starts: ${ok.stderr}`)
})

/** Runs `threatfeed serve`; with `until`, stops it (SIGTERM) once that log message appears. */
function serve (dataDir: string, env: Record<string, string>, until?: string): Promise<{ code: number | null, stderr: string }> {
  const child = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], {
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', THREATFEED_TLS_PORT: '0', THREATFEED_DATA_DIR: dataDir, THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB, THREATFEED_GEO_ASN_DB: ASN_TEST_DB, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  let stdout = ''
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString()
    // A moment after the line: the signal handlers are installed once the start returns.
    if (until !== undefined && stdout.includes(`"msg":"${until}"`)) setTimeout(() => child.kill('SIGTERM'), 1000).unref()
  })
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  return new Promise((resolve) => child.on('exit', (code) => { clearTimeout(timer); resolve({ code, stderr }) }))
}
