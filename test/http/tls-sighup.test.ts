/**
 * SIGHUP makes `threatfeed serve` read the TLS files again: with THREATFEED_TLS_RELOAD=off the
 * new certificate is served only after the signal.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { makePki, presentedSerial, type Issued } from '../helpers/tls.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'

t.test('SIGHUP reloads the certificate; the process keeps running', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-tls-hup-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const pki = makePki(dir, 'pki')
  const live = join(dir, 'live')
  let n = 0
  const install = (leaf: Issued): void => {
    const gen = join(dir, `gen-${++n}`)
    mkdirSync(gen)
    writeFileSync(join(gen, 'tls.crt'), readFileSync(leaf.certFile))
    writeFileSync(join(gen, 'tls.key'), readFileSync(leaf.keyFile))
    symlinkSync(gen, join(dir, 'live.next'))
    renameSync(join(dir, 'live.next'), live)
  }
  const first = pki.issue()
  const second = pki.issue()
  install(first)

  const child = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], {
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: 'off',
      THREATFEED_TLS_PORT: '0',
      THREATFEED_TLS_CERT: join(live, 'tls.crt'),
      THREATFEED_TLS_KEY: join(live, 'tls.key'),
      THREATFEED_TLS_RELOAD: 'off',
      // Two front-end threads: the SIGHUP must reach both (either may take a connection).
      THREATFEED_HTTP_THREADS: '2',
      THREATFEED_DATA_DIR: join(dir, 'data'),
      THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
      THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  t.teardown(() => { child.kill('SIGKILL') })
  const logs: Array<Record<string, unknown>> = []
  const waiters: Array<{ msg: string, resolve: (rec: Record<string, unknown>) => void }> = []
  createInterface({ input: child.stdout }).on('line', (line) => {
    const rec = JSON.parse(line) as Record<string, unknown>
    logs.push(rec)
    for (const w of waiters.filter((w) => w.msg === rec.msg)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(rec) }
  })
  const next = (msg: string): Promise<Record<string, unknown>> => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "${msg}" log line within 60 s`)), 60_000)
    waiters.push({ msg, resolve: (rec) => { clearTimeout(timer); resolve(rec) } })
  })

  const threadsUp = next('front-end threads listening')
  const listening = await next('listening (TLS)')
  const port = listening.port as number
  // The main thread listens first; the other thread reads the files when it starts.
  await threadsUp
  t.notOk(logs.some((l) => l.msg === 'listening'), 'PORT=off: no plain listener')
  await new Promise((resolve) => setTimeout(resolve, 1000))
  t.equal(await presentedSerial(port), first.serial)

  install(second)
  await new Promise((resolve) => setTimeout(resolve, 2500))
  t.equal(await presentedSerial(port), first.serial, 'THREATFEED_TLS_RELOAD=off: the files are not polled')
  const reloaded = next('TLS certificate reloaded')
  child.kill('SIGHUP')
  t.match(await reloaded, { reason: 'SIGHUP', serial: second.serial, previous: first.serial })
  t.equal(await presentedSerial(port), second.serial, 'after SIGHUP: the new certificate')

  const unchanged = next('TLS files unchanged')
  child.kill('SIGHUP')
  t.match(await unchanged, { reason: 'SIGHUP', serial: second.serial }, 'a SIGHUP with nothing new says so')

  // Once for the process, not once per thread (issue 36): the threads' own lines are debug lines.
  await new Promise((resolve) => setTimeout(resolve, 500))
  t.equal(logs.filter((l) => l.msg === 'TLS certificate reloaded').length, 1, 'the reload is logged once')
  t.equal(logs.filter((l) => l.msg === 'TLS files unchanged').length, 1, 'so is a reload that found nothing new')

  child.kill('SIGTERM')
  t.equal(await exited, 0, 'still running until SIGTERM, then a clean exit')
})
