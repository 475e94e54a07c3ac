/**
 * The lazy expiry log (expiry-log.ts): whatever happened to rules since they were logged — moved
 * to another bucket, deleted, re-created — a purge removes exactly the rules that lapsed, and
 * afterwards every rule with an expiry is still logged under its bucket. Checked against an
 * in-memory oracle on random histories, and on the cases that make references stale.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import t, { type Test } from 'tap'
import { EmbeddedStore } from '../../../src/store/embedded/embedded-store.js'
import { EXPIRY_TABLE, expiryBucket, listRefs } from '../../../src/store/embedded/expiry-log.js'
import { accessRuleKeyByRef, expressionRuleKey } from '../../../src/store/embedded/key-layout.js'
import { LmdbEnv } from '../../../src/store/embedded/lmdb-env.js'
import type { RuleOp } from '../../../src/store/batch-types.js'
import { accessInput, expressionInput, freshWorkspaceId } from '../contract-fixtures.js'

const HOUR = 3_600_000

async function open (t: Test): Promise<{ env: LmdbEnv, store: EmbeddedStore }> {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-expiry-'))
  const env = new LmdbEnv(dir)
  t.teardown(async () => {
    await env.close()
    await rm(dir, { recursive: true, force: true })
  })
  return { env, store: new EmbeddedStore(env, dir) }
}

/** Rules with an expiry that are not logged under their bucket. */
function unlogged (env: LmdbEnv, ws: string, rules: Array<{ kind: 'access_rule' | 'waf_rule', ruleRef: string | null, expiresAt: number | null }>): string[] {
  const logged = new Set(env.read((dbs) => listRefs(dbs)).map(({ bucket, ref }) => `${bucket}:${ref.table}:${ref.pk}`))
  return rules.filter((r) => r.expiresAt !== null).flatMap((r) => {
    const pk = r.kind === 'access_rule' ? accessRuleKeyByRef(ws, r.ruleRef!) : expressionRuleKey(ws, r.kind, r.ruleRef!)
    const table = r.kind === 'access_rule' ? EXPIRY_TABLE.access : EXPIRY_TABLE.expression
    return logged.has(`${expiryBucket(r.expiresAt!)}:${table}:${pk}`) ? [] : [`${r.kind}:${r.ruleRef}`]
  })
}

t.test('stale references: moved, deleted and re-created rules', async (t) => {
  const { env, store } = await open(t)
  const ws = freshWorkspaceId()
  const at = (hours: number, minutes = 0): number => hours * HOUR + minutes * 60_000
  await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'moved', expiresAt: at(1, 10) }))
  await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'moved', expiresAt: at(5, 10) })) // its 1 h reference is stale now
  await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'gone', expiresAt: at(1, 20) }))
  await store.rules.deleteByRef(ws, 'access_rule', 'gone')
  await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'again', expiresAt: at(1, 30) }))
  await store.rules.deleteByRef(ws, 'access_rule', 'again')
  await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'again', expiresAt: at(1, 40) })) // two references, one bucket
  await store.rules.upsertExpressionRule(expressionInput(ws, { ruleRef: 'waf', expiresAt: at(1, 50) }))
  await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'later-in-hour', expiresAt: at(1, 59) }))

  const cases = [
    { description: 'up to 1:45: only "again"', before: at(1, 45), removed: 1, left: ['later-in-hour', 'moved', 'waf'] },
    { description: 'up to 1:55: the expression rule', before: at(1, 55), removed: 1, left: ['later-in-hour', 'moved'] },
    { description: 'up to 2:00: the rest of the hour', before: at(2), removed: 1, left: ['moved'] },
    { description: 'up to 5:00: "moved" is not due by its stale reference', before: at(5), removed: 0, left: ['moved'] },
    { description: 'up to 6:00: "moved" by its new one', before: at(6), removed: 1, left: [] },
  ]
  for (const c of cases) {
    t.equal(await store.rules.purgeLapsed(c.before), c.removed, c.description)
    const left = [...await store.rules.list(ws, 'access_rule'), ...await store.rules.list(ws, 'waf_rule')].map((r) => r.ruleRef).sort()
    t.same(left, c.left, `${c.description}: what is left`)
  }
  t.same(env.read((dbs) => listRefs(dbs)), [], 'the log is empty once every bucket has lapsed')
})

