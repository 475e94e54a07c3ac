import t from 'tap'
import { FeedService } from '../../src/feed/feed-service.js'
import type { BuildOutcome, BuildReason, FeedMetrics } from '../../src/feed/metrics.js'
import type { FeedSnapshot } from '../../src/feed/snapshot-types.js'
import { createPool } from '../../src/pool/pool.js'
import { FAULTY_WORKER, injectFault } from '../fixtures/pool/faults.js'
import type { Store } from '../../src/store/types.js'
import { ThreatfeedError } from '../../src/errors.js'
import type { FeedSource } from '../../src/http/feed-routes.js'
import { addRules, rule, silentLog, tempStore, testGeo } from './fixtures.js'

const geo = await testGeo()
const pool = createPool({ workers: 2, taskTimeoutMs: 2000, filename: FAULTY_WORKER })
t.teardown(() => pool.destroy())
// Each test has its own store: a service builds every workspace of its store.
let tmp = await tempStore()
t.beforeEach(async () => {
  tmp = await tempStore()
})
t.afterEach(async () => {
  await tmp.cleanup()
})
// Start both workers before timing anything (a start from the TypeScript sources takes a second or more).
const idle = { confidence: 'high', severity: 'high', ips: '', asns: [], countries: [] }
await Promise.all([pool.compute({ block: [], allow: [], carve: idle, meta: '' }), pool.compute({ block: [], allow: [], carve: idle, meta: '' })])

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
const plainV4 = (s: FeedSnapshot | null): string | null => s === null ? null : Buffer.from(s.variants.get('plain|v4|block|')!.identity.body).toString()

class Recorder implements FeedMetrics {
  builds: Array<{ reason: BuildReason, outcome: BuildOutcome, at: number }> = []
  snapshots = 0
  /** `at` is when the build started: the interval is between starts. */
  observeBuild (reason: BuildReason, outcome: BuildOutcome, seconds: number): void { this.builds.push({ reason, outcome, at: Date.now() - seconds * 1000 }) }
  setSnapshot (): void { this.snapshots++ }
  removed: string[] = []
  setAge (): void {}
  removeFeed (workspaceId: string, feedId: string): void { this.removed.push(`${workspaceId}/${feedId}`) }
  built (): number { return this.builds.filter((b) => b.outcome === 'built').length }
}

/** A store whose rule, version and revision reads fail while `down` is set (a store outage);
 *  `revisionOfDown` fails the per-workspace revision reads alone. */
function flaky (store: Store): { store: Store, down: boolean, revisionOfDown: boolean } {
  const state = { down: false, revisionOfDown: false, store: store as Store }
  const fail = (): Promise<never> => Promise.reject(new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE'))
  state.store = new Proxy(store, {
    get (target, prop, receiver) {
      if (prop === 'revisions') return () => state.down ? fail() : target.revisions()
      if (prop === 'rules') {
        return new Proxy(target.rules, {
          get: (r, p) => p === 'accessRulesChangedSince'
            ? (...a: Parameters<Store['rules']['accessRulesChangedSince']>) => state.down ? fail() : r.accessRulesChangedSince(...a)
            : p === 'revisionOf' ? (ws: string) => state.down || state.revisionOfDown ? fail() : r.revisionOf(ws) : Reflect.get(r, p),
        })
      }
      if (prop === 'feedVersions') {
        const v = target.feedVersions
        return {
          observe: (...a: Parameters<Store['feedVersions']['observe']>) => state.down ? fail() : v.observe(...a),
          get: v.get.bind(v),
          recordFetches: (...a: Parameters<Store['feedVersions']['recordFetches']>) => state.down ? fail() : v.recordFetches(...a),
          fetchedSince: v.fetchedSince.bind(v),
        }
      }
      return Reflect.get(target, prop, receiver)
    },
  })
  return state
}

async function waitFor<T> (what: string, fn: () => T | null | undefined | false, ms = 8000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = fn()
    if (v !== null && v !== undefined && v !== false) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(10)
  }
}

function service (store: Store, rebuildMs: number, metrics = new Recorder(), more: Partial<ConstructorParameters<typeof FeedService>[0]> = {}): { feeds: FeedService, metrics: Recorder } {
  const feeds = new FeedService({ store, pool, config: { feedRebuildMs: rebuildMs, pollMs: 25 }, log: silentLog, metrics, geo, awaitMs: 8000, ...more })
  return { feeds, metrics }
}

