/**
 * A feed-version write that waits for another process's write lock (issue 18). In 1 of 5 loaded
 * cluster runs one node served the same bytes as the others but a Last-Modified — and so
 * dialect_a's `generated` line, its bytes and ETags — two seconds later: its feed-version write
 * timed out after 2 s behind the lock, it kept its own build time, and nothing corrected it until
 * the content changed.
 *
 * Here a second process really holds the main environment's write lock: node A's build at the
 * boundary times out on it, node B's first build of the same content two seconds later too, so
 * each serves its own time. Once the lock is released every node must answer the version the
 * store recorded, with the same bytes.
 *
 * The file is its own child: `version-lock.test.ts --hold <dataDir> <lockFile> <releaseFile>`
 * opens the store's environment as the server does and, once the lock file appears, keeps a write
 * transaction of the main environment open until the release file appears.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { holdWriteLock } from '../helpers/hold-lock.js'

/** Long enough for a 2 s store timeout and a first build on the other node inside one interval. */
const REBUILD_MS = 6000
/** The feed-version store's timeout in the server (FeedService storeTimeoutMs). */
const STORE_TIMEOUT_MS = 2000
/** How soon after the release every node must answer the recorded version. */
const SETTLED_MS = 5000

async function runTest (): Promise<void> {
  const { default: t } = await import('tap')
  const { openStore } = await import('../../src/store/open.js')
  const { get, post, seedCluster, startNode, stopNode, variants } = await import('../helpers/cluster-nodes.js')
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
  t.setTimeout(180_000)

  t.test('nodes whose feed-version writes timed out behind a held lock answer the recorded version once it is released', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'tf-version-lock-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const fleet = await seedCluster(dir)
    const auth = { authorization: fleet.auth }
    const env = { THREATFEED_FEED_REBUILD_MS: String(REBUILD_MS), THREATFEED_POLL_MS: '100', THREATFEED_HTTP_THREADS: '1' }
    const a = await startNode(dir, env)
    t.teardown(() => stopNode(a, 'SIGKILL'))
    const b = await startNode(dir, env)
    t.teardown(() => stopNode(b, 'SIGKILL'))
    const store = await openStore({ kind: 'embedded', dataDir: dir })
    t.teardown(() => store.close())
    const feed = '/v1/threat/feeds?format=dialect_a&family=v4&action=block'

    const lock = join(dir, 'lock')
    const release = join(dir, 'release')
    const holder = spawn(process.execPath, ['--import=tsx', fileURLToPath(import.meta.url), '--hold', dir, lock, release], { stdio: ['ignore', 'pipe', 'inherit'] })
    t.teardown(() => { if (holder.exitCode === null) holder.kill('SIGKILL') })
    const lines = createInterface({ input: holder.stdout })[Symbol.asyncIterator]()
    t.equal((await lines.next()).value, 'ready', 'the other process has the store open')

    // Early in a window node A builds the workspace feed (node B does not), and a change follows:
    // A's next build is at the boundary that ends this window (rebuild-schedule.ts).
    await sleep(REBUILD_MS - (Date.now() % REBUILD_MS) + 100)
    const boundary = Math.floor(Date.now() / REBUILD_MS) * REBUILD_MS + REBUILD_MS
    t.equal((await get(a.port, feed, auth)).status, 200, 'node A built the feed')
    t.equal((await post(a.port, '/v1/signal', auth, [{ type: 'access_rules', action: 'block', ip: '192.0.2.7' }])).status, 200, 'the change is acknowledged')
    const head = await store.stream.head()
    while (await store.stream.getCheckpoint('rules') < head) await sleep(20)
    writeFileSync(lock, '')
    t.equal((await lines.next()).value, 'locked', 'another process holds the write lock')
    t.ok(Date.now() < boundary - 500, `the change applied and the lock taken ${boundary - Date.now()} ms before the boundary`)

    // A builds at the boundary and its write waits for the lock; past its timeout, B builds the
    // same content on demand and waits likewise, a whole second later at least.
    await sleep(boundary + STORE_TIMEOUT_MS + 1200 - Date.now())
    const [atA, atB] = await Promise.all([get(a.port, feed, auth), get(b.port, feed, auth)])
    t.match(atA.body.toString('utf8'), /192\.0\.2\.7/, 'node A switched at the boundary')
    t.match(atB.body.toString('utf8'), /192\.0\.2\.7/, 'node B built the same networks')
    t.not(atA.lastModified, atB.lastModified, `while the lock is held each node serves its own build time (A ${atA.lastModified}, B ${atB.lastModified})`)

    writeFileSync(release, '')
    t.equal((await lines.next()).value, 'released', 'the lock is released')
    const released = Date.now()
    const all = variants(['*'])
    const familyAction = (path: string): { family: 'v4' | 'v6' | 'both', action: 'block' | 'allow' } => {
      const q = new URLSearchParams(path.slice(path.indexOf('?')))
      return { family: q.get('family') as 'v4' | 'v6' | 'both', action: q.get('action') as 'block' | 'allow' }
    }
    let differ: string[] = []
    while (Date.now() - released < SETTLED_MS) {
      differ = []
      for (const v of all) {
        const recorded = await store.feedVersions.get({ workspaceId: fleet.workspaceId, listId: '*', ...familyAction(v.path) })
        const expected = recorded === null ? undefined : new Date(Math.floor(recorded.since / 1000) * 1000).toUTCString()
        const [x, y] = await Promise.all([get(a.port, v.path, { ...auth, ...v.headers }), get(b.port, v.path, { ...auth, ...v.headers })])
        if (x.lastModified !== expected || y.lastModified !== expected || x.etag !== y.etag || !x.body.equals(y.body)) {
          differ.push(`${v.path} ${JSON.stringify(v.headers)}: recorded ${expected}, A ${x.lastModified} ${x.etag}, B ${y.lastModified} ${y.etag}`)
        }
      }
      if (differ.length === 0) break
      await sleep(200)
    }
    t.same(differ.slice(0, 10), [], `within ${SETTLED_MS} ms of the release both nodes answer every variant with the recorded Last-Modified, the same ETag and bytes (${differ.length} differ)`)
    if (differ.length > 0) for (const [k, n] of [a, b].entries()) for (const w of n.warnings.slice(-10)) t.comment(`node ${'AB'[k]}: ${w}`)
  })
}

if (process.argv[2] === '--hold') await holdWriteLock('main', process.argv[3]!, process.argv[5]!, process.argv[4]!)
else await runTest()
