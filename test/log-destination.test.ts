/**
 * A log destination that fails never ends the server: with stdout on a full device (/dev/full:
 * every write is ENOSPC) or on a pipe whose reader has gone (EPIPE), `threatfeed serve` starts,
 * answers feeds and signals, and says once on stderr that log lines are being dropped.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, openSync, closeSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from './helpers/server.js'

async function freePort (): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => { resolve(port) })
    })
  })
}

async function until (what: string, ok: () => Promise<boolean>, gone: () => boolean, ms = 60_000): Promise<void> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (gone()) throw new Error(`${what}: the process ended`)
    if (await ok().catch(() => false)) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`${what}: not within ${ms} ms`)
}

const destinations = [
  { name: 'a full disk (/dev/full)', available: existsSync('/dev/full'), stdout: () => openSync('/dev/full', 'w') },
  { name: 'a pipe whose reader closed', available: true, stdout: () => 'pipe' as const },
]

for (const d of destinations) {
  t.test(`stdout on ${d.name}: the server keeps answering`, { skip: d.available ? false : 'no /dev/full here' }, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'tf-logdest-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const port = await freePort()
    const fd = d.stdout()
    const child = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], {
      env: {
        ...process.env,
        HOST: '127.0.0.1',
        PORT: String(port),
        THREATFEED_DATA_DIR: join(dir, 'data'),
        THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
        THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
        THREATFEED_LOG_LEVEL: 'debug',
      },
      stdio: ['ignore', fd, 'pipe'],
    })
    if (typeof fd === 'number') closeSync(fd)
    else child.stdout!.destroy() // the reader goes away before the first line
    let stderr = ''
    child.stderr!.on('data', (c: Buffer) => { stderr += c.toString() })
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => { resolve(code) }))
    let exitCode: number | null | undefined
    void exited.then((c) => { exitCode = c })
    t.teardown(() => { if (exitCode === undefined) child.kill('SIGKILL') })

    const base = `http://127.0.0.1:${port}`
    await until('/readyz 200', async () => (await fetch(`${base}/readyz`)).status === 200, () => exitCode !== undefined)
    // Requests that log: unauthenticated feed and signal requests, a bad route.
    const statuses = new Set<number>()
    for (let i = 0; i < 50; i++) {
      statuses.add((await fetch(`${base}/v1/threat/feeds`)).status)
      statuses.add((await fetch(`${base}/v1/signal`, { method: 'POST', body: '[]' })).status)
    }
    t.same([...statuses], [401], 'every request answered')
    t.equal((await fetch(`${base}/healthz`)).status, 200, 'still answering')
    t.equal(exitCode, undefined, 'the process did not end')
    t.match(stderr, /log lines are being dropped: E(NOSPC|PIPE)/, 'said so on stderr')
    t.equal(stderr.match(/being dropped/g)?.length, 1, 'once, not a line per dropped log line')
    child.kill('SIGTERM')
    t.equal(await exited, 0, 'stops as usual')
  })
}