/** Counts recordFetches calls per feed ('<workspace>/<list>'). */
function countingFetches (store: Store): { store: Store, recorded: Map<string, number> } {
  const recorded = new Map<string, number>()
  const v = store.feedVersions
  const feedVersions: Store['feedVersions'] = {
    observe: v.observe.bind(v),
    get: v.get.bind(v),
    record: v.record.bind(v),
    fetchedSince: v.fetchedSince.bind(v),
    savePublished: v.savePublished.bind(v),
    loadPublished: v.loadPublished.bind(v),
    recordFetches: async (fetches) => {
      for (const f of fetches) recorded.set(`${f.workspaceId}/${f.listId}`, (recorded.get(`${f.workspaceId}/${f.listId}`) ?? 0) + 1)
      await v.recordFetches(fetches)
    },
  }
  return { store: new Proxy(store, { get: (target, prop) => prop === 'feedVersions' ? feedVersions : Reflect.get(target, prop) }), recorded }
}


type ChangedSince = Store['rules']['accessRulesChangedSince']

/** The store, with `rules.accessRulesChangedSince` going through `spy` (which calls `read` for the real answer). */
function spyOnChangedSince<S extends Store> (store: S, spy: (args: Parameters<ChangedSince>, read: () => ReturnType<ChangedSince>) => ReturnType<ChangedSince>): S {
  return new Proxy(store, {
    get (target, prop) {
      const value: unknown = Reflect.get(target, prop)
      if (prop !== 'rules') return typeof value === 'function' ? value.bind(target) : value
      return new Proxy(target.rules, {
        get: (r, p) => p === 'accessRulesChangedSince'
          ? (...a: Parameters<ChangedSince>) => spy(a, () => r.accessRulesChangedSince(...a))
          : p === 'revisionOf' ? r.revisionOf.bind(r) : Reflect.get(r, p),
      })
    },
  })
}

t.test('a feed is built on its first request, not ahead of it; then getSnapshot answers synchronously', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'start', subscription: 'active' })
  const idle = await tmp.store.workspaces.create({ name: 'idle', subscription: 'inactive' })
  const list = await tmp.store.lists.create({ workspaceId: ws.id, name: 'edge', description: 'd', defaults: { family: 'v4' }, selector: { team: 'edge' } })
  await addRules(tmp.store, [rule(ws.id, '192.0.2.0/24', { labels: { team: 'edge' } }), rule(ws.id, 'SE'), rule(idle.id, '198.51.100.1/32')])
  const { feeds, metrics } = service(tmp.store, 60_000)
  t.teardown(() => feeds.stop())
  const source: FeedSource = feeds
  t.equal(source, feeds, 'FeedService is what the HTTP routes read from (type-checked)')
  t.notOk(feeds.ready())
  await feeds.start()
  await waitFor('ready', () => feeds.ready())
  await sleep(100)
  t.equal(metrics.built(), 0, 'nothing was ever served: nothing is built')
  t.equal(feeds.getSnapshot(ws.id, '*', Date.now()), null, 'the first request finds no snapshot')
  const s = await feeds.awaitSnapshot(ws.id, '*', Date.now())
  t.equal(feeds.getSnapshot(ws.id, '*', Date.now()), s, 'then answers synchronously')
  t.match(plainV4(s), /\n192\.0\.2\.0\/24\n/)
  t.ok(s.networks.block.v4 > 1, 'the country expanded')
  t.equal(metrics.built(), 1, 'the list feed is not built along with it')
  const l = await feeds.awaitSnapshot(ws.id, list.id, Date.now())
  t.equal(plainV4(l), '192.0.2.0/24\n')
  t.same(l.defaults, { family: 'v4' })
  await addRules(tmp.store, [rule(idle.id, '198.51.100.2/32')])
  await sleep(200)
  t.equal(metrics.built(), 2, 'a rule change builds no feed nobody asked for')
  t.equal(plainV4(await feeds.awaitSnapshot(idle.id, '*', Date.now())), '198.51.100.1/32\n198.51.100.2/32\n')
  await t.rejects(feeds.awaitSnapshot(ws.id, '6f1d1a40-0000-4000-8000-000000000000', Date.now()), { code: 'TF_ERR_LIST_NOT_FOUND' })
  const other = await tmp.store.lists.create({ workspaceId: idle.id, name: 'theirs', description: '', defaults: {}, selector: {} })
  await t.rejects(feeds.awaitSnapshot(ws.id, other.id, Date.now()), { code: 'TF_ERR_LIST_NOT_FOUND' }, "another workspace's list is not found")
})

