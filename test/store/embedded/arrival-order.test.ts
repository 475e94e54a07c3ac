/**
 * Unkeyed access rules in arrival order (format 5, key-layout.ts arrivalKey): a new target is
 * appended, and its identity — one rule per (workspace, target), DECISIONS §3 — holds through the
 * in-memory index of each store that writes, whatever another store on the same directory did
 * meanwhile (inserted, deleted, swept), and for rules a format-4 directory stored under their
 * target.
 */
import { execFileSync } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import type { Test } from 'tap'
import { ByteWriter } from '../../../src/store/embedded/byte-writer.js'
import { openEmbeddedStore } from '../../../src/store/embedded/embedded-store.js'
import { accessRuleKey, targetIdentity, targetIdentityOfKey, writeAccessRuleKey } from '../../../src/store/embedded/key-layout.js'
import { LmdbEnv } from '../../../src/store/embedded/lmdb-env.js'
import { FORMAT } from '../../../src/store/embedded/migrate-format.js'
import { accessRuleTargetIdentity, encodeAccessRule } from '../../../src/store/embedded/rule-codec.js'
import type { RuleOp } from '../../../src/store/batch-types.js'
import { openStore } from '../../../src/store/open.js'
import type { Store, Target } from '../../../src/store/types.js'
import { fixturePath } from '../child-process.js'
import { accessInput, freshWorkspaceId, ip } from '../contract-fixtures.js'

