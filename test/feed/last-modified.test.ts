/**
 * A build whose feed-version write timed out serves a version from memory; when the store's answer
 * comes (the write queued behind another process's lock commits, or a retry succeeds) and records
 * another second for the same content, the keeper takes it and tells the feed (onStale) — issue
 * 18's Last-Modified two seconds apart between nodes for the same bytes. The store here answers
 * on a schedule (the real lock is test/cluster/version-lock.test.ts).
 */
import t from 'tap'
import { LastModifiedKeeper } from '../../src/feed/last-modified.js'
import type { FeedKey, FeedVersion, FeedVersionBasis, FeedVersionStore } from '../../src/store/types.js'

const TIMEOUT_MS = 40
const basis: FeedVersionBasis = { rulesRevision: 3, adminRevision: 1, geoEpoch: 0, geoDigest: '', expiryCutoff: 0 }
const key: FeedKey = { workspaceId: 'w', listId: '*', family: 'v4', action: 'block' }
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** One observe() call's answer: after `ms`, a version, an error, or never. */
type Answer = { ms: number, version: FeedVersion } | { ms: number, error: true } | 'never'

/** A store whose n-th observe() answers `answers[n]` (the last one repeats). */
function scheduledStore (answers: readonly Answer[]): FeedVersionStore & { calls: number } {
  const store = {
    calls: 0,
    observe (): Promise<FeedVersion> {
      const a = answers[Math.min(store.calls++, answers.length - 1)]!
      if (a === 'never') return new Promise(() => {})
      return new Promise((resolve, reject) => {
        setTimeout(() => { if ('error' in a) reject(new Error('store down')); else resolve(a.version) }, a.ms)
      })
    },
  }
  return store as unknown as FeedVersionStore & { calls: number }
}

t.test('a version served from memory moves to the recorded one once the store answers', async (t) => {
  const NOW = 3500
  const cases: Array<{
    description: string
    answers: Answer[]
    /** Another build observes this content before the late answer (at 20 ms). */
    laterBuild?: string
    expected: { stale: number, behind: number, predicted: number, calls: number }
  }> = [
    {
      description: 'the queued write returns another node\'s earlier record',
      answers: [{ ms: 100, version: { contentHash: 'A', since: 1000 } }],
      expected: { stale: 1, behind: 0, predicted: 1000, calls: 1 },
    },
    {
      description: 'the queued write recorded this build\'s own time',
      answers: [{ ms: 100, version: { contentHash: 'A', since: NOW } }],
      expected: { stale: 0, behind: 0, predicted: NOW, calls: 1 },
    },
    {
      description: 'another record in the same second: dialect_a and Last-Modified are the same',
      answers: [{ ms: 100, version: { contentHash: 'A', since: 3001 } }],
      expected: { stale: 0, behind: 0, predicted: 3001, calls: 1 },
    },
    {
      description: 'the store failed: asked again after the backoff, then answers',
      answers: [{ ms: 5, error: true }, { ms: 5, error: true }, { ms: 5, version: { contentHash: 'A', since: 1000 } }],
      expected: { stale: 1, behind: 0, predicted: 1000, calls: 3 },
    },
    {
      description: 'a slow answer is waited for, not asked again',
      answers: [{ ms: 2 * TIMEOUT_MS + 30, version: { contentHash: 'A', since: 1000 } }],
      expected: { stale: 1, behind: 0, predicted: 1000, calls: 1 },
    },
    {
      description: 'newer content was recorded meanwhile: behind, not stale',
      answers: [{ ms: 100, version: { contentHash: 'B', since: 4000 } }],
      expected: { stale: 0, behind: 1, predicted: NOW, calls: 1 },
    },
    {
      description: 'a later build moved on before the answer came: nothing to correct',
      answers: [{ ms: 100, version: { contentHash: 'A', since: 1000 } }, { ms: 0, version: { contentHash: 'C', since: 5000 } }],
      laterBuild: 'C',
      expected: { stale: 0, behind: 0, predicted: 9000, calls: 2 },
    },
    {
      description: 'the store never answers: the attempts end',
      answers: ['never'],
      expected: { stale: 0, behind: 0, predicted: NOW, calls: 1 },
    },
  ]
  // The keeper's timers are unref'd (a server has other handles): keep this process alive.
  const alive = setInterval(() => {}, 1000)
  t.teardown(() => { clearInterval(alive) })
  for (const c of cases) {
    const store = scheduledStore(c.answers)
    const keeper = new LastModifiedKeeper(store, { timeoutMs: TIMEOUT_MS, settleBackoffMs: [10, 10, 10] })
    let stale = 0
    let behind = 0
    const served = await keeper.forBuild(basis, { onBehind: () => { behind++ }, onStale: () => { stale++ } }).observe(key, 'A', NOW)
    t.same(served, { contentHash: 'A', since: NOW }, `${c.description}: the build serves its own time meanwhile`)
    if (c.laterBuild !== undefined) {
      await sleep(20)
      await keeper.forBuild(basis, () => {}).observe(key, c.laterBuild, 5000)
    }
    // Past every attempt: 3 × (timeout + backoff) and the slowest answer.
    await sleep(3 * (TIMEOUT_MS + 10) + 3 * TIMEOUT_MS + 150)
    t.same({ stale, behind, predicted: keeper.predict(key, 'A', 9000), calls: store.calls }, c.expected, c.description)
  }
})