t.test('changes show within the rebuild interval, and a feed is rebuilt at most once per interval', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'changes', subscription: 'active' })
  await addRules(tmp.store, [rule(ws.id, '192.0.2.1/32')])
  const { feeds, metrics } = service(tmp.store, 400)
  t.teardown(() => feeds.stop())
  await feeds.start()
  await waitFor('first build', () => feeds.getSnapshot(ws.id, '*', Date.now()))
  const t0 = Date.now()
  await addRules(tmp.store, [rule(ws.id, '192.0.2.2/32')])
  await waitFor('the new rule', () => plainV4(feeds.getSnapshot(ws.id, '*', Date.now()))?.includes('192.0.2.2/32'))
  t.ok(Date.now() - t0 < 400 + 1000, `shown after ${Date.now() - t0} ms`)
  // A burst of changes: builds stay one per interval.
  const burstStart = Date.now()
  for (let i = 0; i < 10; i++) {
    await addRules(tmp.store, [rule(ws.id, `198.51.100.${2 * i}/32`)])
    await sleep(60)
  }
  const burstEnd = Date.now()
  await waitFor('the burst', () => plainV4(feeds.getSnapshot(ws.id, '*', Date.now()))?.includes('198.51.100.18/32'))
  const mine = metrics.builds.filter((b) => b.outcome !== 'unchanged' && b.reason === 'change')
  // One per window of the interval (rebuild-schedule.ts), each started on or after its boundary;
  // `at` is rebuilt from two clocks' readings, so it may read up to a millisecond early.
  const windows = mine.map((b) => Math.floor((b.at + 1) / 400))
  for (let i = 1; i < windows.length; i++) t.ok(windows[i]! > windows[i - 1]!, `builds in windows ${windows[i - 1]} and ${windows[i]} (${mine[i]!.at - mine[i - 1]!.at} ms apart)`)
  // The first change's build; for the burst, one on its arrival, one per boundary it crossed and
  // one at the boundary after its last change.
  const crossed = Math.floor(burstEnd / 400) - Math.floor(burstStart / 400)
  t.ok(mine.length <= 3 + crossed, `${mine.length} builds for 11 changes (the burst crossed ${crossed} boundaries in ${burstEnd - burstStart} ms)`)
  await tmp.store.rules.deleteAccessByTarget(ws.id, { type: 'ip', value: '192.0.2.1/32' })
  await waitFor('the deletion', () => !(plainV4(feeds.getSnapshot(ws.id, '*', Date.now())) ?? '192.0.2.1/32').includes('192.0.2.1/32'))
})

t.test('a rule change refetches the rules of its own workspace only', async (t) => {
  const a = await tmp.store.workspaces.create({ name: 'a', subscription: 'active' })
  const b = await tmp.store.workspaces.create({ name: 'b', subscription: 'active' })
  await addRules(tmp.store, [rule(a.id, '192.0.2.1/32'), rule(b.id, '198.51.100.1/32')])
  const fetches = new Map<string, number>()
  const counting = spyOnChangedSince(tmp.store, async (args, read) => {
    fetches.set(args[0], (fetches.get(args[0]) ?? 0) + 1)
    return read()
  })
  const { feeds } = service(counting, 50)
  t.teardown(() => feeds.stop())
  await feeds.start()
  await waitFor('both built', () => feeds.getSnapshot(a.id, '*', Date.now()) !== null && feeds.getSnapshot(b.id, '*', Date.now()) !== null)
  const bBefore = feeds.getSnapshot(b.id, '*', Date.now())
  t.same([fetches.get(a.id), fetches.get(b.id)], [1, 1], 'each fetched once at start')
  for (let i = 2; i < 5; i++) {
    // Far apart: neighbours would be coalesced into one network.
    await addRules(tmp.store, [rule(a.id, `192.0.2.${10 * i}/32`)])
    await waitFor(`rule ${i}`, () => plainV4(feeds.getSnapshot(a.id, '*', Date.now()))?.includes(`192.0.2.${10 * i}/32`))
  }
  t.equal(fetches.get(a.id), 4, 'a: fetched again for each change')
  t.equal(fetches.get(b.id), 1, 'b: never fetched again')
  t.equal(feeds.getSnapshot(b.id, '*', Date.now()), bBefore, 'b: the same snapshot')
})

