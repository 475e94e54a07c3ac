/**
 * Supersession (several nodes, issue 18): when a node's snapshot counts as behind the store, what
 * its polls wait for, and that a node that cannot reproduce newer content does not rebuild in a
 * loop. The cluster tests (test/cluster/) show the same through three processes.
 */
import t from 'tap'
import { Supersession } from '../../src/feed/supersession.js'
import type { BuiltVersions } from '../../src/feed/last-modified.js'
import type { FeedKey, FeedVersionBasis, FeedVersionRecord, FeedVersionStore } from '../../src/store/types.js'

const key: FeedKey = { workspaceId: 'w', listId: '*', family: 'v4', action: 'block' }
const basis = (rulesRevision: number, expiryCutoff = 1000): FeedVersionBasis => ({ rulesRevision, adminRevision: 1, geoEpoch: 1, geoDigest: 'g', expiryCutoff })
const built = (contentHash: string, b: FeedVersionBasis): BuiltVersions => ({ basis: b, keys: new Map([['k', { key, contentHash }]]) })
const record = (contentHash: string, b: FeedVersionBasis | null, since = 1): FeedVersionRecord => ({ workspaceId: 'w', contentHash, since, basis: b, state: 'published', history: [], changes: [] })

/** A store whose one record is `current` (or whose reads fail), counting reads. */
function fakeStore (current: FeedVersionRecord | null | 'down'): { store: FeedVersionStore, reads: () => number } {
  let reads = 0
  const store = {
    record: async () => {
      reads++
      await new Promise((resolve) => setTimeout(resolve, 5))
      if (current === 'down') throw new Error('store down')
      return current
    },
  } as unknown as FeedVersionStore
  return { store, reads: () => reads }
}

t.test('behind: only other content recorded from a newer basis', async (t) => {
  const cases: Array<{ name: string, stored: FeedVersionRecord | null | 'down', mine: BuiltVersions | null, behind: boolean }> = [
    { name: 'nothing built yet', stored: record('B', basis(2)), mine: null, behind: false },
    { name: 'no record', stored: null, mine: built('A', basis(1)), behind: false },
    { name: 'the same content', stored: record('A', basis(2)), mine: built('A', basis(1)), behind: false },
    { name: 'other content, newer basis', stored: record('B', basis(2)), mine: built('A', basis(1)), behind: true },
    { name: 'other content, newer only by expiry cutoff', stored: record('B', basis(1, 2000)), mine: built('A', basis(1)), behind: true },
    { name: 'other content, the same basis', stored: record('B', basis(1)), mine: built('A', basis(1)), behind: false },
    { name: 'other content, older basis (this build was not recorded)', stored: record('B', basis(1)), mine: built('A', basis(2)), behind: false },
    { name: 'other content, a record without basis', stored: record('B', null), mine: built('A', basis(1)), behind: false },
    { name: 'other content, newer basis, whose run starts later (built ahead of a lapse, served nowhere yet)', stored: record('B', basis(1, 2000), Date.now() + 60_000), mine: built('A', basis(1)), behind: false },
    { name: 'the store fails', stored: 'down', mine: built('A', basis(1)), behind: false },
  ]
  for (const c of cases) {
    const feed = {}
    const s = new Supersession<object>(fakeStore(c.stored).store, 1000)
    if (c.mine !== null) s.built(feed, c.mine)
    t.equal(await s.behind(feed), c.behind, c.name)
  }
})

t.test('concurrent asks share one read per key', async (t) => {
  const { store, reads } = fakeStore(record('B', basis(2)))
  const s = new Supersession<object>(store, 1000)
  const feed = {}
  s.built(feed, built('A', basis(1)))
  t.same(await Promise.all([s.behind(feed), s.behind(feed), s.behind(feed)]), [true, true, true])
  t.equal(reads(), 1)
  await s.behind(feed)
  t.equal(reads(), 2, 'a later ask reads again')
})

t.test('catchUp: polls wait for the build under way, or for one catch-up build per interval', async (t) => {
  const s = new Supersession<object>(fakeStore(record('B', basis(2))).store, 60_000)
  const feed = {}
  s.built(feed, built('A', basis(1)))
  const running = new Promise<void>(() => {})
  await s.catchUp(feed, { building: () => running, rebuildNow: () => { throw new Error('no rebuild while one runs') } })
  t.ok(s.holds(feed, running), 'the build under way is waited for')
  t.notOk(s.catchingUp(feed, running), 'it is not a catch-up build (it reads rules as scheduled)')
  t.notOk(s.holds(feed, null), 'no build, nothing to wait for')

  let started = 0
  const catchUp = new Promise<void>(() => {})
  const hooks = { building: () => null, rebuildNow: () => { started++; return catchUp } }
  await s.catchUp(feed, hooks)
  t.equal(started, 1, 'a catch-up build starts')
  t.ok(s.holds(feed, catchUp) && s.catchingUp(feed, catchUp), 'polls wait for it, and it reads rules afresh')
  await s.catchUp(feed, hooks)
  t.equal(started, 1, 'not a second one within the interval (newer content this node cannot reproduce)')

  const notBehind = new Supersession<object>(fakeStore(record('A', basis(2))).store, 60_000)
  notBehind.built(feed, built('A', basis(1)))
  await notBehind.catchUp(feed, hooks)
  t.equal(started, 1, 'a node that is not behind builds nothing')
  t.notOk(notBehind.holds(feed, catchUp))

  const none = new Supersession<object>(fakeStore(record('B', basis(2))).store, 60_000)
  none.built(feed, built('A', basis(1)))
  await none.catchUp(feed, { building: () => null, rebuildNow: () => null })
  t.notOk(none.holds(feed, null), 'no build could start: the snapshot keeps serving')
})
