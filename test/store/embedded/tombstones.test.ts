/**
 * Format 8 keeps tombstones in lapse order and by target in partitions (tombstones.ts); those of
 * format 7 (and the format-6 values still among them) move over when the directory is opened.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { open } from 'lmdb'
import t, { type Test } from 'tap'
import { tombstoneKey } from '../../../src/store/embedded/key-layout.js'
import { TOMBSTONE_PARTITION } from '../../../src/store/embedded/tombstones.js'
import { openStore } from '../../../src/store/open.js'
import { TOMBSTONE_MS, type LapsedTombstone } from '../../../src/store/types.js'
import { accessInput, expressionInput, ip } from '../contract-fixtures.js'

const raw = (dir: string): ReturnType<typeof open> => open({ path: dir, noSubdir: false, maxDbs: 24 })

const tempDir = async (t: Test): Promise<string> => {
  const dir = await mkdtemp(join(tmpdir(), 'tf-tomb-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

t.test('a sweep appends tombstones to the log and to the newest partition; explain reads them back', async (t) => {
  const dir = await tempDir(t)
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = (await store.workspaces.create({ name: 'w', subscription: 'active' })).id
  const lapsed = Date.now() - 3_600_000
  await store.rules.upsertAccessRule({ ...accessInput(ws), ruleRef: 'allowed', action: 'allow', target: ip('192.0.2.1/32'), expiresAt: lapsed })
  await store.rules.upsertAccessRule({ ...accessInput(ws), ruleRef: null, action: 'block', target: ip('192.0.2.2/32'), expiresAt: lapsed + 1 })
  await store.rules.upsertExpressionRule({ ...expressionInput(ws), ruleRef: 'expr', expiresAt: lapsed + 2 })
  t.equal((await store.rules.sweepLapsed(Date.now(), 100)).removed, 3)
  await store.close()

  const env = raw(dir)
  const keys = [tombstoneKey(ws, 'access_rule', ip('192.0.2.1/32'), 'allowed'), tombstoneKey(ws, 'access_rule', ip('192.0.2.2/32'), null), tombstoneKey(ws, 'waf_rule', null, 'expr')]
  const log = Array.from(env.openDB<Buffer, [number, number]>('tombstone-log', { encoding: 'binary' }).getRange({}), ({ key, value }) => [key, value.readUInt32LE(0), value.toString('utf8', 4)])
  t.same(log.map(([key, p, k]) => [(key as number[])[0], p, k]), [[lapsed, 0, keys[0]], [lapsed + 1, 0, keys[1]], [lapsed + 2, 0, keys[2]]], 'the log: in lapse order, each naming its partition and rule')
  const byTarget = env.openDB<Buffer, [number, string, number]>('tombstones-by-target', { encoding: 'binary' })
  t.same(Array.from(byTarget.getRange({}), ({ key, value }) => [key, value.readDoubleLE(0), value[8]]), [
    [[0, keys[0], 0], lapsed, 2], [[0, keys[1], 1], lapsed + 1, 1], [[0, keys[2], 2], lapsed + 2, undefined],
  ].sort((a, b) => ((a[0] as [number, string])[1] < (b[0] as [number, string])[1] ? -1 : 1)), 'by target in partition 0, numbered as in the log: the lapse time and the action (2 allow, 1 block, none for an expression rule)')
  t.equal(env.openDB('meta', { encoding: 'json' }).get('tombstones:count'), 3)
  await env.close()

  const again = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => again.close())
  t.same(await again.rules.lapsedTombstones(ws, ip('192.0.2.1/32')), [{ workspaceId: ws, kind: 'access_rule', target: ip('192.0.2.1/32'), ruleRef: 'allowed', lapsedAt: lapsed, action: 'allow' }], 'read back whole from the key')
  t.same(await again.rules.lapsedTombstones(ws, ip('192.0.2.2/32')), [{ workspaceId: ws, kind: 'access_rule', target: ip('192.0.2.2/32'), ruleRef: null, lapsedAt: lapsed + 1, action: 'block' }], 'an unkeyed rule: ruleRef null')
  t.same(await again.rules.lapsedTombstones(ws, { kind: 'waf_rule', ruleRef: 'expr' }), [{ workspaceId: ws, kind: 'waf_rule', target: null, ruleRef: 'expr', lapsedAt: lapsed + 2 }])
  t.same(await again.rules.lapsedTombstones(ws, ip('192.0.2.0/24')), [], 'not a prefix match: 192.0.2.0/24 is not 192.0.2.1/32')
  t.same(await again.rules.lapsedTombstones(ws, { kind: 'waf_rule', ruleRef: 'exp' }), [], 'nor is expression rule exp expr')
})

t.test('format-7 tombstones (and format-6 values among them) move over at the open, then go like the others', async (t) => {
  const dir = await tempDir(t)
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = (await store.workspaces.create({ name: 'w', subscription: 'active' })).id
  await store.close()
  const lapsed = Date.now() - 3_600_000
  const old: LapsedTombstone[] = [
    { workspaceId: ws, kind: 'access_rule', target: ip('192.0.2.1/32'), ruleRef: 'allowed', lapsedAt: lapsed, action: 'allow' },
    { workspaceId: ws, kind: 'access_rule', target: ip('192.0.2.2/32'), ruleRef: null, lapsedAt: lapsed + 1, action: 'block' },
    { workspaceId: ws, kind: 'waf_rule', target: null, ruleRef: 'expr', lapsedAt: lapsed + 2 },
    { workspaceId: ws, kind: 'access_rule', target: ip('192.0.2.3/32'), ruleRef: 'six', lapsedAt: lapsed - 5, action: 'block' },
  ]
  // Written back as format 7 stored them: [lapsedAt, action] by key, a format-6 record as it was,
  // the time index, the count; and the time index's entry of a lapse since replaced.
  const env = raw(dir)
  await env.transaction(() => {
    const byKey = env.openDB('tombstones', { encoding: 'json' })
    const byTime = env.openDB('tombstones-by-time', { encoding: 'binary' })
    for (const x of old) {
      const key = tombstoneKey(x.workspaceId, x.kind, x.target, x.ruleRef)
      byKey.put(key, x.ruleRef === 'six' ? x : x.action === undefined ? [x.lapsedAt] : [x.lapsedAt, x.action === 'allow' ? 2 : 1])
      byTime.put([x.lapsedAt, key], Buffer.alloc(0))
    }
    byTime.put([lapsed - 60_000, tombstoneKey(ws, 'access_rule', ip('192.0.2.1/32'), 'allowed')], Buffer.alloc(0))
    const meta = env.openDB('meta', { encoding: 'json' })
    meta.put('tombstones:count', old.length + 1)
    meta.put('format', 7)
  })
  await env.close()

  const again = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => again.close())
  for (const x of old) t.same(await again.rules.lapsedTombstones(ws, x.target ?? { kind: 'waf_rule', ruleRef: x.ruleRef! }), [x], `${x.ruleRef ?? 'unkeyed'}: read back as it was`)
  const after = raw(dir)
  t.same(Array.from(after.getKeys({})).filter((name) => String(name).startsWith('tombstone')).sort(), ['tombstone-log', 'tombstones-by-target'], 'the format-7 tables are gone')
  t.equal(after.openDB('meta', { encoding: 'json' }).get('format'), 8)
  t.equal(after.openDB('meta', { encoding: 'json' }).get('tombstones:count'), old.length, 'counted again: the replaced lapse was not moved')
  await after.close()
  const gone = await again.rules.sweepLapsed(lapsed + 1 + TOMBSTONE_MS + 1, 100)
  t.equal(gone.tombstonesDropped, 3, 'a day on, the three that lapsed first go')
  t.same(await again.rules.lapsedTombstones(ws, ip('192.0.2.3/32')), [])
  t.equal((await again.rules.lapsedTombstones(ws, { kind: 'waf_rule', ruleRef: 'expr' })).length, 1, 'the latest lapse stays')
})

t.test('look-ups span partitions; eviction follows the log, oldest lapse first', async (t) => {
  const dir = await tempDir(t)
  const n = TOMBSTONE_PARTITION + 100
  const store = await openStore({ kind: 'embedded', dataDir: dir, tombstoneMax: n })
  t.teardown(() => store.close())
  const ws = (await store.workspaces.create({ name: 'w', subscription: 'active' })).id
  const now = Date.now()
  const target = (i: number): ReturnType<typeof ip> => ip(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}/32`)
  // Rule i lapses at base + i: the first partition fills, the next one takes the rest.
  const base = now - 3_600_000
  for (let from = 0; from < n; from += 2000) {
    await store.applyRuleBatch({ ops: Array.from({ length: Math.min(2000, n - from) }, (_, k) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws, { target: target(from + k), expiresAt: base + from + k }) })) })
  }
  let removed = 0
  for (let pass = await store.rules.sweepLapsed(now, 5000); ; pass = await store.rules.sweepLapsed(now, 5000)) {
    removed += pass.removed
    if (!pass.more) break
  }
  t.equal(removed, n)
  const lapseOf = async (i: number): Promise<number[]> => (await store.rules.lapsedTombstones(ws, target(i))).map((x) => x.lapsedAt)
  t.same([await lapseOf(0), await lapseOf(TOMBSTONE_PARTITION - 1), await lapseOf(TOMBSTONE_PARTITION), await lapseOf(n - 1)], [[base], [base + TOMBSTONE_PARTITION - 1], [base + TOMBSTONE_PARTITION], [base + n - 1]], 'found in either partition')

  // Rule 0 again, lapsing later: its new tombstone is in the second partition, the old one in the first.
  await store.rules.upsertAccessRule(accessInput(ws, { target: target(0), expiresAt: base + n }))
  const relapse = await store.rules.sweepLapsed(now, 5000)
  t.same({ removed: relapse.removed, dropped: relapse.tombstonesDropped }, { removed: 1, dropped: 1 }, 'past the cap by one: the oldest, rule 0\'s earlier lapse, goes')
  t.same(await lapseOf(0), [base + n], 'rule 0: its latest lapse')
  await store.rules.upsertAccessRule(accessInput(ws, { target: ip('192.0.2.9/32'), expiresAt: base + n + 1 }))
  t.equal((await store.rules.sweepLapsed(now, 5000)).tombstonesDropped, 1)
  t.same(await lapseOf(1), [], 'then rule 1, the oldest left')
  t.same(await lapseOf(2), [base + 2])
  t.equal((await store.rules.sweepLapsed(base + TOMBSTONE_MS + TOMBSTONE_PARTITION, 100_000)).tombstonesDropped, TOMBSTONE_PARTITION - 2, 'a day on, the rest of the first partition\'s lapses go')
  t.same([await lapseOf(TOMBSTONE_PARTITION - 1), await lapseOf(TOMBSTONE_PARTITION)], [[], [base + TOMBSTONE_PARTITION]])
})