t.test('a rebuild reads the rules that changed, not the workspace, deletes included (the embedded store\'s change log)', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'incremental', subscription: 'active' })
  const many = Array.from({ length: 300 }, (_, i) => rule(ws.id, `10.${i >> 8}.${i & 255}.0/24`, { action: 'allow' }))
  await addRules(tmp.store, [rule(ws.id, '192.0.2.1/32'), ...many])
  const read: number[] = []
  const counting = spyOnChangedSince(tmp.store, async (_args, readRules) => {
    const answer = await readRules()
    read.push(answer.changed)
    return answer
  })
  const { feeds } = service(counting, 50)
  t.teardown(() => feeds.stop())
  await feeds.start()
  await feeds.awaitSnapshot(ws.id, '*', Date.now())
  t.same(read, [301], 'the first build reads every rule')
  const steps: Array<{ description: string, step: () => Promise<unknown>, shows: string, gone?: string, reads: number[] }> = [
    { description: 'an added rule', step: () => addRules(tmp.store, [rule(ws.id, '192.0.2.50/32')]), shows: '192.0.2.50/32', reads: [1] },
    { description: 'an updated rule', step: () => tmp.store.applyRuleBatch({ ops: [rule(ws.id, '192.0.2.50/32', { action: 'allow' }), rule(ws.id, '192.0.2.90/32')].map((input) => ({ op: 'upsertAccessRule' as const, input })) }), shows: '192.0.2.90/32', gone: '192.0.2.50/32', reads: [2] },
    { description: 'a deleted rule: listed as gone, nothing read whole', step: () => tmp.store.rules.deleteAccessByTarget(ws.id, { type: 'ip', value: '192.0.2.1/32' }), shows: '192.0.2.90/32', gone: '192.0.2.1/32', reads: [0] },
  ]
  for (const k of steps) {
    read.length = 0
    await k.step()
    await waitFor(k.description, () => {
      const text = plainV4(feeds.getSnapshot(ws.id, '*', Date.now()))
      return text?.includes(k.shows) === true && (k.gone === undefined || !text.includes(k.gone))
    })
    t.same(read, k.reads, `${k.description}: rules read`)
  }
})

t.test('a change seen while the per-workspace revision cannot be read still shows once it can', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'half-way', subscription: 'active' })
  await addRules(tmp.store, [rule(ws.id, '192.0.2.1/32')])
  const f = flaky(tmp.store)
  const { feeds } = service(f.store, 50)
  t.teardown(() => feeds.stop())
  await feeds.start()
  await feeds.awaitSnapshot(ws.id, '*', Date.now())
  f.revisionOfDown = true
  await addRules(tmp.store, [rule(ws.id, '198.51.100.9/32')])
  await sleep(200) // several polls see the store's revision move and fail on the workspace's
  f.revisionOfDown = false
  await waitFor('the change', () => plainV4(feeds.getSnapshot(ws.id, '*', Date.now()))?.includes('198.51.100.9/32'))
  t.pass('shown')
})

t.test('a rule disappears at its expiry, not an interval later, and no expired snapshot is ever served', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'expiry', subscription: 'active' })
  const expiresAt = Date.now() + 1500
  await addRules(tmp.store, [rule(ws.id, '192.0.2.9/32', { expiresAt }), rule(ws.id, '203.0.113.0/24')])
  const { feeds, metrics } = service(tmp.store, 30_000)
  t.teardown(() => feeds.stop())
  await feeds.start()
  const first = await feeds.awaitSnapshot(ws.id, '*', Date.now())
  t.equal(first.expiresAt, expiresAt)
  t.match(plainV4(first), /192\.0\.2\.9\/32/)
  t.equal(feeds.getSnapshot(ws.id, '*', expiresAt), null, 'asked at the expiry instant: no snapshot rather than a stale one')
  let servedStale = false
  const gone = await waitFor('the expiry', () => {
    const now = Date.now()
    const s = feeds.getSnapshot(ws.id, '*', now)
    if (s !== null && now >= expiresAt && plainV4(s)!.includes('192.0.2.9')) servedStale = true
    return s !== null && !plainV4(s)!.includes('192.0.2.9') ? now : null
  }, 5000)
  t.notOk(servedStale, 'never served past the expiry')
  t.ok(gone >= expiresAt, 'not before its expiry')
  t.ok(gone - expiresAt < 1000, `gone ${gone - expiresAt} ms after expiry, with a 30 s rebuild interval`)
  t.ok(metrics.builds.some((b) => b.reason === 'expiry' && b.outcome === 'built'))
  const after = feeds.getSnapshot(ws.id, '*', Date.now())!
  t.equal(plainV4(after), '203.0.113.0/24\n')
  t.equal(after.expiresAt, Infinity)
})

