/**
 * The access-rule change log (format 6, change-log.ts): a catch-up reads what changed — not the
 * workspace — under updates, deletes, sweeps, a trim of old entries and a format-5 directory.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { open } from 'lmdb'
import t from 'tap'
import type { Test } from 'tap'
import { CHANGES_KEPT_MS } from '../../../src/store/embedded/change-log.js'
import { LmdbEnv } from '../../../src/store/embedded/lmdb-env.js'
import { FORMAT } from '../../../src/store/embedded/migrate-format.js'
import type { RuleOp } from '../../../src/store/batch-types.js'
import { openStore } from '../../../src/store/open.js'
import type { AccessRuleChanges, Store } from '../../../src/store/types.js'
import { accessInput, freshWorkspaceId, ip } from '../contract-fixtures.js'

async function tempDir (t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-changes-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

function upsert (ws: string, n: number, over: Parameters<typeof accessInput>[1] = {}): RuleOp {
  return { op: 'upsertAccessRule', input: accessInput(ws, { target: ip(`10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}/32`), ...over }) }
}

interface CatchUp { answer: AccessRuleChanges, put: string[], gone: string[] }

async function catchUp (store: Store, ws: string, since: number, now = 0): Promise<CatchUp> {
  const put: string[] = []
  const gone: string[] = []
  const answer = await store.rules.accessRulesChangedSince(ws, since, now, (r) => { put.push(`${r.target.value} ${r.action}`) }, (ruleRef, target) => {
    gone.push(ruleRef ?? target!.value)
  })
  return { answer, put, gone }
}

const N = 20_000

t.test('a catch-up hands over what changed since, not the workspace', async (t) => {
  const dir = await tempDir(t)
  const ws = freshWorkspaceId()
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  for (let i = 0; i < N; i += 5000) await store.applyRuleBatch({ ops: Array.from({ length: 5000 }, (_, k) => upsert(ws, i + k)) })
  await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'k1', target: ip('192.0.2.1/32') }))
  const first = await catchUp(store, ws, -1)
  t.equal(first.answer.changed, N + 1, 'the first read: every rule')
  t.equal(first.answer.live, N + 1, 'and the live count')
  const steps: Array<[string, () => Promise<unknown>, Omit<CatchUp, 'answer'>]> = [
    ['nothing', async () => {}, { put: [], gone: [] }],
    ['three updated in place', () => store.applyRuleBatch({ ops: [upsert(ws, 5, { action: 'allow' }), upsert(ws, 7, { action: 'allow' }), upsert(ws, 19_999, { action: 'allow' })] }),
      { put: ['10.0.0.5/32 allow', '10.0.0.7/32 allow', '10.0.78.31/32 allow'], gone: [] }],
    ['two new', () => store.applyRuleBatch({ ops: [upsert(ws, N), upsert(ws, N + 1)] }), { put: ['10.0.78.32/32 block', '10.0.78.33/32 block'], gone: [] }],
    ['an unkeyed one deleted by target, a keyed one by ref', async () => {
      await store.rules.deleteAccessByTarget(ws, ip('10.0.0.9/32'))
      await store.rules.deleteByRef(ws, 'access_rule', 'k1')
    }, { put: [], gone: ['10.0.0.9/32', 'k1'] }],
    ['one deleted and stored again, one updated twice', () => store.applyRuleBatch({
      ops: [{ op: 'deleteAccessByTarget', workspaceId: ws, target: ip('10.0.0.11/32') }, upsert(ws, 11, { action: 'allow' }), upsert(ws, 12, { action: 'allow' }), upsert(ws, 12)],
    }), { put: ['10.0.0.11/32 allow', '10.0.0.12/32 block', '10.0.0.12/32 block'], gone: ['10.0.0.11/32'] }],
  ]
  let since = first.answer.seq
  for (const [name, step, expected] of steps) {
    await step()
    const got = await catchUp(store, ws, since)
    t.same({ put: got.put, gone: got.gone }, expected, `${name}: in the order written`)
    t.equal(got.answer.changed, expected.put.length, `${name}: only those read`)
    t.equal(got.answer.live, null, `${name}: no count (removals were listed)`)
    since = got.answer.seq
  }
})

t.test('rules the sweep removes are listed as gone', async (t) => {
  const dir = await tempDir(t)
  const ws = freshWorkspaceId()
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  await store.applyRuleBatch({ ops: [upsert(ws, 1, { expiresAt: 1000 }), upsert(ws, 2), upsert(ws, 3, { ruleRef: 'lapsing', expiresAt: 2000 })] })
  const { answer } = await catchUp(store, ws, -1)
  t.equal((await store.rules.sweepLapsed(100_000, 100)).removed, 2)
  const got = await catchUp(store, ws, answer.seq)
  t.same(got.gone.sort(), ['10.0.0.1/32', 'lapsing'])
  t.same(got.put, [])
  t.equal(got.answer.seq, answer.seq + 1, 'one change entry for the pass, not one a rule')

  // Sent again after the sweep: the later put wins over the pass's removal.
  await store.applyRuleBatch({ ops: [upsert(ws, 1, { expiresAt: 200_000 })] })
  const back = await catchUp(store, ws, answer.seq)
  t.same(back.gone.sort(), ['10.0.0.1/32', 'lapsing'])
  t.same(back.put, ['10.0.0.1/32 block'], 'then listed again, after the removal')
})

t.test('entries older than the log keeps are trimmed; a catch-up from before the trim reads the workspace whole', async (t) => {
  const dir = await tempDir(t)
  const ws = freshWorkspaceId()
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  await store.applyRuleBatch({ ops: Array.from({ length: 10 }, (_, k) => upsert(ws, k)) })
  const { answer: start } = await catchUp(store, ws, -1)
  await store.applyRuleBatch({ ops: [upsert(ws, 1, { action: 'allow' }), upsert(ws, 2, { action: 'allow' })] })
  const { answer: middle } = await catchUp(store, ws, start.seq)
  await store.close()
  // Those two entries written longer ago than the log keeps them (their time is their first 8 bytes).
  const env = new LmdbEnv(dir)
  const logged = env.read((dbs) => Array.from(dbs.accessChanges.getKeys({})))
  t.equal(logged.length, 2, 'two updates logged; the inserts log themselves (arrival keys)')
  await env.write((dbs) => {
    for (const key of logged) {
      const value = Buffer.from(dbs.accessChanges.get(key)!)
      value.writeDoubleLE(Date.now() - CHANGES_KEPT_MS - 1000, 0)
      dbs.accessChanges.put(key, value)
    }
  })
  await env.close()
  const again = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => again.close())
  await again.applyRuleBatch({ ops: [upsert(ws, 3, { action: 'allow' })] })
  const left = new LmdbEnv(dir)
  t.equal(left.read((dbs) => dbs.accessChanges.getKeysCount()), 1, 'the old two trimmed by the next write, the new one kept')
  await left.close()
  const fromBefore = await catchUp(again, ws, start.seq)
  t.equal(fromBefore.answer.changed, 10, 'from before the trim: every rule')
  t.equal(fromBefore.answer.live, 10, 'counted, so a cache can tell what went')
  const fromAfter = await catchUp(again, ws, middle.seq)
  t.same([fromAfter.put, fromAfter.answer.live], [['10.0.0.3/32 allow'], null], 'from after it: the log')
})

t.test('a format-5 directory opens in the current format: its rules kept, caught up through the log from then on', async (t) => {
  const dir = await tempDir(t)
  const ws = freshWorkspaceId()
  const made = await openStore({ kind: 'embedded', dataDir: dir })
  await made.applyRuleBatch({ ops: [upsert(ws, 1), upsert(ws, 2), upsert(ws, 3, { ruleRef: 'k' })] })
  await made.close()
  // Back to what format 5 wrote: no change log, format 5.
  const raw = open({ path: dir, noSubdir: false, maxDbs: 24, overlappingSync: false })
  await raw.openDB('access-changes', { encoding: 'binary' }).drop()
  await raw.openDB('meta', { encoding: 'json' }).put('format', 5)
  t.notOk(Array.from(raw.getKeys({}), String).includes('access-changes'), 'no change log, as format 5')
  await raw.close()

  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  const check = new LmdbEnv(dir)
  t.equal(check.read((dbs) => dbs.meta.get('format')), FORMAT, `format ${FORMAT}, which a format-5 version refuses ("newer than this version reads")`)
  await check.close()
  const first = await catchUp(store, ws, -1)
  t.same(first.put.sort(), ['10.0.0.1/32 block', '10.0.0.2/32 block', '10.0.0.3/32 block'], 'every rule kept')
  await store.applyRuleBatch({ ops: [upsert(ws, 1, { action: 'allow' }), upsert(ws, 4), { op: 'deleteByRef', workspaceId: ws, kind: 'access_rule', ruleRef: 'k' }] })
  const got = await catchUp(store, ws, first.answer.seq)
  t.same({ put: got.put, gone: got.gone, live: got.answer.live }, { put: ['10.0.0.1/32 allow', '10.0.0.4/32 block'], gone: ['k'], live: null })
})
