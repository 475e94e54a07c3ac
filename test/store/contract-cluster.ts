/**
 * Store contract, several nodes on one store: feed versions that only move forward, and the
 * applier lease. Runs on LMDB here and on MongoDB wherever THREATFEED_TEST_MONGODB_URI is set.
 */
import { FEED_CHANGE_BUCKET_MS, FEED_VERSION_HISTORY, type FeedVersionBasis } from '../../src/store/types.js'
import type { StoreTest } from './contract.js'
import { freshWorkspaceId } from './contract-fixtures.js'

function basis (rulesRevision: number, more: Partial<FeedVersionBasis> = {}): FeedVersionBasis {
  return { rulesRevision, adminRevision: 1, geoEpoch: 10, geoDigest: 'g', expiryCutoff: 1000, ...more }
}

export function describeClusterContract (test: StoreTest): void {
  test('feed versions: a build from an older basis never replaces one from a newer (out-of-order writes)', async (t, store) => {
    const key = { workspaceId: freshWorkspaceId(), listId: '*', family: 'v4' as const, action: 'block' as const }
    // Each step: what a node observes, and the version every node must then agree on.
    const steps = [
      { description: 'first build', hash: 'A', now: 100, basis: basis(5), expected: { contentHash: 'A', since: 100 } },
      { description: 'newer rules, new content: a new run', hash: 'B', now: 200, basis: basis(6), expected: { contentHash: 'B', since: 200 } },
      { description: 'a slow node finishing a build from the older rules: the record stays', hash: 'A', now: 300, basis: basis(5), expected: { contentHash: 'B', since: 200 } },
      { description: 'an as-new basis with other content: the first writer stays', hash: 'X', now: 310, basis: basis(6), expected: { contentHash: 'B', since: 200 } },
      { description: 'older admin revision with the same rules: stays', hash: 'X', now: 320, basis: basis(6, { adminRevision: 0 }), expected: { contentHash: 'B', since: 200 } },
      { description: 'older geo databases: stays', hash: 'X', now: 330, basis: basis(6, { geoEpoch: 9, geoDigest: 'old' }), expected: { contentHash: 'B', since: 200 } },
      { description: 'an earlier expiry cutoff: stays', hash: 'X', now: 340, basis: basis(6, { expiryCutoff: 999 }), expected: { contentHash: 'B', since: 200 } },
      { description: 'a later expiry cutoff (a rule lapsed): a new run', hash: 'C', now: 400, basis: basis(6, { expiryCutoff: 1400 }), expected: { contentHash: 'C', since: 400 } },
      { description: 'newer geo databases: a new run', hash: 'D', now: 500, basis: basis(6, { geoEpoch: 11, geoDigest: 'new', expiryCutoff: 1500 }), expected: { contentHash: 'D', since: 500 } },
      { description: 'the same content from a newer basis keeps its run', hash: 'D', now: 600, basis: basis(7, { geoEpoch: 11 }), expected: { contentHash: 'D', since: 500 } },
      { description: 'back to A from newer rules is a new run', hash: 'A', now: 700, basis: basis(8, { geoEpoch: 11 }), expected: { contentHash: 'A', since: 700 } },
    ]
    for (const s of steps) {
      const answered = await store.feedVersions.observe(key, s.hash, s.now, s.basis)
      t.same(answered, s.expected, `${s.description}: answered`)
      t.same(await store.feedVersions.get(key), s.expected, `${s.description}: stored`)
    }
    const record = await store.feedVersions.record(key)
    t.same(record?.basis, basis(8, { geoEpoch: 11 }), 'the record says what it was built from')
    t.equal(record?.state, 'published')
    t.equal(record?.workspaceId, key.workspaceId, 'the shard key is on the record')
    t.same(record?.history, [{ contentHash: 'D', since: 500 }, { contentHash: 'C', since: 400 }, { contentHash: 'B', since: 200 }, { contentHash: 'A', since: 100 }], 'earlier runs, newest first')
    t.same(record?.changes, [[0, 5]], 'five runs in the first hour')
  })

  test('feed versions: concurrent builds from different bases settle on the newest, whatever the order', async (t, store) => {
    const key = { workspaceId: freshWorkspaceId(), listId: '*', family: 'both' as const, action: 'allow' as const }
    await store.feedVersions.observe(key, 'h0', 1, basis(0))
    const answers = await Promise.all([3, 1, 5, 2, 4].map((r) => store.feedVersions.observe(key, `h${r}`, 100 + r, basis(r))))
    t.same(await store.feedVersions.get(key), { contentHash: 'h5', since: 105 }, 'the newest basis holds the record')
    t.same(answers[2], { contentHash: 'h5', since: 105 })
    const record = await store.feedVersions.record(key)
    t.same(record?.basis, basis(5))
    t.notOk(record?.history.some((h) => h.contentHash === 'h5'), 'the newest run was never replaced and restored')
  })

  test('feed versions: history and change counts stay bounded', async (t, store) => {
    const key = { workspaceId: freshWorkspaceId(), listId: '*', family: 'v6' as const, action: 'block' as const }
    const days = 40
    // Three runs a day for 40 days: 120 runs.
    for (let i = 0; i < days * 3; i++) {
      const now = i * 8 * FEED_CHANGE_BUCKET_MS
      await store.feedVersions.observe(key, `h${i}`, now, basis(i))
    }
    const record = await store.feedVersions.record(key)
    t.equal(record?.history.length, FEED_VERSION_HISTORY, 'history capped')
    t.equal(record?.history[0]?.contentHash, `h${days * 3 - 2}`, 'newest earlier run first')
    const changes = record?.changes ?? []
    t.equal(changes.length, 90, 'one bucket per change in the last 30 days, none older')
    t.ok(changes.every(([at], i) => i === 0 || at > changes[i - 1]![0]), 'oldest first')
  })

  test('feed versions: without a basis (a single writer) every change is recorded, as before', async (t, store) => {
    const key = { workspaceId: freshWorkspaceId(), listId: '*', family: 'v4' as const, action: 'allow' as const }
    await store.feedVersions.observe(key, 'A', 100, basis(9))
    t.same(await store.feedVersions.observe(key, 'B', 200), { contentHash: 'B', since: 200 })
    t.same((await store.feedVersions.record(key))?.basis, null)
    t.same(await store.feedVersions.observe(key, 'C', 300, basis(1)), { contentHash: 'C', since: 300 }, 'any basis is newer than none')
  })
}