t.test('with builds slower than the time left to a lapse, the successor is built ahead and swapped in at the lapse: never a gap, never early, never late', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'ahead', subscription: 'active' })
  const expiresAt = Date.now() + 4000
  await addRules(tmp.store, [rule(ws.id, '192.0.2.9/32', { expiresAt }), rule(ws.id, '203.0.113.0/24')])
  // A busy pool: each build takes 600 ms more than its work. Before, the build started at the lapse,
  // and the feed had no snapshot to answer with for as long.
  const slow: ConstructorParameters<typeof FeedService>[0]['pool'] = {
    compute: async (task) => { await sleep(600); return pool.compute(task) },
    render: (task) => pool.render(task),
    setGeo: (data) => { pool.setGeo(data) },
  }
  const { feeds, metrics } = service(tmp.store, 30_000, new Recorder(), { pool: slow })
  t.teardown(() => feeds.stop())
  await feeds.start()
  t.match(plainV4(await feeds.awaitSnapshot(ws.id, '*', Date.now())), /192\.0\.2\.9/)
  const seen = { gap: 0, early: 0, late: 0, before: 0, after: 0 }
  for (const until = expiresAt + 1500; Date.now() < until; await sleep(10)) {
    const now = Date.now()
    const s = feeds.getSnapshot(ws.id, '*', now)
    if (s === null) {
      seen.gap++
      continue
    }
    const has = plainV4(s)!.includes('192.0.2.9')
    if (now < expiresAt) seen.before++
    else seen.after++
    if (has && now >= expiresAt) seen.late++
    if (!has && now < expiresAt) seen.early++
  }
  t.ok(seen.before > 10 && seen.after > 10, `looked before (${seen.before}) and after (${seen.after}) the lapse`)
  t.same({ gap: seen.gap, early: seen.early, late: seen.late }, { gap: 0, early: 0, late: 0 }, 'a snapshot at every look, the rule in it exactly until its expiry')
  const expiry = metrics.builds.find((b) => b.reason === 'expiry' && b.outcome === 'built')
  t.ok(expiry !== undefined && expiry.at < expiresAt - 100, `the successor's build started ${expiry === undefined ? '?' : expiresAt - expiry.at} ms ahead of the lapse`)
})

t.test('a crashing, exiting or hanging worker leaves the last good snapshot serving; the build is retried', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'crash', subscription: 'active' })
  await addRules(tmp.store, [rule(ws.id, '192.0.2.1/32')])
  const { feeds, metrics } = service(tmp.store, 100)
  t.teardown(() => feeds.stop())
  await feeds.start()
  const good = await feeds.awaitSnapshot(ws.id, '*', Date.now())
  let n = 2
  for (const fault of ['exit', 'hang', 'throw'] as const) {
    const failedBefore = metrics.builds.filter((b) => b.outcome === 'failed').length
    injectFault(fault)
    // Far apart, so that coalescing cannot hide a new address in a shorter prefix.
    await addRules(tmp.store, [rule(ws.id, `192.0.2.${10 * n}/32`)])
    await waitFor(`${fault}: a failed build`, () => metrics.builds.filter((b) => b.outcome === 'failed').length > failedBefore)
    const during = feeds.getSnapshot(ws.id, '*', Date.now())
    t.ok(during !== null, `${fault}: still serving`)
    t.ok(during!.builtAt >= good.builtAt)
    const ip = `192.0.2.${10 * n}/32`
    await waitFor(`${fault}: the retry`, () => plainV4(feeds.getSnapshot(ws.id, '*', Date.now()))?.includes(ip)).catch((e: Error) => {
      throw new Error(`${e.message}: ${JSON.stringify(metrics.builds)} ${JSON.stringify(pool.stats)}`)
    })
    t.ok(metrics.builds.some((b) => b.reason === 'retry' && b.outcome === 'built'), `${fault}: retried`)
    n++
  }
})

