/**
 * A batch answered 500 was applied later: with another process holding the stream's write lock,
 * the append raced a 2 s timer and did not cancel the commit, so each batch answered
 * `500 StoreUnavailableError` was written — and applied — once the lock was released (issue 16:
 * 6 of 6). Now an append whose commit cannot start before the cutoff is abandoned in its
 * transaction (src/store/commit-gate.ts).
 *
 * The file is its own child: `stream-lock-500-applied.test.ts --hold <dataDir> <releaseFile>`
 * opens the store's stream environment as the server does and keeps a write transaction open
 * until the release file appears.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { holdWriteLock } from '../helpers/hold-lock.js'

/** The answer's deadline (DECISIONS §5) and what a loaded machine may add to it. */
const DEADLINE_MS = 2000
const SLACK_MS = 400

async function runTest (): Promise<void> {
  const { default: t } = await import('tap')
  const { startRealServer } = await import('../helpers/real-server.js')

  t.test('with another process holding the stream write lock, every batch is answered 500 within the deadline and none is ever applied', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'tf-lock-'))
    t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
    const s = await startRealServer(dir, { THREATFEED_FEED_REBUILD_MS: '200' })
    t.teardown(() => s.server.stop())

    t.equal((await s.postBlocks(['192.0.2.1'])).status, 200, 'before: a batch is accepted')
    const headBefore = await s.server.store.stream.head()

    const release = join(dir, 'release')
    const child = spawn(process.execPath, ['--import=tsx', fileURLToPath(import.meta.url), '--hold', dir, release], { stdio: ['ignore', 'pipe', 'inherit'] })
    t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
    t.equal((await lines.next()).value, 'ready')
    t.equal((await lines.next()).value, 'locked')

    const held = ['198.51.100.1', '198.51.100.2', '198.51.100.3', '198.51.100.4', '198.51.100.5', '198.51.100.6']
    const answers = await Promise.all(held.map((ip) => s.postBlocks([ip])))
    for (const [i, a] of answers.entries()) {
      t.equal(a.status, 500, `batch ${i}: 500`)
      t.equal(a.code, 'StoreUnavailableError', `batch ${i}: the store is unavailable`)
      t.ok(a.ms <= DEADLINE_MS + SLACK_MS, `batch ${i}: answered in ${a.ms} ms`)
    }
    const feed = await s.feed()
    t.equal(feed.status, 200, 'feeds answer meanwhile')

    writeFileSync(release, '')
    t.equal((await lines.next()).value, 'released')
    // The abandoned transactions run now, in the server's next commit, and roll back; give the
    // consumer several polls to apply anything that was written.
    t.equal((await s.postBlocks(['192.0.2.2'])).status, 200, 'after: a batch is accepted again')
    await new Promise((resolve) => setTimeout(resolve, 1500))
    t.equal(await s.server.store.stream.head(), headBefore + 1, 'the stream holds only the batch accepted after the release')
    const after = await s.feed()
    t.match(after.body, /192\.0\.2\.2/, 'the batch accepted after the release is served')
    for (const ip of held) t.notMatch(after.body, new RegExp(ip.replace(/\./g, '\\.')), `${ip} (answered 500) is not served`)
  })
}

if (process.argv[2] === '--hold') await holdWriteLock('stream', process.argv[3]!, process.argv[4]!)
else await runTest()
