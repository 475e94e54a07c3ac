/**
 * `threatfeed serve` as a process refuses what it cannot listen on alone, at once, exit 1, naming
 * the variable (issue 36): a port another process holds — another threatfeed (SO_REUSEPORT would
 * have let both in and split the connections) or a plain server on the TLS port — and a HOST that
 * does not resolve or is not an address of this machine (that start used to hang for good).
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { createServer } from 'node:http'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from './helpers/server.js'
import { makePki } from './helpers/tls.js'

interface Served {
  /** The exit code once the process ends. */
  readonly exited: Promise<number | null>
  /** Resolves with the `listening` line's port, or null when the process ends first. */
  readonly listening: Promise<number | null>
  stderr (): string
  stop (): void
}

function serve (dir: string, env: Record<string, string>): Served {
  const child = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], {
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: '0',
      THREATFEED_DATA_DIR: mkdtempSync(join(dir, 'data-')),
      THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
      THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  // Every process ends with the file, whatever failed (a second server that did start, say).
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  let err = ''
  child.stderr.on('data', (c: Buffer) => { err += c.toString() })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const listening = new Promise<number | null>((resolve) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const rec = JSON.parse(line) as Record<string, unknown>
      if (rec.msg === 'listening' || rec.msg === 'listening (TLS)') resolve(rec.port as number)
    })
    void exited.then(() => resolve(null))
  })
  return { exited, listening, stderr: () => err, stop: () => { child.kill('SIGTERM') } }
}

/** Waits for `p` at most `ms`; the test fails rather than hangs. */
function within<T> (p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([p, new Promise<T>((_resolve, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms).unref())])
}

const dir = mkdtempSync(join(tmpdir(), 'tf-serve-listen-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

t.test('a second threatfeed on the port of a running one exits 1: PORT … is in use', async (t) => {
  // The first with front-end threads (their sockets share the port among themselves), the second
  // with and without.
  const first = serve(dir, { THREATFEED_HTTP_THREADS: '2' })
  t.teardown(() => { first.stop() })
  const port = await within(first.listening, 60_000, 'first server listening')
  t.type(port, 'number')
  for (const threads of ['1', '2']) {
    const second = serve(dir, { PORT: String(port), THREATFEED_HTTP_THREADS: threads })
    t.equal(await within(second.exited, 30_000, 'second server exit'), 1, `threads ${threads}: exit 1`)
    t.match(second.stderr(), `PORT ${port} is in use`, `threads ${threads}: names the port`)
  }
  // The first still answers, alone.
  t.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200)
  first.stop()
  t.equal(await first.exited, 0)
})

t.test('a threatfeed with one front end holds its port exclusively, too', async (t) => {
  const first = serve(dir, { THREATFEED_HTTP_THREADS: '1' })
  t.teardown(() => { first.stop() })
  const port = await within(first.listening, 60_000, 'first server listening')
  const second = serve(dir, { PORT: String(port), THREATFEED_HTTP_THREADS: '2' })
  t.equal(await within(second.exited, 30_000, 'second server exit'), 1)
  t.match(second.stderr(), `PORT ${port} is in use`)
  first.stop()
  t.equal(await first.exited, 0)
})

t.test('a plain HTTP server on the TLS port: the start fails naming THREATFEED_TLS_PORT', async (t) => {
  const pki = makePki(join(dir, 'pki'))
  const leaf = pki.issue()
  const foreign = createServer((_req, res) => { res.end('not threatfeed') })
  await new Promise<void>((resolve) => foreign.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { foreign.close() })
  const tlsPort = (foreign.address() as { port: number }).port
  for (const threads of ['1', '2']) {
    const s = serve(dir, { THREATFEED_TLS_CERT: leaf.certFile, THREATFEED_TLS_KEY: leaf.keyFile, THREATFEED_TLS_PORT: String(tlsPort), THREATFEED_HTTP_THREADS: threads })
    t.equal(await within(s.exited, 30_000, 'server exit'), 1, `threads ${threads}: exit 1`)
    t.match(s.stderr(), `THREATFEED_TLS_PORT ${tlsPort} is in use`, `threads ${threads}: names the TLS port variable`)
  }
})

t.test('HOST: one that cannot be listened on ends the start at once, naming HOST and why', async (t) => {
  const cases = [
    { description: 'a name that does not resolve', host: 'no-such-host.invalid', expected: /HOST no-such-host\.invalid does not resolve \((ENOTFOUND|EAI_AGAIN)\)/ },
    { description: 'an address of another machine (TEST-NET-1)', host: '192.0.2.1', expected: /HOST 192\.0\.2\.1 is not an address of this machine/ },
  ]
  for (const c of cases) {
    for (const threads of ['1', '2']) {
      const s = serve(dir, { HOST: c.host, THREATFEED_HTTP_THREADS: threads })
      const t0 = Date.now()
      t.equal(await within(s.exited, 30_000, `${c.description}: exit`), 1, `${c.description}, threads ${threads}: exit 1`)
      t.match(s.stderr(), c.expected, `${c.description}, threads ${threads}: the reason`)
      t.ok(Date.now() - t0 < 20_000, `${c.description}, threads ${threads}: promptly (${Date.now() - t0} ms)`)
    }
  }
  // A local address still works.
  const ok = serve(dir, { HOST: 'localhost', THREATFEED_HTTP_THREADS: '2' })
  t.teardown(() => { ok.stop() })
  const port = await within(ok.listening, 60_000, 'localhost listening')
  t.type(port, 'number', 'HOST=localhost listens')
  ok.stop()
  t.equal(await ok.exited, 0)
})