t.test('during a store outage feeds keep answering from memory and still honour expiry', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'outage', subscription: 'active' })
  const expiresAt = Date.now() + 2500
  await addRules(tmp.store, [rule(ws.id, '192.0.2.77/32', { expiresAt }), rule(ws.id, '198.51.100.0/24')])
  const f = flaky(tmp.store)
  const { feeds } = service(f.store, 200)
  t.teardown(() => feeds.stop())
  await feeds.start()
  const before = await feeds.awaitSnapshot(ws.id, '*', Date.now())
  t.match(plainV4(before), /192\.0\.2\.77/)
  f.down = true
  await addRules(tmp.store, [rule(ws.id, '203.0.113.5/32')])
  await sleep(300)
  t.equal(plainV4(feeds.getSnapshot(ws.id, '*', Date.now())), plainV4(before), 'answers from memory')
  const gone = await waitFor('the expiry without the store', () => {
    const s = feeds.getSnapshot(ws.id, '*', Date.now())
    return s !== null && !plainV4(s)!.includes('192.0.2.77') ? s : null
  }, 5000)
  t.equal(plainV4(gone), '198.51.100.0/24\n')
  t.ok(Date.now() - expiresAt < 1500)
  f.down = false
  await waitFor('the store is back', () => plainV4(feeds.getSnapshot(ws.id, '*', Date.now()))?.includes('203.0.113.5'))
})

t.test('lists created, changed and deleted while running', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'lists', subscription: 'active' })
  await addRules(tmp.store, [rule(ws.id, '192.0.2.0/24', { labels: { k: 'a' } }), rule(ws.id, '198.51.100.0/24', { labels: { k: 'b' } })])
  const { feeds } = service(tmp.store, 100)
  t.teardown(() => feeds.stop())
  await feeds.start()
  const list = await tmp.store.lists.create({ workspaceId: ws.id, name: 'l', description: '', defaults: {}, selector: { k: 'a' } })
  t.equal(plainV4(await feeds.awaitSnapshot(ws.id, list.id, Date.now())), '192.0.2.0/24\n', 'a new list is built on first request')
  await tmp.store.lists.update(list.id, { selector: { k: 'b' } })
  await waitFor('the changed selector', () => plainV4(feeds.getSnapshot(ws.id, list.id, Date.now())) === '198.51.100.0/24\n')
  await tmp.store.workspaces.update(ws.id, { name: 'renamed' })
  await waitFor('the new name', () => feeds.getSnapshot(ws.id, '*', Date.now())?.name === 'renamed')
  await tmp.store.lists.delete(list.id)
  await waitFor('the deletion', () => feeds.getSnapshot(ws.id, list.id, Date.now()) === null)
  await t.rejects(feeds.awaitSnapshot(ws.id, list.id, Date.now()), { code: 'TF_ERR_LIST_NOT_FOUND' })
})

