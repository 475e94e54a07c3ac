/**
 * Served copies (issue 35, item 5) on a real embedded store: the total bound drops the copies
 * saved longest ago, the per-feed bound keeps the variants polled most lately, and a copy is not
 * restored for a variant whose content the store's feed-version record moved past, nor once lapsed.
 */
import { randomBytes } from 'node:crypto'
import { gzipSync } from 'node:zlib'
import t from 'tap'
import { openStore } from '../../src/store/open.js'
import { pollKey, restoreServedCopy, ServedCopies, copyBasis } from '../../src/feed/served-copy.js'
import type { FeedSnapshot, Representation, Variant } from '../../src/feed/snapshot-types.js'

const quiet = { info () {}, warn () {} }

function rep (body: Uint8Array, etag: string): Representation {
  return { body, etag, headers: [['ETag', etag]], notModifiedHeaders: [['ETag', etag]], length: body.byteLength }
}

/** A snapshot of one plain v4 block variant of `text`, Last-Modified `at`. */
function snapshot (workspaceId: string, feedId: string, text: string, at: number, expiresAt = Infinity): FeedSnapshot {
  const identity = Buffer.from(text)
  const variant: Variant = { status: 200, contentType: 'text/plain', identity: rep(identity, `"i-${text.length}"`), gzip: rep(gzipSync(identity), `"g-${text.length}"`), entries: 1, limit: 10, lastModified: at, lastModifiedHttp: new Date(at).toUTCString() }
  const none = { total: { v4: new Uint32Array(0), v6: new Uint32Array(0) }, groups: [] }
  return { workspaceId, feedId, name: 'w', defaults: null, limit: 10, builtAt: at, expiresAt, shardCounts: [], networks: { block: { v4: 1, v6: 0 }, allow: { v4: 0, v6: 0 } }, variants: new Map([['plain|v4|block|', variant]]), published: { block: none, allow: none } }
}

const polled = new Map([[pollKey('plain|v4|block|', false), Date.now()]])

t.test('the total bound drops the copies saved longest ago', async (t) => {
  const store = await openStore({ kind: 'embedded', dataDir: t.testdir() })
  t.teardown(() => store.close())
  const ws = (await store.workspaces.create({ name: 'w', subscription: 'active' })).id
  // Random text compresses badly: each copy is a little over 20 KB, two fit, not three.
  const text = (n: number): string => `${n}${randomBytes(20_000).toString('base64')}`
  const copies = new ServedCopies(store, { feedBytes: 1 << 20, totalBytes: 50_000 }, quiet)
  for (const [n, feed] of ['a', 'b', 'c'].entries()) {
    copies.published(snapshot(ws, feed, text(n), 1000), copyBasis(null, 'w', 'null'), polled, 0)
    await copies.flush()
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  const listed = await store.feedVersions.listServed!()
  t.same(listed.map((e) => e.listId).sort(), ['b', 'c'], 'the first copy went to make room')
  const total = listed.reduce((s, e) => s + e.bytes, 0)
  t.ok(total <= 50_000 && total > 40_000, `within the total (${total} bytes)`)
})

t.test('the per-feed bound keeps the variants polled most lately; nothing polled, nothing saved', async (t) => {
  const store = await openStore({ kind: 'embedded', dataDir: t.testdir() })
  t.teardown(() => store.close())
  const ws = (await store.workspaces.create({ name: 'w', subscription: 'active' })).id
  const copies = new ServedCopies(store, { feedBytes: 1 << 20, totalBytes: 1 << 20 }, quiet)
  copies.published(snapshot(ws, '*', 'x', 1000), copyBasis(null, 'w', 'null'), new Map(), 0)
  await copies.flush()
  t.same(await store.feedVersions.listServed!(), [], 'no poll: no copy')
  const tiny = new ServedCopies(store, { feedBytes: 100, totalBytes: 1 << 20 }, quiet)
  tiny.published(snapshot(ws, '*', 'x', 1000), copyBasis(null, 'w', 'null'), polled, 0)
  await tiny.flush()
  t.same(await store.feedVersions.listServed!(), [], 'a variant past the per-feed bound is left out (and with it the copy)')
})

t.test('restored only while valid: lapsed, or content recorded since, is not served', async (t) => {
  const store = await openStore({ kind: 'embedded', dataDir: t.testdir() })
  t.teardown(() => store.close())
  const ws = await store.workspaces.create({ name: 'w', subscription: 'active' })
  const at = 1_700_000_000_000
  const key = { workspaceId: ws.id, listId: '*', family: 'v4' as const, action: 'block' as const }
  await store.feedVersions.observe(key, 'h1', at)
  const copies = new ServedCopies(store, { feedBytes: 1 << 20, totalBytes: 1 << 20 }, quiet)
  const now = Date.now()
  copies.published(snapshot(ws.id, '*', '192.0.2.1/32\n', at, now + 60_000), copyBasis(null, 'w', 'null'), polled, 0)
  await copies.flush()
  const ok = await restoreServedCopy(store, { workspaceId: ws.id, listId: '*' }, now, quiet)
  t.equal(ok?.snapshot.restored, true, 'a valid copy is restored')
  t.equal(Buffer.from(ok!.snapshot.variants.get('plain|v4|block|')!.identity.body).toString(), '192.0.2.1/32\n', 'its identity body inflated from the gzip one')
  t.equal(await restoreServedCopy(store, { workspaceId: ws.id, listId: '*' }, now + 60_000, quiet), null, 'past its expiresAt: not restored')
  await store.workspaces.update(ws.id, { name: 'renamed' })
  t.equal(await restoreServedCopy(store, { workspaceId: ws.id, listId: '*' }, now, quiet), null, 'the workspace renamed: not restored')
  await store.workspaces.update(ws.id, { name: 'w' })
  await store.feedVersions.observe(key, 'h2', at + 5000)
  t.equal(await restoreServedCopy(store, { workspaceId: ws.id, listId: '*' }, now, quiet), null, 'newer content recorded since the save: not restored')
})