/** Resolves after `ms`. */
function sleep (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

export function describeLeaseContract (test: StoreTest): void {
  test('leases: one holder at a time, renewed by it, taken over when it lapses or is released', async (t, store) => {
    const leases = store.leases
    if (leases === undefined) throw new Error('a store shared by several processes has leases')
    const name = `applier:${freshWorkspaceId()}`
    const a = await leases.claim(name, 'node-a', 400)
    t.equal(a.owner, 'node-a', 'a free lease is taken')
    t.ok(a.expiresAt > Date.now() - 5_000, 'expires in the store\'s clock, about now + ttl')
    t.equal((await leases.claim(name, 'node-b', 400)).owner, 'node-a', 'another claim leaves a live lease alone')
    await sleep(250)
    const renewed = await leases.claim(name, 'node-a', 400)
    t.equal(renewed.owner, 'node-a')
    t.ok(renewed.expiresAt > a.expiresAt, 'the holder\'s claim renews it')
    await sleep(250)
    t.equal((await leases.claim(name, 'node-b', 400)).owner, 'node-a', 'renewed: still live past the first expiry')
    await sleep(450)
    t.equal((await leases.claim(name, 'node-b', 400)).owner, 'node-b', 'lapsed: the next claim takes it (handover)')
    await leases.release(name, 'node-a')
    t.equal((await leases.claim(name, 'node-c', 400)).owner, 'node-b', 'a release by a non-holder changes nothing')
    await leases.release(name, 'node-b')
    t.equal((await leases.claim(name, 'node-c', 400)).owner, 'node-c', 'released: taken at once')
    t.equal((await leases.get(name))?.owner, 'node-c', 'get names the holder')
    t.equal(await leases.get(`${name}:none`), null)
    const racing = await Promise.all(['x', 'y', 'z'].map((o) => leases.claim(`${name}:race`, o, 5_000)))
    t.equal(new Set(racing.map((l) => l.owner)).size, 1, 'concurrent first claims agree on one holder')
  })
}
