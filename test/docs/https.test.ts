/**
 * docs/https.md's commands, run as written against `threatfeed serve` with TLS (a process of its
 * own, as an operator runs it): the curl poll (the page's host and CA swapped for the test's), and
 * the rotation script — the directory swap and the SIGHUP, with the periodic reload off so that
 * the signal alone must load the new pair. `$SERVER_PID` is the spawned server's pid, nothing else's.
 */
import t from 'tap'
import { execFile, spawn, spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { promisify } from 'node:util'
import { makePki, presentedSerial } from '../helpers/tls.js'
import { NO_COVERAGE, THREATFEED_BIN } from '../helpers/cli.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'

const has = (tool: string): boolean => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0
const page = readFileSync(new URL('../../docs/https.md', import.meta.url), 'utf8')
const blocks = [...page.matchAll(/^( *)```sh\n([\s\S]*?)^ *```/gm)].map((m) => m[2]!.split('\n').map((l) => l.slice(m[1]!.length)).join('\n'))
const curlLine = blocks.flatMap((b) => b.split('\n')).find((l) => l.startsWith('curl '))!
const rotation = blocks.find((b) => b.includes('mv -T'))!

t.test('the curl poll and the rotation script work as written', { skip: has('curl') && has('openssl') ? false : 'needs curl and openssl' }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-doc-https-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const pki = makePki(dir, 'pki')
  const first = pki.issue()
  const second = pki.issue({ keyType: 'rsa' })
  // The page's layout: /etc/threatfeed/tls is a symlink to a directory holding the pair.
  const etc = join(dir, 'etc', 'threatfeed')
  mkdirSync(join(etc, 'tls.v1'), { recursive: true })
  copyFileSync(first.certFile, join(etc, 'tls.v1', 'tls.crt'))
  copyFileSync(first.keyFile, join(etc, 'tls.v1', 'tls.key'))
  symlinkSync(join(etc, 'tls.v1'), join(etc, 'tls'))

  const dataDir = join(dir, 'data')
  const key = (spawnSync(process.execPath, [THREATFEED_BIN, 'workspace', 'create', '--name', 'acme', '--json'], { env: { PATH: process.env.PATH, ...NO_COVERAGE, THREATFEED_DATA_DIR: dataDir }, encoding: 'utf8' }).stdout)
  const ws = (JSON.parse(key) as { id: string }).id
  const made = JSON.parse(spawnSync(process.execPath, [THREATFEED_BIN, 'key', 'create', '--workspace', ws, '--scopes', 'signals:write,feeds:read', '--json'], { env: { PATH: process.env.PATH, ...NO_COVERAGE, THREATFEED_DATA_DIR: dataDir }, encoding: 'utf8' }).stdout) as { key: string }
  const server = spawn(process.execPath, [THREATFEED_BIN, 'serve'], {
    env: {
      PATH: process.env.PATH, ...NO_COVERAGE, HOST: '127.0.0.1', PORT: '0', THREATFEED_TLS_PORT: '0', THREATFEED_DATA_DIR: dataDir,
      THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB, THREATFEED_GEO_ASN_DB: ASN_TEST_DB, THREATFEED_FEED_REBUILD_MS: '0',
      THREATFEED_TLS_CERT: join(etc, 'tls', 'tls.crt'), THREATFEED_TLS_KEY: join(etc, 'tls', 'tls.key'), THREATFEED_TLS_RELOAD: 'off',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise((resolve) => server.on('exit', resolve))
  t.teardown(async () => { server.kill('SIGTERM'); await exited })
  const ports = await new Promise<{ plain: number, tls: number }>((resolve, reject) => {
    const timer = setTimeout(() => { reject(new Error('no "listening (TLS)" log line within 120 s')) }, 120_000)
    let plain = 0
    createInterface({ input: server.stdout }).on('line', (line) => {
      const rec = JSON.parse(line) as { msg?: string, port?: number }
      if (rec.msg === 'listening') plain = rec.port!
      if (rec.msg === 'listening (TLS)') { clearTimeout(timer); resolve({ plain, tls: rec.port! }) }
    })
  })
  await fetch(`http://127.0.0.1:${ports.plain}/v1/signal`, { method: 'POST', headers: { authorization: `Bearer ${made.key}`, 'content-type': 'application/json' }, body: '[{"type":"access_rules","action":"block","ip":"192.0.2.9"}]' })

  const sh = async (script: string): Promise<{ status: number, stdout: string, stderr: string }> => {
    try {
      const r = await promisify(execFile)('bash', ['--norc', '-euo', 'pipefail', '-c', script], { cwd: dir, env: { PATH: process.env.PATH, THREATFEED_KEY: made.key, SERVER_PID: String(server.pid) }, timeout: 60_000 })
      return { status: 0, stdout: r.stdout, stderr: r.stderr }
    } catch (e) {
      const err = e as { code?: number, stdout?: string, stderr?: string }
      return { status: err.code ?? 1, stdout: err.stdout ?? '', stderr: err.stderr ?? String(e) }
    }
  }
  const curl = await sh(curlLine.replace('curl ', 'curl -sS ').replace('https://feeds.example.net:8443', `https://localhost:${ports.tls}`).replace('--cacert ca.pem', `--cacert ${pki.rootFile}`))
  t.equal(curl.status, 0, `curl: ${curl.stderr}`)
  t.equal(curl.stdout, '192.0.2.9/32\n', 'the feed over HTTPS, Basic credentials')

  t.equal(await presentedSerial(ports.tls), first.serial, 'the first certificate')
  const script = rotation.replaceAll('/etc/threatfeed', etc)
    .replace('cp new.crt', `cp ${second.certFile}`).replace('cp new.key', `cp ${second.keyFile}`)
  const r = await sh(script)
  t.equal(r.status, 0, `the rotation script: ${r.stderr}`)
  let serial = ''
  for (let i = 0; i < 50 && serial !== second.serial; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    serial = await presentedSerial(ports.tls)
  }
  t.equal(serial, second.serial, 'new connections get the new certificate after the swap and SIGHUP')
})