t.test('random histories: a purge removes exactly what lapsed, and the log still covers every rule', async (t) => {
  const { env, store } = await open(t)
  const refs = ['a', 'b', 'c', 'd']
  const expiry = fc.option(fc.integer({ min: 0, max: 6 * HOUR }), { nil: null })
  const opArb = fc.oneof(
    fc.record({ t: fc.constant('access' as const), ref: fc.constantFrom(...refs), expiresAt: expiry }),
    fc.record({ t: fc.constant('waf' as const), ref: fc.constantFrom(...refs), expiresAt: expiry }),
    fc.record({ t: fc.constant('delete' as const), kind: fc.constantFrom('access_rule' as const, 'waf_rule' as const), ref: fc.constantFrom(...refs) }),
  )
  await fc.assert(fc.asyncProperty(fc.array(fc.array(opArb, { maxLength: 6 }), { maxLength: 5 }), fc.integer({ min: 0, max: 7 * HOUR }), async (batches, before) => {
    const ws = freshWorkspaceId()
    const model = new Map<string, { kind: 'access_rule' | 'waf_rule', ruleRef: string, expiresAt: number | null }>()
    for (const ops of batches) {
      const batch: RuleOp[] = []
      for (const op of ops) {
        if (op.t === 'delete') {
          model.delete(`${op.kind}:${op.ref}`)
          batch.push({ op: 'deleteByRef', workspaceId: ws, kind: op.kind, ruleRef: op.ref })
        } else if (op.t === 'access') {
          model.set(`access_rule:${op.ref}`, { kind: 'access_rule', ruleRef: op.ref, expiresAt: op.expiresAt })
          batch.push({ op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: op.ref, expiresAt: op.expiresAt }) })
        } else {
          model.set(`waf_rule:${op.ref}`, { kind: 'waf_rule', ruleRef: op.ref, expiresAt: op.expiresAt })
          batch.push({ op: 'upsertExpressionRule', input: expressionInput(ws, { ruleRef: op.ref, expiresAt: op.expiresAt }) })
        }
      }
      await store.applyRuleBatch({ ops: batch })
    }
    // Other workspaces' rules share the log: count only this one's removals through the rules.
    const removed = await store.rules.purgeLapsed(before)
    const due = [...model].filter(([, r]) => r.expiresAt !== null && r.expiresAt < before).map(([k]) => k)
    for (const k of due) model.delete(k)
    const left = [...await store.rules.list(ws, 'access_rule'), ...await store.rules.list(ws, 'waf_rule')]
      .map((r) => `${r.kind}:${r.ruleRef}`).sort()
    if (removed < due.length) throw new Error(`removed ${removed}, expected at least ${due.length}`)
    if (JSON.stringify(left) !== JSON.stringify([...model.keys()].sort())) throw new Error(`left ${left} != ${[...model.keys()].sort()}`)
    const missing = unlogged(env, ws, [...model.values()])
    if (missing.length > 0) throw new Error(`not logged: ${missing}`)
  }), { numRuns: 60 })
  t.pass('60 random histories agreed with the oracle')
})

t.test('the sweep: rules lapsed a minute ago go at once, whatever else shares their hour', async (t) => {
  const { env, store } = await open(t)
  const ws = freshWorkspaceId()
  const now = Date.UTC(2026, 5, 1, 12, 30)
  await store.applyRuleBatch({ ops: Array.from({ length: 500 }, (_, i): RuleOp => ({ op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: `lapsed-${i}`, expiresAt: now - 70_000 }) })) })
  await store.applyRuleBatch({ ops: Array.from({ length: 500 }, (_, i): RuleOp => ({ op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: `live-${i}`, expiresAt: now + 20 * 60_000 }) })) })
  const pass = await store.rules.sweepLapsed(now, 2000)
  t.equal(pass.removed, 500, 'every rule lapsed 70 s ago, in one pass')
  t.equal((await store.rules.list(ws, 'access_rule')).length, 500, 'the live rules of the same hour stay')
  t.same(unlogged(env, ws, (await store.rules.list(ws, 'access_rule')).map((r) => ({ kind: 'access_rule' as const, ruleRef: r.ruleRef, expiresAt: r.expiresAt }))), [], 'and stay logged')
})

t.test('the sweep: references of deleted and moved rules are cleaned long before their bucket ends', async (t) => {
  const { env, store } = await open(t)
  const ws = freshWorkspaceId()
  const now = Date.UTC(2026, 5, 1, 12, 30)
  const day = 24 * HOUR
  await store.applyRuleBatch({ ops: Array.from({ length: 500 }, (_, i): RuleOp => ({ op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: `r${i}`, expiresAt: now + day }) })) })
  await store.applyRuleBatch({ ops: Array.from({ length: 200 }, (_, i): RuleOp => ({ op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: `r${i}`, expiresAt: now + 2 * day }) })) })
  await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'keeper', expiresAt: now + day }))
  await store.applyRuleBatch({ ops: Array.from({ length: 500 }, (_, i): RuleOp => ({ op: 'deleteByRef', workspaceId: ws, kind: 'access_rule', ruleRef: `r${i}` })) })
  t.equal(env.read((dbs) => listRefs(dbs)).length, 701, 'before: 700 stale references and one live one')

  let stale = 0
  for (let more = true; more;) {
    const pass = await store.rules.sweepLapsed(now, 300)
    t.equal(pass.removed, 0, 'nothing lapsed')
    stale += pass.staleCleaned
    more = pass.more
  }
  t.equal(stale, 700, 'every stale reference cleaned')
  t.same(env.read((dbs) => listRefs(dbs)).map(({ ref }) => ref.pk), [accessRuleKeyByRef(ws, 'keeper')], 'only the live rule is logged')
  t.equal(store.housekeeping.staleCleaned, 700, 'and counted')
})
