/**
 * Feed-version reads see the latest commit of any writer (issue 18). lmdb-js keeps one read
 * snapshot per environment and renews it early only after that handle's own commits, so a node
 * that had read a record kept reading it after another node moved it: for content that went
 * A→B→A, observe() answered A's first run — a Last-Modified no other node served — and
 * supersession's record() did not see a newer build recorded.
 *
 * Two stores on one directory stand for two nodes; the writer commits synchronously (the
 * consumer thread's mode, as in arrival-order.test.ts), so no timer of lmdb-js runs between its
 * commits and the read, every time.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openEmbeddedStore } from '../../../src/store/embedded/embedded-store.js'
import { openStore } from '../../../src/store/open.js'
import type { FeedKey, FeedVersionBasis, Store } from '../../../src/store/types.js'

function basis (rulesRevision: number): FeedVersionBasis {
  return { rulesRevision, adminRevision: 1, geoEpoch: 0, geoDigest: '', expiryCutoff: 0 }
}

t.test('a node reads the version another node recorded after its own last read', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tf-fv-latest-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const a = await openEmbeddedStore(dir, { syncWrites: true })
  const b = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(async () => { await a.close(); await b.close() })

  // Each case: node a moves the record after node b read it; what node b must then read.
  const cases: Array<{ description: string, read: (s: Store, key: FeedKey) => Promise<unknown>, expected: unknown }> = [
    { description: 'observe() of content that went A→B→A: the second run of A', read: (s, key) => s.feedVersions.observe(key, 'A', 3500, basis(3)), expected: { contentHash: 'A', since: 3000 } },
    { description: 'get(): the second run of A', read: (s, key) => s.feedVersions.get(key), expected: { contentHash: 'A', since: 3000 } },
    { description: 'record(): built from the newest basis', read: async (s, key) => (await s.feedVersions.record(key))?.basis, expected: basis(3) },
  ]
  for (const [i, c] of cases.entries()) {
    const key: FeedKey = { workspaceId: `w${i}`, listId: '*', family: 'v4', action: 'block' }
    await a.feedVersions.observe(key, 'A', 1000, basis(1))
    // lmdb-js renews a cached snapshot on a timer: long enough for b's next read to be of this commit.
    await new Promise((resolve) => setTimeout(resolve, 200))
    t.same(await b.feedVersions.get(key), { contentHash: 'A', since: 1000 }, `${c.description}: node b saw the first run`)
    // Not awaited: each commits in the call.
    const moves = [a.feedVersions.observe(key, 'B', 2000, basis(2)), a.feedVersions.observe(key, 'A', 3000, basis(3))]
    t.same(await c.read(b, key), c.expected, c.description)
    t.same(await Promise.all(moves), [{ contentHash: 'B', since: 2000 }, { contentHash: 'A', since: 3000 }], `${c.description}: node a moved it`)
  }
})
