/**
 * One catalog (src/feed/catalog.ts): auth, list resolution and the feed service read one view
 * behind one poller of store.revisions(); other threads hold a replica (catalog-port.ts) on which
 * a revoked key stops working within 1 s.
 */
import t, { type Test } from 'tap'
import { MessageChannel, Worker } from 'node:worker_threads'
import { StoreCatalog } from '../../src/feed/catalog.js'
import { CatalogReplica, shareCatalog } from '../../src/feed/catalog-port.js'
import { FeedService } from '../../src/feed/feed-service.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { Authenticator } from '../../src/http/auth.js'
import { ListDirectory } from '../../src/http/list-resolve.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import type { EmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import type { Store } from '../../src/store/types.js'
import { ThreatfeedError } from '../../src/errors.js'
import { silentLog, tempStore, testGeo } from './fixtures.js'

const geo = await testGeo()

async function createKey (store: EmbeddedStore, workspaceId: string): Promise<{ key: string, id: string }> {
  const key = generateApiKey()
  const stored = await store.keys.create({ workspaceId, hash: hashApiKey(key), scopes: ['feeds:read'] })
  return { key, id: stored.id }
}

async function waitFor (what: string, fn: () => boolean | Promise<boolean>, ms = 3000): Promise<number> {
  const started = Date.now()
  while (!(await fn())) {
    if (Date.now() - started > ms) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  return Date.now() - started
}

t.test('auth, lists and the feed service share one poll of the store revisions', async (t) => {
  const tmp = await tempStore()
  t.teardown(() => tmp.cleanup())
  const store = tmp.store
  let revisionReads = 0
  const counted = new Proxy(store, {
    get (target, p) {
      if (p === 'revisions') return () => { revisionReads++; return target.revisions() }
      const v: unknown = Reflect.get(target, p)
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  }) as Store
  const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
  const { key, id } = await createKey(store, ws.id)
  const catalog = new StoreCatalog(counted, { pollMs: 20 })
  let polls = 0
  catalog.onPoll(() => { polls++ })
  await catalog.start()
  t.teardown(() => catalog.stop())
  const auth = new Authenticator(catalog, { pollMs: 20 })
  const lists = new ListDirectory(catalog, { pollMs: 20 })
  const feeds = new FeedService({ store: counted, pool: { ...inProcessTasks(geo), setGeo: () => {} }, config: { feedRebuildMs: 0, pollMs: 20 }, log: silentLog, geo, catalog })
  await Promise.all([auth.start(), lists.start(), feeds.start()])
  t.teardown(() => feeds.stop())
  t.ok(auth.authenticate(`Bearer ${key}`, 'feeds:read', 'feeds').ok)
  t.ok(await feeds.awaitSnapshot(ws.id, '*'), 'the feed service builds from the shared catalog')

  revisionReads = 0
  polls = 0
  await new Promise((resolve) => setTimeout(resolve, 400))
  t.ok(polls >= 3, `the catalog polled (${polls})`)
  t.ok(revisionReads <= polls + 1, `${revisionReads} reads of store.revisions() for ${polls} polls: one poller, not one per reader`)

  const list = await store.lists.create({ workspaceId: ws.id, name: 'tor-exits', description: '', defaults: {}, selector: {} })
  await store.keys.revoke(id)
  const seen = await waitFor('the change', () => {
    try {
      return lists.resolve(ws.id, 'tor-exits').id === list.id && !auth.authenticate(`Bearer ${key}`, 'feeds:read', 'feeds').ok
    } catch {
      return false
    }
  })
  t.ok(seen < 1000, `the list and the revoke are seen by both readers within 1 s (${seen} ms)`)
  t.equal(auth.authenticate(`Bearer ${key}`, 'feeds:read', 'feeds').ok, false)
})

/** A front-end thread with an Authenticator over a replica of `catalog` (test/fixtures/catalog/auth-thread.mjs). */
async function authThread (t: Test, catalog: StoreCatalog): Promise<(header: string, fresh?: boolean) => Promise<{ ok: boolean, code: string | null, loaded?: boolean }>> {
  const { port1, port2 } = new MessageChannel()
  const unshare = shareCatalog(catalog, port1)
  const worker = new Worker(new URL('../fixtures/catalog/auth-thread.mjs', import.meta.url), { workerData: { catalog: port2 }, transferList: [port2], execArgv: [`--import=${import.meta.resolve('tsx')}`] })
  const waiting = new Map<number, (r: { ok: boolean, code: string | null }) => void>()
  await new Promise<void>((resolve, reject) => {
    worker.once('error', reject)
    worker.on('message', (m: 'ready' | { id: number, ok: boolean, code: string | null }) => {
      if (m === 'ready') resolve()
      else waiting.get(m.id)?.(m)
    })
  })
  t.teardown(async () => {
    unshare()
    worker.postMessage('close')
    await worker.terminate()
  })
  let next = 0
  return async (header, fresh = false) => new Promise((resolve) => {
    const id = next++
    waiting.set(id, resolve)
    worker.postMessage({ id, header, fresh })
  })
}

t.test('a key revoked in the store stops working on another thread within 1 s', async (t) => {
  const tmp = await tempStore()
  t.teardown(() => tmp.cleanup())
  const ws = await tmp.store.workspaces.create({ name: 'acme', subscription: 'active' })
  const { key, id } = await createKey(tmp.store, ws.id)
  // The default THREATFEED_POLL_MS.
  const catalog = new StoreCatalog(tmp.store, { pollMs: 250 })
  await catalog.start()
  t.teardown(() => catalog.stop())
  const ask = await authThread(t, catalog)
  t.match(await ask(`Bearer ${key}`), { ok: true, code: null, loaded: true })
  await tmp.store.keys.revoke(id)
  const refusedAfter = await waitFor('the revoke on the thread', async () => !(await ask(`Bearer ${key}`)).ok)
  t.ok(refusedAfter < 1000, `refused on the thread ${refusedAfter} ms after the revoke`)
  t.equal((await ask(`Bearer ${key}`)).code, 'TF_ERR_UNAUTHORIZED')
})

t.test('a key created a moment ago is found by a thread through the main catalog (authenticateFresh)', async (t) => {
  const tmp = await tempStore()
  t.teardown(() => tmp.cleanup())
  const ws = await tmp.store.workspaces.create({ name: 'acme', subscription: 'active' })
  // No poll within the test: only the thread's refresh request can bring the key in.
  const catalog = new StoreCatalog(tmp.store, { pollMs: 600_000 })
  await catalog.start()
  t.teardown(() => catalog.stop())
  const ask = await authThread(t, catalog)
  const { key } = await createKey(tmp.store, ws.id)
  t.equal((await ask(`Bearer ${key}`)).ok, false, 'unknown to the replica')
  t.equal((await ask(`Bearer ${key}`, true)).ok, true, 'found after the refresh the thread asked for')
  t.equal((await ask(`Bearer ${key}`)).ok, true, 'and kept')
})

t.test('a refresh that fails in the main thread rejects on the replica with its error code', async (t) => {
  let down = false
  const tmp = await tempStore()
  t.teardown(() => tmp.cleanup())
  const store = tmp.store
  const flaky = {
    revisions: async () => {
      if (down) throw new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE')
      return store.revisions()
    },
    workspaces: store.workspaces,
    keys: store.keys,
    lists: store.lists,
  }
  const catalog = new StoreCatalog(flaky, { pollMs: 600_000 })
  await catalog.start()
  t.teardown(() => catalog.stop())
  const { port1, port2 } = new MessageChannel()
  const unshare = shareCatalog(catalog, port1)
  const replica = new CatalogReplica(port2)
  t.teardown(() => { unshare(); replica.close() })
  await replica.refresh()
  t.equal(replica.view?.revision, catalog.view?.revision, 'the replica holds the main view')
  down = true
  await t.rejects(replica.refresh(true), { code: 'TF_ERR_STORE_UNAVAILABLE' })
  t.ok(replica.view !== null, 'the last view keeps answering')
})
