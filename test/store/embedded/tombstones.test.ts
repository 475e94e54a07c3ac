/**
 * Format 7 stores a tombstone's lapse time and action only, its key naming the rule
 * (layout.ts StoredTombstone); a tombstone written by format 6 (the whole record as JSON) is read
 * as it is after the upgrade, and goes like the others.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { open } from 'lmdb'
import t from 'tap'
import { tombstoneKey } from '../../../src/store/embedded/key-layout.js'
import { openStore } from '../../../src/store/open.js'
import { TOMBSTONE_MS, type LapsedTombstone } from '../../../src/store/types.js'
import { accessInput, expressionInput } from '../contract-fixtures.js'

const raw = (dir: string): ReturnType<typeof open> => open({ path: dir, noSubdir: false, maxDbs: 24 })

t.test('new tombstones store only what the key does not say; format-6 ones still read, then go', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tf-tomb-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = (await store.workspaces.create({ name: 'w', subscription: 'active' })).id
  const lapsed = Date.now() - 3_600_000
  await store.rules.upsertAccessRule({ ...accessInput(ws), ruleRef: 'allowed', action: 'allow', target: { type: 'ip', value: '192.0.2.1/32' }, expiresAt: lapsed })
  await store.rules.upsertAccessRule({ ...accessInput(ws), ruleRef: null, action: 'block', target: { type: 'ip', value: '192.0.2.2/32' }, expiresAt: lapsed + 1 })
  await store.rules.upsertExpressionRule({ ...expressionInput(ws), ruleRef: 'expr', expiresAt: lapsed + 2 })
  t.equal((await store.rules.sweepLapsed(Date.now(), 100)).removed, 3)
  await store.close()

  // What is stored: [lapsedAt, action] under the rule's key; and a format-6 tombstone put beside.
  const env = raw(dir)
  const tombs = env.openDB('tombstones', { encoding: 'json' })
  t.same(tombs.get(tombstoneKey(ws, 'access_rule', { type: 'ip', value: '192.0.2.1/32' }, 'allowed')), [lapsed, 2], 'an allow: its lapse time and 2')
  t.same(tombs.get(tombstoneKey(ws, 'access_rule', { type: 'ip', value: '192.0.2.2/32' }, null)), [lapsed + 1, 1], 'a block: 1')
  t.same(tombs.get(tombstoneKey(ws, 'waf_rule', null, 'expr')), [lapsed + 2], 'an expression rule: no action')
  const old: LapsedTombstone = { workspaceId: ws, kind: 'access_rule', target: { type: 'ip', value: '192.0.2.3/32' }, ruleRef: 'old', lapsedAt: lapsed - 5, action: 'block' }
  const oldKey = tombstoneKey(ws, 'access_rule', old.target, old.ruleRef)
  const meta = env.openDB('meta', { encoding: 'json' })
  await env.transaction(() => {
    tombs.put(oldKey, old)
    env.openDB('tombstones-by-time', { encoding: 'binary' }).put([old.lapsedAt, oldKey], Buffer.alloc(0))
    meta.put('tombstones:count', (meta.get('tombstones:count') as number) + 1)
    meta.put('format', 6)
  })
  await env.close()

  const again = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => again.close())
  t.same(await again.rules.lapsedTombstones(ws, { type: 'ip', value: '192.0.2.1/32' }), [{ workspaceId: ws, kind: 'access_rule', target: { type: 'ip', value: '192.0.2.1/32' }, ruleRef: 'allowed', lapsedAt: lapsed, action: 'allow' }], 'read back whole from the key')
  t.same(await again.rules.lapsedTombstones(ws, { type: 'ip', value: '192.0.2.2/32' }), [{ workspaceId: ws, kind: 'access_rule', target: { type: 'ip', value: '192.0.2.2/32' }, ruleRef: null, lapsedAt: lapsed + 1, action: 'block' }], 'an unkeyed rule: ruleRef null')
  t.same(await again.rules.lapsedTombstones(ws, { kind: 'waf_rule', ruleRef: 'expr' }), [{ workspaceId: ws, kind: 'waf_rule', target: null, ruleRef: 'expr', lapsedAt: lapsed + 2 }])
  t.same(await again.rules.lapsedTombstones(ws, old.target!), [old], 'a format-6 tombstone reads as it was written')
  const gone = await again.rules.sweepLapsed(lapsed + TOMBSTONE_MS + 2, 100)
  t.equal(gone.tombstonesDropped, 3, 'a day on, the old one and the access rules\' go (oldest lapse first)')
  t.same(await again.rules.lapsedTombstones(ws, old.target!), [])
  t.equal((await again.rules.lapsedTombstones(ws, { kind: 'waf_rule', ruleRef: 'expr' })).length, 1, 'the latest lapse stays')
})