t.test('a restart builds the feeds served in the hour before it, before ready; the others on their first request', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'restart', subscription: 'active' })
  const served = await tmp.store.lists.create({ workspaceId: ws.id, name: 'served', description: '', defaults: {}, selector: {} })
  const stale = await tmp.store.lists.create({ workspaceId: ws.id, name: 'stale', description: '', defaults: {}, selector: {} })
  const never = await tmp.store.lists.create({ workspaceId: ws.id, name: 'never', description: '', defaults: {}, selector: {} })
  await addRules(tmp.store, [rule(ws.id, '192.0.2.1/32')])
  const counting = countingFetches(tmp.store)
  const first = service(counting.store, 60_000)
  await first.feeds.start()
  for (const id of ['*', served.id]) await first.feeds.awaitSnapshot(ws.id, id, Date.now())
  await waitFor('fetch times recorded', () => counting.recorded.size === 2)
  // Many polls (every 25 ms) while the feeds are served: still one write per feed (at most one per 5 minutes).
  for (let i = 0; i < 20; i++) {
    for (const id of ['*', served.id]) first.feeds.getSnapshot(ws.id, id, Date.now())
    await sleep(15)
  }
  t.same([...counting.recorded.values()], [1, 1], 'each feed recorded once')
  await first.feeds.stop()
  // `stale` was built and last served two hours ago (as the store records it).
  for (const action of ['block', 'allow'] as const) {
    for (const family of ['v4', 'v6', 'both'] as const) await tmp.store.feedVersions.observe({ workspaceId: ws.id, listId: stale.id, family, action }, 'h', Date.now() - 7_300_000)
  }
  await tmp.store.feedVersions.recordFetches([{ workspaceId: ws.id, listId: stale.id, at: Date.now() - 7_200_000 }])
  const hourAgo = (await tmp.store.feedVersions.fetchedSince(Date.now() - 3_600_000)).map((f) => f.listId).sort()
  t.same(hourAgo, ['*', served.id].sort(), 'the store knows which feeds were served in the last hour')

  const second = service(tmp.store, 60_000)
  t.teardown(() => second.feeds.stop())
  await second.feeds.start()
  await waitFor('ready', () => second.feeds.ready())
  t.same(second.metrics.builds.map((b) => `${b.reason} ${b.outcome}`), ['start built', 'start built'], 'two feeds built before ready')
  t.match(plainV4(second.feeds.getSnapshot(ws.id, '*', Date.now())), /192\.0\.2\.1\/32/, 'the workspace feed is served at once')
  t.ok(second.feeds.getSnapshot(ws.id, served.id, Date.now()) !== null, 'and the list served in the last hour')
  for (const id of [stale.id, never.id]) {
    t.equal(second.feeds.getSnapshot(ws.id, id, Date.now()), null, 'a list not served in the last hour waits for its first request')
    t.ok(await second.feeds.awaitSnapshot(ws.id, id, Date.now()))
  }
  t.same(second.metrics.builds.filter((b) => b.reason === 'demand').length, 2, 'then built on demand')
})

t.test('a feed not served for idleMs is let go; its next request builds it at once, whatever the rebuild interval', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'idle-release', subscription: 'active' })
  await addRules(tmp.store, [rule(ws.id, '192.0.2.1/32')])
  const { feeds, metrics } = service(tmp.store, 60_000, new Recorder(), { idleMs: 300 })
  const removed = metrics.removed
  t.teardown(() => feeds.stop())
  await feeds.start()
  t.equal(plainV4(await feeds.awaitSnapshot(ws.id, '*', Date.now())), '192.0.2.1/32\n')
  await addRules(tmp.store, [rule(ws.id, '198.51.100.1/32')])
  await waitFor('released', () => removed.length > 0, 3000)
  t.same(removed, [`${ws.id}/*`], 'its metric series removed')
  t.equal(feeds.getSnapshot(ws.id, '*', Date.now()), null, 'no snapshot kept for a feed nobody polls')
  t.equal(plainV4(await feeds.awaitSnapshot(ws.id, '*', Date.now())), '192.0.2.1/32\n198.51.100.1/32\n', 'built again on request, with the change, though the interval is 60 s')
})

t.test('a first build shows every signal acknowledged before its request', async (t) => {
  const ws = await tmp.store.workspaces.create({ name: 'caught-up', subscription: 'active' })
  const list = await tmp.store.lists.create({ workspaceId: ws.id, name: 'l', description: '', defaults: {}, selector: {} })
  await addRules(tmp.store, [rule(ws.id, '192.0.2.1/32')])
  let pending: string[] = []
  // The stream consumer's part: applying what was acknowledged but not applied yet.
  const caughtUp = async (): Promise<void> => {
    const ips = pending
    pending = []
    await addRules(tmp.store, ips.map((ip) => rule(ws.id, ip)))
  }
  // Polls far apart: only the first build's own reads can see the new rules.
  const feeds = new FeedService({ store: tmp.store, pool, config: { feedRebuildMs: 60_000, pollMs: 60_000 }, log: silentLog, geo, caughtUp })
  t.teardown(() => feeds.stop())
  await feeds.start()
  pending = ['198.51.100.1/32']
  t.equal(plainV4(await feeds.awaitSnapshot(ws.id, '*', Date.now())), '192.0.2.1/32\n198.51.100.1/32\n', 'waited for the consumer')
  pending = ['203.0.113.1/32']
  t.equal(plainV4(await feeds.awaitSnapshot(ws.id, list.id, Date.now())), '192.0.2.1/32\n198.51.100.1/32\n203.0.113.1/32\n',
    'a second feed of the workspace re-reads the rules revision rather than trusting the last poll')
})
