/** Store contract, admin half: workspaces, keys, lists, revisions, ping and errors. */
import { randomUUID } from 'node:crypto'
import type { BatchingStore } from '../../src/store/batch-types.js'
import type { StoreTest } from './contract.js'
import { UUID, accessInput, freshWorkspaceId } from './contract-fixtures.js'

function hashOf (n: number): string {
  return n.toString(16).padStart(64, '0')
}

/** Listings are oldest first, ties (same millisecond) by id: the expected order of `items`. */
function inCreationOrder (...items: Array<{ id: string, createdAt: number }>): string[] {
  return [...items].sort((x, y) => x.createdAt - y.createdAt || (x.id < y.id ? -1 : 1)).map((x) => x.id)
}

async function adminRevision (store: BatchingStore): Promise<number> {
  return (await store.revisions()).admin
}

export function describeAdminContract (test: StoreTest): void {
  test('workspaces: create, get, update, delete, list', async (t, store) => {
    const before = Date.now()
    const a = await store.workspaces.create({ name: 'acme', subscription: 'active' })
    const b = await store.workspaces.create({ name: 'beta', subscription: 'inactive' })
    t.match(a.id, UUID)
    t.not(a.id, b.id)
    t.ok(a.createdAt >= before && a.createdAt <= Date.now(), 'createdAt is now')
    t.same(a, { id: a.id, name: 'acme', subscription: 'active', createdAt: a.createdAt, deletedAt: null })
    t.same(await store.workspaces.get(a.id), a)
    t.equal(await store.workspaces.get(randomUUID()), null)

    t.same(await store.workspaces.update(a.id, { subscription: 'inactive' }), { ...a, subscription: 'inactive' })
    t.same(await store.workspaces.update(a.id, { name: 'acme2' }), { ...a, name: 'acme2', subscription: 'inactive' })
    t.same(await store.workspaces.update(a.id, {}), { ...a, name: 'acme2', subscription: 'inactive' })
    t.equal(await store.workspaces.update(randomUUID(), { name: 'x' }), null)

    t.same((await store.workspaces.list()).map((w) => w.id), inCreationOrder(a, b), 'oldest first')

    t.equal(await store.workspaces.delete(b.id), true)
    const deleted = await store.workspaces.get(b.id)
    t.type(deleted?.deletedAt, 'number', 'a deleted workspace is kept, marked')
    t.equal(await store.workspaces.delete(b.id), false, 'no live workspace any more')
    t.equal(await store.workspaces.delete(randomUUID()), false)
    t.equal(await store.workspaces.update(b.id, { subscription: 'active' }), null, 'a deleted workspace is not updated')
    t.same((await store.workspaces.list()).map((w) => [w.id, w.deletedAt === null]), inCreationOrder(a, b).map((id) => [id, id === a.id]))
  })

  test('keys: create, getByHash, get, revoke, list', async (t, store) => {
    const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
    const other = await store.workspaces.create({ name: 'other', subscription: 'active' })
    const k1 = await store.keys.create({ workspaceId: ws.id, hash: hashOf(1), scopes: ['signals:write', 'feeds:read'] })
    const k2 = await store.keys.create({ workspaceId: ws.id, hash: hashOf(2), scopes: ['feeds:read'] })
    const k3 = await store.keys.create({ workspaceId: other.id, hash: hashOf(3), scopes: ['signals:write'] })
    t.match(k1.id, UUID)
    t.same(k1, { id: k1.id, workspaceId: ws.id, hash: hashOf(1), scopes: ['signals:write', 'feeds:read'], createdAt: k1.createdAt, revokedAt: null })
    t.same(await store.keys.getByHash(hashOf(2)), k2)
    t.same(await store.keys.get(k3.id), k3)
    t.equal(await store.keys.getByHash(hashOf(9)), null)
    t.equal(await store.keys.get(randomUUID()), null)
    t.same((await store.keys.list(ws.id)).map((k) => k.id), inCreationOrder(k1, k2))
    t.same((await store.keys.list()).map((k) => k.id), inCreationOrder(k1, k2, k3))
    t.same(await store.keys.list(randomUUID()), [])

    t.equal(await store.keys.revoke(k1.id), true)
    const revoked = await store.keys.getByHash(hashOf(1))
    t.type(revoked?.revokedAt, 'number', 'getByHash still finds a revoked key, marked')
    t.equal(await store.keys.revoke(k1.id), false, 'revoking twice changes nothing')
    t.same(await store.keys.get(k1.id), revoked, 'the first revocation time stays')
    t.equal(await store.keys.revoke(randomUUID()), false)
    t.equal((await store.keys.get(k2.id))?.revokedAt, null, 'other keys untouched')
  })

  test('keys: the bouncer setting is set, kept, cleared, and moves the admin revision', async (t, store) => {
    const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
    const k = await store.keys.create({ workspaceId: ws.id, hash: hashOf(1), scopes: ['feeds:read'] })
    t.equal(k.bouncer, undefined, 'none by default: the workspace feed\'s block networks')
    const listId = randomUUID()
    const before = (await store.revisions()).admin
    const set = await store.keys.setBouncer(k.id, { listId, action: 'allow' })
    t.same(set, { ...k, bouncer: { listId, action: 'allow' } })
    t.same(await store.keys.get(k.id), set, 'read back by id')
    t.same(await store.keys.getByHash(hashOf(1)), set, 'and by hash')
    t.same((await store.keys.list(ws.id))[0], set, 'and listed')
    t.ok((await store.revisions()).admin > before, 'the admin revision moved (servers reload the key)')
    t.same((await store.keys.setBouncer(k.id, { listId: null, action: 'block' }))?.bouncer, { listId: null, action: 'block' }, 'the workspace feed, named')
    const cleared = await store.keys.setBouncer(k.id, null)
    t.same(cleared, k, 'cleared: as created')
    t.same(await store.keys.get(k.id), k)
    t.equal(await store.keys.setBouncer(randomUUID(), null), null, 'no such key')
    await store.keys.revoke(k.id)
    t.equal(await store.keys.setBouncer(k.id, { listId: null, action: 'block' }), null, 'a revoked key is not changed')
  })

  test('keys: refused for a missing or deleted workspace and for a hash already stored', async (t, store) => {
    const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
    const gone = await store.workspaces.create({ name: 'gone', subscription: 'active' })
    await store.workspaces.delete(gone.id)
    await store.keys.create({ workspaceId: ws.id, hash: hashOf(1), scopes: ['feeds:read'] })
    const cases = [
      { description: 'unknown workspace', input: { workspaceId: randomUUID(), hash: hashOf(2) }, code: 'TF_ERR_WORKSPACE_NOT_FOUND' },
      { description: 'deleted workspace', input: { workspaceId: gone.id, hash: hashOf(3) }, code: 'TF_ERR_WORKSPACE_NOT_FOUND' },
      { description: 'duplicate hash', input: { workspaceId: ws.id, hash: hashOf(1) }, code: 'TF_ERR_STORE_CONFLICT' },
    ]
    for (const c of cases) {
      await t.rejects(store.keys.create({ ...c.input, scopes: ['feeds:read'] }), { code: c.code }, c.description)
    }
    t.equal((await store.keys.list()).length, 1, 'nothing was stored by the refused creates')
  })

  test('lists: create, get, update, delete, list, findByName', async (t, store) => {
    const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
    const other = await store.workspaces.create({ name: 'other', subscription: 'active' })
    const input = {
      workspaceId: ws.id,
      name: 'edge',
      description: 'edge routers',
      defaults: { format: 'plain' as const, family: 'v4' as const, maxEntries: 500, severity: 'high' as const },
      selector: { team: 'red', tier: '1' },
    }
    const a = await store.lists.create(input)
    t.match(a.id, UUID)
    t.same(a, { id: a.id, ...input, createdAt: a.createdAt, updatedAt: a.createdAt })
    t.same(await store.lists.get(a.id), a)
    t.equal(await store.lists.get(randomUUID()), null)

    const b = await store.lists.create({ ...input, description: 'same name', defaults: {}, selector: {} })
    const c = await store.lists.create({ ...input, name: 'core' })
    const d = await store.lists.create({ ...input, workspaceId: other.id })
    t.same((await store.lists.findByName(ws.id, 'edge')).map((l) => l.id), inCreationOrder(a, b), 'names need not be unique')
    t.same((await store.lists.findByName(ws.id, 'edg')).map((l) => l.id), [], 'exact names only')
    t.same((await store.lists.findByName(other.id, 'edge')).map((l) => l.id), [d.id], 'per workspace')
    t.same((await store.lists.list(ws.id)).map((l) => l.id), inCreationOrder(a, b, c))
    t.same((await store.lists.list()).map((l) => l.id), inCreationOrder(a, b, c, d))

    const renamed = await store.lists.update(b.id, { name: 'renamed', selector: { team: 'blue' }, defaults: { action: 'allow' } })
    t.same(renamed, { ...b, name: 'renamed', selector: { team: 'blue' }, defaults: { action: 'allow' }, updatedAt: renamed?.updatedAt })
    t.ok((renamed?.updatedAt ?? 0) >= b.updatedAt)
    t.same((await store.lists.findByName(ws.id, 'edge')).map((l) => l.id), [a.id], 'the old name no longer finds it')
    t.same((await store.lists.findByName(ws.id, 'renamed')).map((l) => l.id), [b.id])
    const described = await store.lists.update(c.id, { description: 'core routers' })
    t.same(described, { ...c, description: 'core routers', updatedAt: described?.updatedAt }, 'unpatched fields stay')
    t.equal(await store.lists.update(randomUUID(), { name: 'x' }), null)

    t.equal(await store.lists.delete(a.id), true)
    t.equal(await store.lists.delete(a.id), false)
    t.equal(await store.lists.get(a.id), null)
    t.same(await store.lists.findByName(ws.id, 'edge'), [])
    t.same((await store.lists.list(ws.id)).map((l) => l.id), inCreationOrder(b, c))
    await t.rejects(store.lists.create({ ...input, workspaceId: randomUUID() }), { code: 'TF_ERR_WORKSPACE_NOT_FOUND' })
  })

  test('publish settings: list shards and guards, publish state, workspace feed guards (issue 21)', async (t, store) => {
    const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
    const guards = { minEntries: 5, maxShrinkPct: 10, maxGrowPct: 50, rejectSpecial: true, mode: 'drop' as const, minPrefixV4: 8, minPrefixV6: 16, accepted: 'abc' }
    const l = await store.lists.create({ workspaceId: ws.id, name: 'edge', description: '', defaults: { shards: 8, guards: { ...guards, $where: 'x' } as never }, selector: {} })
    t.same(l.defaults, { shards: 8, guards }, 'known guard fields only')
    t.same((await store.lists.get(l.id))?.defaults, { shards: 8, guards })
    const revision = (await store.revisions()).admin
    const state = { held: { digest: 'd1', guards: { block: 'min-entries' }, since: 5, diff: { block: { published: 3, held: 1, added: 0, removed: 2, addedSample: [], removedSample: ['10.0.0.1/32', '10.0.0.3/32'] }, allow: { published: 0, held: 0, added: 0, removed: 0, addedSample: [], removedSample: [] } } }, publishedDigest: 'd0' }
    t.equal(await store.lists.setPublishState(l.id, state), true)
    const got = await store.lists.get(l.id)
    t.same(got?.publishState, state)
    t.equal(got?.updatedAt, l.updatedAt, 'a publish state is no change of the list')
    t.equal((await store.revisions()).admin, revision, 'nor of the admin revision')
    t.equal(await store.lists.setPublishState(randomUUID(), state), false)
    const w = await store.workspaces.update(ws.id, { feedGuards: { maxGrowPct: 0 } })
    t.same(w?.feedGuards, { maxGrowPct: 0 })
    t.same((await store.workspaces.get(ws.id))?.feedGuards, { maxGrowPct: 0 })
    const cleared = await store.workspaces.update(ws.id, { feedGuards: null })
    t.equal(cleared?.feedGuards, undefined)
    t.equal((await store.workspaces.get(ws.id))?.feedGuards, undefined)
  })

  test('selectors and labels are stored as data, never as query operators', async (t, store) => {
    const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
    // Ingest and the CLI refuse such keys; the store must still never interpret them.
    const selector = { $where: 'sleep(1000)', 'a.b': 'c', $gt: '' }
    const list = await store.lists.create({ workspaceId: ws.id, name: 'odd', description: '', defaults: {}, selector })
    t.same((await store.lists.get(list.id))?.selector, selector)
    const labels = { $ne: 'x', 'dotted.key': 1, plain: true }
    const rule = await store.rules.upsertAccessRule(accessInput(ws.id, { labels }))
    t.same(rule.labels, labels)
    t.same((await store.rules.listAccessRules(ws.id, Date.now()))[0]?.labels, labels)
  })

  test('revisions: admin rises on every workspace, key and list change', async (t, store) => {
    const start = await store.revisions()
    t.type(start.admin, 'number')
    t.type(start.rules, 'number')
    const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
    let last = await adminRevision(store)
    t.ok(last > start.admin, 'workspace create')
    const steps: Array<[string, () => Promise<unknown>]> = [
      ['workspace update', () => store.workspaces.update(ws.id, { subscription: 'inactive' })],
      ['key create', () => store.keys.create({ workspaceId: ws.id, hash: hashOf(7), scopes: ['feeds:read'] })],
      ['key revoke', async () => store.keys.revoke((await store.keys.list(ws.id))[0]?.id ?? '')],
      ['list create', () => store.lists.create({ workspaceId: ws.id, name: 'l', description: '', defaults: {}, selector: {} })],
      ['list update', async () => store.lists.update((await store.lists.list(ws.id))[0]?.id ?? '', { name: 'm' })],
      ['list delete', async () => store.lists.delete((await store.lists.list(ws.id))[0]?.id ?? '')],
      ['workspace delete', () => store.workspaces.delete(ws.id)],
    ]
    for (const [description, step] of steps) {
      await step()
      const now = await adminRevision(store)
      t.ok(now > last, description)
      last = now
    }
    t.equal((await store.revisions()).rules, start.rules, 'admin changes leave the rules revision alone')
  })

  test('ping answers while open; every call rejects with TF_ERR_STORE_UNAVAILABLE once closed', async (t, store) => {
    await t.resolves(store.ping())
    const ws = freshWorkspaceId()
    await store.close()
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['ping', () => store.ping()],
      ['revisions', () => store.revisions()],
      ['workspaces.get', () => store.workspaces.get(ws)],
      ['workspaces.create', () => store.workspaces.create({ name: 'x', subscription: 'active' })],
      ['keys.getByHash', () => store.keys.getByHash(hashOf(1))],
      ['lists.findByName', () => store.lists.findByName(ws, 'x')],
      ['rules.upsertAccessRule', () => store.rules.upsertAccessRule(accessInput(ws))],
      ['rules.listAccessRules', () => store.rules.listAccessRules(ws, Date.now())],
      ['stream.append', () => store.stream.append([{ workspaceId: ws, payload: '{}', acceptedAt: 1 }])],
      ['stream.read', () => store.stream.read(1, 10)],
      ['feedVersions.observe', () => store.feedVersions.observe({ workspaceId: ws, listId: '*', family: 'v4', action: 'block' }, 'h', 1)],
      ['feedVersions.recordFetches', () => store.feedVersions.recordFetches([{ workspaceId: ws, listId: '*', at: 1 }])],
      ['feedVersions.fetchedSince', () => store.feedVersions.fetchedSince(0)],
      ['applyRuleBatch', () => store.applyRuleBatch({ ops: [] })],
    ]
    for (const [description, call] of calls) {
      await t.rejects(call(), { code: 'TF_ERR_STORE_UNAVAILABLE' }, description)
    }
    await t.resolves(store.close(), 'closing twice is harmless')
  })
}
