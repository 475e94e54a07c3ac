/**
 * Regression: a failed LMDB commit ended the process. lmdb-js rejects, besides the promise of
 * each write, two promises nobody holds — the commit promise of the event turn's batch and
 * `commitError` — and Node's default for an unhandled rejection is to exit. The store must
 * instead reject the write with TF_ERR_STORE_UNAVAILABLE, carrying LMDB's own error, and keep
 * the process (and the environment) alive.
 *
 * A commit is made to fail for real: the child runs under a file-size limit (`ulimit -f`) with
 * SIGXFSZ ignored, so LMDB's page writes past the limit fail as they would on a full disk. The
 * child installs no unhandledRejection handler: one unhandled rejection and it exits non-zero.
 *
 * The file is its own child: `lmdb-commit-error.test.ts --child <dataDir>`.
 */
import { spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { openStore } from '../../src/store/open.js'

/** KiB: the store is created, then its appends fail within a few writes. */
const FILE_LIMIT_KIB = 1024

async function runChild (dataDir: string): Promise<void> {
  process.on('SIGXFSZ', () => {}) // a write past the limit then fails with EFBIG instead of killing us
  const store = await openStore({ kind: 'embedded', dataDir })
  const payload = 'x'.repeat(1000)
  for (let i = 0; i < 12; i++) {
    try {
      await store.stream.append(Array.from({ length: 100 }, () => ({ workspaceId: 'w', payload, acceptedAt: 1 })))
      process.stdout.write(JSON.stringify({ ok: true }) + '\n')
    } catch (e) {
      const err = e as { code?: string, cause?: { message?: string, code?: unknown } }
      process.stdout.write(JSON.stringify({ ok: false, code: err.code, cause: err.cause?.message, causeCode: err.cause?.code }) + '\n')
    }
  }
  // Let any stray rejection surface before declaring success.
  await new Promise((resolve) => setTimeout(resolve, 200))
  process.stdout.write(JSON.stringify({ head: await store.stream.head() }) + '\n')
  await store.close().catch(() => {})
}

async function runTest (): Promise<void> {
  const { default: t } = await import('tap')
  if (process.platform === 'win32') {
    t.plan(0, 'needs a POSIX shell for ulimit')
    return
  }
  t.test('a failed commit rejects with TF_ERR_STORE_UNAVAILABLE and leaves no unhandled rejection', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'threatfeed-commit-error-'))
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    const child = spawn('sh', ['-c', `ulimit -f ${FILE_LIMIT_KIB} && exec "$0" "$@"`, process.execPath, '--import=tsx', fileURLToPath(import.meta.url), '--child', dir], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.setEncoding('utf8').on('data', (c: string) => { out += c })
    child.stderr.setEncoding('utf8').on('data', (c: string) => { err += c })
    const code = await new Promise((resolve) => child.once('exit', resolve))
    const lines = out.trim().split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>)
    t.equal(code, 0, `the process lived on (stderr: ${err.slice(-500)})`)
    const failed = lines.filter((l) => l.ok === false)
    t.ok(lines.some((l) => l.ok === true), 'writes within the limit succeeded')
    t.ok(failed.length > 0, 'writes past the limit failed')
    t.ok(failed.every((l) => l.code === 'TF_ERR_STORE_UNAVAILABLE'), 'as TF_ERR_STORE_UNAVAILABLE')
    t.ok(failed.every((l) => typeof l.cause === 'string' && !String(l.cause).startsWith('Commit failed') && l.causeCode !== undefined),
      `with LMDB's own error as the cause: ${JSON.stringify(failed[0])}`)
    t.match(lines.at(-1), { head: Number }, 'and the store still answers reads')
  })
}

if (process.argv[2] === '--child') await runChild(process.argv[3]!)
else await runTest()