async function tempDir (t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-arrival-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

function upsert (ws: string, target: string, over: Parameters<typeof accessInput>[1] = {}): RuleOp {
  return { op: 'upsertAccessRule', input: accessInput(ws, { target: ip(target), ...over }) }
}

/** The workspace's access rules as `target action`, sorted. */
async function rules (store: Store, ws: string): Promise<string[]> {
  return (await store.rules.listAccessRules(ws, 0)).map((r) => `${r.target.value} ${r.action}`).sort()
}

/** Keys of the access-rules table, as the store holds them. */
async function keys (dir: string): Promise<string[]> {
  const env = new LmdbEnv(dir)
  try {
    return env.read((dbs) => Array.from(dbs.accessRules.getKeys({}), String))
  } finally {
    await env.close()
  }
}

t.test('new targets are stored in arrival order; an upsert of a stored target updates it in place', async (t) => {
  const dir = await tempDir(t)
  const ws = freshWorkspaceId()
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  // Targets in descending order: keyed by target they would be stored the other way round.
  await store.applyRuleBatch({ ops: [upsert(ws, '198.51.100.9/32'), upsert(ws, '198.51.100.5/32'), upsert(ws, '198.51.100.1/32')] })
  await store.applyRuleBatch({ ops: [upsert(ws, '198.51.100.5/32', { action: 'allow' }), upsert(ws, '198.51.100.5/32', { action: 'allow', seq: 9 })] })
  t.same(await rules(store, ws), ['198.51.100.1/32 block', '198.51.100.5/32 allow', '198.51.100.9/32 block'], 'one rule per target')
  t.same((await store.rules.listAccessRules(ws, 0)).map((r) => r.target.value), ['198.51.100.9/32', '198.51.100.5/32', '198.51.100.1/32'], 'listed in the order they arrived')
  t.equal(await store.rules.deleteAccessByTarget(ws, ip('198.51.100.5/32')), 1)
  await store.applyRuleBatch({ ops: [upsert(ws, '198.51.100.5/32')] })
  t.same((await store.rules.listAccessRules(ws, 0)).map((r) => r.target.value), ['198.51.100.9/32', '198.51.100.1/32', '198.51.100.5/32'], 'stored again after its delete: at the end')
  await store.close()
  t.same((await keys(dir)).map((k) => k.split('\u001f')[1]), ['a', 'a', 'a'], 'every key an arrival key')
})

t.test('two stores on one directory (two processes\' consumers) never store a target twice', async (t) => {
  const dir = await tempDir(t)
  const ws = freshWorkspaceId()
  const a = await openStore({ kind: 'embedded', dataDir: dir })
  const b = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(async () => { await a.close(); await b.close() })
  const steps: Array<[string, () => Promise<unknown>, string[]]> = [
    ['a stores X', () => a.applyRuleBatch({ ops: [upsert(ws, '192.0.2.1/32')] }), ['192.0.2.1/32 block']],
    ['b upserts X: an update, though X came after b last looked', () => b.applyRuleBatch({ ops: [upsert(ws, '192.0.2.1/32', { action: 'allow' })] }), ['192.0.2.1/32 allow']],
    ['a upserts X: an update', () => a.applyRuleBatch({ ops: [upsert(ws, '192.0.2.1/32')] }), ['192.0.2.1/32 block']],
    ['b deletes X by target', () => b.applyRuleBatch({ ops: [{ op: 'deleteAccessByTarget', workspaceId: ws, target: ip('192.0.2.1/32') }] }), []],
    ['a stores X again: a new rule, not an update of the deleted one', () => a.applyRuleBatch({ ops: [upsert(ws, '192.0.2.1/32', { action: 'allow' })] }), ['192.0.2.1/32 allow']],
    ['b stores Y and X', () => b.applyRuleBatch({ ops: [upsert(ws, '192.0.2.2/32'), upsert(ws, '192.0.2.1/32')] }), ['192.0.2.1/32 block', '192.0.2.2/32 block']],
    ['a upserts Y and X', () => a.applyRuleBatch({ ops: [upsert(ws, '192.0.2.2/32', { action: 'allow' }), upsert(ws, '192.0.2.1/32', { action: 'allow' })] }), ['192.0.2.1/32 allow', '192.0.2.2/32 allow']],
    ['b deletes X one by one through its own method', () => b.rules.deleteAccessByTarget(ws, ip('192.0.2.1/32')), ['192.0.2.2/32 allow']],
    ['a deletes X (gone already) and stores Z', () => a.applyRuleBatch({ ops: [{ op: 'deleteAccessByTarget', workspaceId: ws, target: ip('192.0.2.1/32') }, upsert(ws, '192.0.2.3/32')] }), ['192.0.2.2/32 allow', '192.0.2.3/32 block']],
  ]
  // Each step is read back through a, right after b's commit resolved: a's reads must not lag
  // behind another store's commits (lmdb-env.ts readLatest).
  for (const [name, step, expected] of steps) {
    await step()
    t.same(await rules(a, ws), expected, name)
  }
})

/**
 * Every rule read of a store, as `[name, read]`: each answers a string that changes when
 * 192.0.2.1/32 is deleted from the workspace.
 */
const RULE_READS: Array<[string, (s: Store, ws: string) => Promise<string>]> = [
  ['listAccessRules', async (s, ws) => (await rules(s, ws)).join()],
  ['list', async (s, ws) => (await s.rules.list(ws, 'access_rule')).map((r) => r.kind === 'access_rule' ? r.target.value : '').sort().join()],
  ['accessRulesOfTargets', async (s, ws) => (await s.rules.accessRulesOfTargets(ws, [ip('192.0.2.1/32')])).length.toString()],
  ['revisionOf', async (s, ws) => (await s.rules.revisionOf(ws)).toString()],
  ['accessRulesChangedSince', async (s, ws) => String((await s.rules.accessRulesChangedSince(ws, 0, 0, () => {})).live)],
]

/**
 * The race the ninth session saw (2 runs in 5 of the test above): b's delete was applied, but a
 * read through a, started after that commit resolved, answered from the snapshot lmdb-js had
 * cached for a until its next timer tick. Here b commits synchronously (the consumer thread's
 * mode), inside the window, every time.
 */
t.test('a rule read sees every commit made before it began by another store on the directory', async (t) => {
  for (const [name, read] of RULE_READS) {
    const dir = await tempDir(t)
    const ws = freshWorkspaceId()
    const a = await openStore({ kind: 'embedded', dataDir: dir })
    const b = await openEmbeddedStore(dir, { syncWrites: true })
    await a.applyRuleBatch({ ops: [upsert(ws, '192.0.2.1/32'), upsert(ws, '192.0.2.2/32')] })
    const before = await read(a, ws)
    // Synchronous commit: no timer runs between it and the read below.
    const deleted = b.rules.deleteAccessByTarget(ws, ip('192.0.2.1/32'))
    const after = await read(a, ws)
    t.equal(await deleted, 1, `${name}: b deleted X`)
    t.not(after, before, `${name}: a's read sees it at once`)
    t.equal(after, await read(b, ws), `${name}: as b reads it`)
    await a.close()
    await b.close()
  }
})

t.test('a rule read sees every commit another process made before it began', async (t) => {
  for (const [name, read] of RULE_READS) {
    const dir = await tempDir(t)
    const ws = freshWorkspaceId()
    const a = await openStore({ kind: 'embedded', dataDir: dir })
    await a.applyRuleBatch({ ops: [upsert(ws, '192.0.2.1/32'), upsert(ws, '192.0.2.2/32')] })
    const before = await read(a, ws)
    // The other process runs and exits while this thread waits: no timer of this process runs
    // between its commit and the read below.
    const out = execFileSync(process.execPath, ['--import=tsx', fixturePath('delete-target.ts'), dir, ws, '192.0.2.1/32'], { encoding: 'utf8' })
    const after = await read(a, ws)
    t.equal(out, '1\n', `${name}: the other process deleted X`)
    t.not(after, before, `${name}: this process's read sees it at once`)
    await a.close()
    const fresh = await openStore({ kind: 'embedded', dataDir: dir })
    t.equal(after, await read(fresh, ws), `${name}: as a store opened afterwards reads it`)
    await fresh.close()
  }
})

t.test('a warm-up of the identity, between writes of its own store and of another, never stores a target twice', async (t) => {
  const dir = await tempDir(t)
  const a = await openStore({ kind: 'embedded', dataDir: dir })
  const b = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(async () => { await a.close(); await b.close() })
  // The warm-up goes through the workspaces the admin table lists.
  const other = (await a.workspaces.create({ name: 'first', subscription: 'active' })).id
  const ws = (await a.workspaces.create({ name: 'warm', subscription: 'active' })).id
  const target = (i: number): string => `10.7.${i >> 8}.${i & 255}/32`
  const n = 12_000
  for (const w of [ws, other]) {
    for (let i = 0; i < n; i += 4000) await b.applyRuleBatch({ ops: Array.from({ length: 4000 }, (_, k) => upsert(w, target(i + k))) })
  }
  const c = await openStore({ kind: 'embedded', dataDir: dir })
  const embedded = c.rules as unknown as { warmArrivals: () => Promise<void> }
  const warming = embedded.warmArrivals()
  // While it warms (slices of 5,000 keys, the event loop free between): b deletes and stores, c writes.
  await b.rules.deleteAccessByTarget(ws, ip(target(11_999)))
  await c.applyRuleBatch({ ops: [upsert(ws, target(0), { action: 'allow' }), upsert(ws, target(11_999), { action: 'allow' }), upsert(ws, '10.8.0.1/32')] })
  await b.applyRuleBatch({ ops: [upsert(ws, '10.8.0.2/32')] })
  await warming
  await c.applyRuleBatch({ ops: [upsert(ws, target(5000), { action: 'allow' }), upsert(ws, '10.8.0.2/32', { action: 'allow' }), upsert(ws, '10.8.0.1/32', { action: 'allow' })] })
  const stored = await rules(a, ws)
  t.equal(stored.length, n + 2, 'one rule per target')
  t.equal(new Set(stored.map((r) => r.split(' ')[0])).size, stored.length, 'no target twice')
  t.same(stored.filter((r) => r.endsWith('allow')).sort(), [`${target(0)} allow`, `${target(11_999)} allow`, `${target(5000)} allow`, '10.8.0.1/32 allow', '10.8.0.2/32 allow'].sort())
  await c.close()
})

t.test('a rule swept by another store is stored again by the first, once', async (t) => {
  const dir = await tempDir(t)
  const ws = freshWorkspaceId()
  const a = await openStore({ kind: 'embedded', dataDir: dir })
  const b = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(async () => { await a.close(); await b.close() })
  const lapsing = Array.from({ length: 300 }, (_, i) => upsert(ws, `10.9.${i >> 8}.${i & 255}/32`, { expiresAt: 1000 }))
  await a.applyRuleBatch({ ops: lapsing })
  t.equal((await b.rules.sweepLapsed(100_000, 10_000)).removed, 300, 'b sweeps them all')
  // a's index still names them: each is found gone and stored anew, once.
  const again = (n: number): RuleOp[] => Array.from({ length: n }, (_, i) => upsert(ws, `10.9.${i >> 8}.${i & 255}/32`))
  await a.applyRuleBatch({ ops: again(200) })
  await a.applyRuleBatch({ ops: again(250) })
  t.equal((await a.rules.list(ws, 'access_rule')).length, 250, 'one rule per target')
})

t.test('a batch that fails stores nothing, and its targets are stored once afterwards', async (t) => {
  const dir = await tempDir(t)
  const ws = freshWorkspaceId()
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  await t.rejects(store.applyRuleBatch({ ops: [upsert(ws, '203.0.113.1/32'), { op: 'bogus' } as unknown as RuleOp] }))
  t.same(await rules(store, ws), [], 'nothing of the failed batch')
  await store.applyRuleBatch({ ops: [upsert(ws, '203.0.113.1/32'), upsert(ws, '203.0.113.1/32', { action: 'allow' })] })
  t.same(await rules(store, ws), ['203.0.113.1/32 allow'])
})

t.test('a format-4 directory opens in the current format and its rules stored by target keep their identity', async (t) => {
  const dir = await tempDir(t)
  const ws = freshWorkspaceId()
  // Written as format 4 wrote unkeyed rules: under their target key.
  const env = new LmdbEnv(dir)
  await env.write((dbs) => {
    const w = new ByteWriter()
    for (const value of ['192.0.2.10/32', '192.0.2.11/32']) {
      w.reset()
      encodeAccessRule(w, accessInput(ws, { target: ip(value) }), null, 1, 1)
      dbs.accessRules.put(accessRuleKey(ws, null, ip(value)), Buffer.from(w.view()))
    }
    dbs.meta.put('format', 4)
  })
  await env.close()
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  await store.applyRuleBatch({ ops: [upsert(ws, '192.0.2.10/32', { action: 'allow' }), upsert(ws, '192.0.2.12/32')] })
  t.same(await rules(store, ws), ['192.0.2.10/32 allow', '192.0.2.11/32 block', '192.0.2.12/32 block'], 'the old rule updated, not stored twice')
  t.equal(await store.rules.deleteAccessByTarget(ws, ip('192.0.2.11/32')), 1, 'an old rule deleted by its target')
  t.same(await rules(store, ws), ['192.0.2.10/32 allow', '192.0.2.12/32 block'])
  await store.close()
  const layout = await keys(dir)
  t.same(layout.map((k) => k.split('\u001f')[1]).sort(), ['a', 't'], 'the new target in arrival order, the old one where it was')
  const check = new LmdbEnv(dir)
  t.equal(check.read((dbs) => dbs.meta.get('format')), FORMAT, `format ${FORMAT}, which a format-4 or -5 version refuses`)
  await check.close()
})

t.test('a target has one identity whether read from a packed batch\'s key or from a stored rule', (t) => {
  const ws = freshWorkspaceId()
  const w = new ByteWriter()
  const cases: Array<[string, Target, Parameters<typeof accessInput>[1]]> = [
    ['IPv4', ip('192.0.2.1/32'), {}],
    ['IPv6', { type: 'ip', value: '2001:db8::/48' }, { expiresAt: null }],
    ['ASN', { type: 'asn', value: 'AS13335' }, { name: 'n', reason: 'r', labels: { a: 1 } }],
    ['country', { type: 'country', value: 'NL' }, { expiresAt: 5 }],
    ['an id that is not a UUID', ip('10.0.0.0/8'), {}],
  ]
  for (const [name, target, over] of cases) {
    w.reset()
    writeAccessRuleKey(w, ws, null, target)
    const fromKey = targetIdentityOfKey(Buffer.from(w.view()), ws)
    w.reset()
    encodeAccessRule(w, accessInput(ws, { ...over, target }), name.startsWith('an id') ? 'not-a-uuid' : null, 1, 2)
    t.equal(fromKey, targetIdentity(target), `${name}: from the key`)
    t.equal(accessRuleTargetIdentity(Buffer.from(w.view())), targetIdentity(target), `${name}: from the stored rule`)
  }
  t.end()
})

t.test('a failed transaction\'s changes to the identity are undone: each target stays stored once', async (t) => {
  const bogus = { op: 'bogus' } as unknown as RuleOp
  const del = (ws: string, target: string): RuleOp => ({ op: 'deleteAccessByTarget', workspaceId: ws, target: ip(target) })
  // [name, the failing batch, what the same store writes next]: X and Y stored before, Z not.
  const cases: Array<[string, (ws: string) => RuleOp[], (ws: string) => RuleOp[]]> = [
    ['a new target, then a throw', (ws) => [upsert(ws, '198.51.100.3/32'), bogus], (ws) => [upsert(ws, '198.51.100.3/32', { action: 'allow' })]],
    ['a delete, then a throw', (ws) => [del(ws, '198.51.100.1/32'), bogus], (ws) => [upsert(ws, '198.51.100.1/32', { action: 'allow' })]],
    ['a delete and a store again, then a throw', (ws) => [del(ws, '198.51.100.1/32'), upsert(ws, '198.51.100.1/32'), bogus], (ws) => [upsert(ws, '198.51.100.1/32', { action: 'allow' })]],
    ['an update, then a throw', (ws) => [upsert(ws, '198.51.100.2/32', { action: 'allow' }), bogus], (ws) => [upsert(ws, '198.51.100.2/32', { action: 'allow' })]],
  ]
  for (const sync of [false, true]) {
    for (const [name, failing, next] of cases) {
      const dir = await tempDir(t)
      const ws = freshWorkspaceId()
      const store = sync ? await openEmbeddedStore(dir, { syncWrites: true }) : await openStore({ kind: 'embedded', dataDir: dir })
      const label = `${sync ? 'synchronous commits' : 'lmdb-js batches'}: ${name}`
      await store.applyRuleBatch({ ops: [upsert(ws, '198.51.100.1/32'), upsert(ws, '198.51.100.2/32')] })
      const before = await rules(store, ws)
      // In one event turn: lmdb-js runs both in one batch, the second right after the first failed.
      const [failed, after] = await Promise.allSettled([store.applyRuleBatch({ ops: failing(ws) }), store.applyRuleBatch({ ops: next(ws) })])
      t.equal(failed.status, 'rejected', `${label}: the batch failed`)
      t.equal(after.status, 'fulfilled', `${label}: the next one committed`)
      // Then each target once more, through the same store's identity.
      await store.applyRuleBatch({ ops: ['198.51.100.1/32', '198.51.100.2/32', '198.51.100.3/32'].map((x) => upsert(ws, x, { action: 'allow' })) })
      const stored = await rules(store, ws)
      t.same(stored, ['198.51.100.1/32 allow', '198.51.100.2/32 allow', '198.51.100.3/32 allow'], `${label}: one rule per target (before: ${before.join(', ')})`)
      await store.close()
    }
  }
})
