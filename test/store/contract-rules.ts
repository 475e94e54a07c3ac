/** Store contract, rules: identity, upsert, deletes, expiry, purge, batches, rules revision. */
import { deepStrictEqual } from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import fc from 'fast-check'
import type { RuleOp } from '../../src/store/batch-types.js'
import type { AccessRule, AccessRuleInput, ExpressionRuleInput, Rule, RuleKind, Target } from '../../src/store/types.js'
import type { StoreTest } from './contract.js'
import { UUID, accessInput, expressionInput, freshWorkspaceId, ip, sortById } from './contract-fixtures.js'

export function describeRuleContract (test: StoreTest): void {
  test('identity: an upsert of the same identity updates in place, never duplicates', async (t, store) => {
    type Inputs = (ws: string, otherWs: string) => Array<AccessRuleInput | ExpressionRuleInput>
    const only = (access: number, waf: number, smart: number): Record<RuleKind, number> => ({ access_rule: access, waf_rule: waf, smart_firewall_rule: smart })
    const cases: Array<{ description: string, inputs: Inputs, expected: Record<RuleKind, number> }> = [
      { description: 'same rule_ref twice', inputs: (ws) => [accessInput(ws, { ruleRef: 'r1' }), accessInput(ws, { ruleRef: 'r1', action: 'allow' })], expected: only(1, 0, 0) },
      { description: 'same target, no rule_ref, twice', inputs: (ws) => [accessInput(ws), accessInput(ws, { name: 'again' })], expected: only(1, 0, 0) },
      { description: 'keyed and unkeyed rules with one target are two rules', inputs: (ws) => [accessInput(ws, { ruleRef: 'r1' }), accessInput(ws)], expected: only(2, 0, 0) },
      { description: 'two rule_refs with one target are two rules', inputs: (ws) => [accessInput(ws, { ruleRef: 'r1' }), accessInput(ws, { ruleRef: 'r2' })], expected: only(2, 0, 0) },
      { description: 'a keyed rule keeps its identity when its target changes', inputs: (ws) => [accessInput(ws, { ruleRef: 'r1' }), accessInput(ws, { ruleRef: 'r1', target: ip('198.51.100.0/24') })], expected: only(1, 0, 0) },
      { description: 'unkeyed rules with two targets are two rules', inputs: (ws) => [accessInput(ws), accessInput(ws, { target: { type: 'country', value: 'FR' } })], expected: only(2, 0, 0) },
      { description: 'the same rule_ref in three kinds is three rules', inputs: (ws) => [expressionInput(ws, { ruleRef: 'x' }), expressionInput(ws, { ruleRef: 'x', kind: 'smart_firewall_rule' }), accessInput(ws, { ruleRef: 'x' })], expected: only(1, 1, 1) },
      { description: 'expression rule upserted twice', inputs: (ws) => [expressionInput(ws), expressionInput(ws, { expression: 'ip.src eq 1.2.3.4', action: 'challenge' })], expected: only(0, 1, 0) },
      { description: 'the same identity in another workspace is another rule', inputs: (ws, otherWs) => [accessInput(ws, { ruleRef: 'r1' }), accessInput(otherWs, { ruleRef: 'r1' }), accessInput(otherWs)], expected: only(1, 0, 0) },
    ]
    for (const c of cases) {
      const ws = freshWorkspaceId()
      for (const input of c.inputs(ws, freshWorkspaceId())) {
        if (input.kind === 'access_rule') await store.rules.upsertAccessRule(input)
        else await store.rules.upsertExpressionRule(input)
      }
      for (const kind of ['access_rule', 'waf_rule', 'smart_firewall_rule'] as const) {
        t.equal((await store.rules.list(ws, kind)).length, c.expected[kind], `${c.description}: ${kind}`)
      }
    }
  })

  test('upsert: the store assigns id and createdAt and keeps them; every other field is the latest', async (t, store) => {
    const ws = freshWorkspaceId()
    const first = await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'r1', expiresAt: 5000, labels: { team: 'red' }, seq: 1 }))
    t.match(first.id, UUID)
    t.equal(first.createdAt, first.updatedAt)
    const input = accessInput(ws, {
      ruleRef: 'r1',
      target: ip('2001:db8::/32'),
      action: 'allow',
      name: 'n',
      confidence: 'high',
      severity: 'critical',
      labels: { team: 'blue', score: 3, on: true },
      reason: 'why',
      expiresAt: 9000,
      seq: 2,
    })
    const second = await store.rules.upsertAccessRule(input)
    t.same(second, { ...input, id: first.id, createdAt: first.createdAt, updatedAt: second.updatedAt })
    t.ok(second.updatedAt >= first.updatedAt)
    t.same(await store.rules.list(ws, 'access_rule'), [second], 'what upsert returns is what is stored')

    const expr = expressionInput(ws, { kind: 'smart_firewall_rule', order: 3, shortDescription: 's', config: { sensitivity: 'high', nested: { a: [1, 'b', null] } }, expiresAt: 7000 })
    const e1 = await store.rules.upsertExpressionRule(expr)
    t.match(e1.id, UUID)
    t.same(e1, { ...expr, id: e1.id, createdAt: e1.createdAt, updatedAt: e1.updatedAt })
    const e2 = await store.rules.upsertExpressionRule({ ...expr, type: 'generated', expiresAt: null, config: {} })
    t.same(e2, { ...expr, type: 'generated', expiresAt: null, config: {}, id: e1.id, createdAt: e1.createdAt, updatedAt: e2.updatedAt })
    t.same(await store.rules.list(ws, 'smart_firewall_rule'), [e2])
  })

  test('concurrent upserts of one identity leave exactly one rule', async (t, store) => {
    const ws = freshWorkspaceId()
    const keyed = await Promise.all(Array.from({ length: 16 }, (_, i) => store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'r1', seq: i }))))
    const unkeyed = await Promise.all(Array.from({ length: 16 }, (_, i) => store.rules.upsertAccessRule(accessInput(ws, { seq: i }))))
    const expr = await Promise.all(Array.from({ length: 16 }, (_, i) => store.rules.upsertExpressionRule(expressionInput(ws, { seq: i }))))
    t.equal(new Set(keyed.map((r) => r.id)).size, 1, 'every keyed upsert answered the same rule')
    t.equal(new Set(unkeyed.map((r) => r.id)).size, 1, 'every unkeyed upsert answered the same rule')
    t.equal(new Set(expr.map((r) => r.id)).size, 1, 'every expression upsert answered the same rule')
    t.equal((await store.rules.list(ws, 'access_rule')).length, 2)
    t.equal((await store.rules.list(ws, 'waf_rule')).length, 1)
  })

  test('deleteByRef removes one rule of one kind, idempotently', async (t, store) => {
    const ws = freshWorkspaceId()
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'x' }))
    await store.rules.upsertAccessRule(accessInput(ws))
    await store.rules.upsertExpressionRule(expressionInput(ws, { ruleRef: 'x' }))
    await store.rules.upsertExpressionRule(expressionInput(ws, { ruleRef: 'x', kind: 'smart_firewall_rule' }))
    const cases: Array<{ description: string, kind: RuleKind, ruleRef: string, expected: boolean, left: Record<RuleKind, number> }> = [
      { description: 'waf rule', kind: 'waf_rule', ruleRef: 'x', expected: true, left: { access_rule: 2, waf_rule: 0, smart_firewall_rule: 1 } },
      { description: 'waf rule again', kind: 'waf_rule', ruleRef: 'x', expected: false, left: { access_rule: 2, waf_rule: 0, smart_firewall_rule: 1 } },
      { description: 'unknown ref', kind: 'smart_firewall_rule', ruleRef: 'nope', expected: false, left: { access_rule: 2, waf_rule: 0, smart_firewall_rule: 1 } },
      { description: 'keyed access rule (the unkeyed one stays)', kind: 'access_rule', ruleRef: 'x', expected: true, left: { access_rule: 1, waf_rule: 0, smart_firewall_rule: 1 } },
      { description: 'smart firewall rule', kind: 'smart_firewall_rule', ruleRef: 'x', expected: true, left: { access_rule: 1, waf_rule: 0, smart_firewall_rule: 0 } },
    ]
    for (const c of cases) {
      t.equal(await store.rules.deleteByRef(ws, c.kind, c.ruleRef), c.expected, c.description)
      for (const kind of ['access_rule', 'waf_rule', 'smart_firewall_rule'] as const) {
        t.equal((await store.rules.list(ws, kind)).length, c.left[kind], `${c.description}: ${kind} left`)
      }
    }
  })

  test('accessRulesOfTargets finds every access rule of those targets, keyed or not, lapsed too', async (t, store) => {
    const ws = freshWorkspaceId()
    const otherWs = freshWorkspaceId()
    const target = ip('203.0.113.0/24')
    await store.rules.upsertAccessRule(accessInput(ws, { target, seq: 1 }))
    await store.rules.upsertAccessRule(accessInput(ws, { target, ruleRef: 'a', action: 'allow', seq: 2 }))
    await store.rules.upsertAccessRule(accessInput(ws, { target, ruleRef: 'b', expiresAt: 1, seq: 3 }))
    await store.rules.upsertAccessRule(accessInput(ws, { target: ip('203.0.113.0/25'), ruleRef: 'c' }))
    await store.rules.upsertAccessRule(accessInput(ws, { target: { type: 'country', value: 'DE' }, ruleRef: 'de' }))
    await store.rules.upsertAccessRule(accessInput(otherWs, { target }))
    await store.rules.upsertAccessRule(accessInput(ws, { target, ruleRef: 'moved-away' }))
    await store.rules.upsertAccessRule(accessInput(ws, { target: ip('198.51.100.7/32'), ruleRef: 'moved-away' }))

    const found = await store.rules.accessRulesOfTargets(ws, [target, { type: 'country', value: 'DE' }, ip('192.0.2.99/32')])
    t.same(found.map((r) => `${r.ruleRef ?? '-'} ${r.target.value} ${r.action} ${r.seq}`).sort(), ['- 203.0.113.0/24 block 1', 'a 203.0.113.0/24 allow 2', 'b 203.0.113.0/24 block 3', 'de DE block 1'])
    t.ok(found.every((r) => r.workspaceId === ws && UUID.test(r.id)), 'whole rules of the workspace')
    t.same(await store.rules.accessRulesOfTargets(ws, []), [])
  })

  test('deleteAccessByTarget removes every access rule of that target, keyed or not', async (t, store) => {
    const ws = freshWorkspaceId()
    const otherWs = freshWorkspaceId()
    const target = ip('203.0.113.0/24')
    await store.rules.upsertAccessRule(accessInput(ws, { target }))
    await store.rules.upsertAccessRule(accessInput(ws, { target, ruleRef: 'a' }))
    await store.rules.upsertAccessRule(accessInput(ws, { target, ruleRef: 'b', expiresAt: 1 }))
    await store.rules.upsertAccessRule(accessInput(ws, { target: ip('203.0.113.0/25'), ruleRef: 'c' }))
    await store.rules.upsertAccessRule(accessInput(ws, { target: { type: 'country', value: 'DE' } }))
    await store.rules.upsertAccessRule(accessInput(otherWs, { target }))
    // A keyed rule moved away from the target is no longer found by it, and one moved onto it is.
    await store.rules.upsertAccessRule(accessInput(ws, { target, ruleRef: 'moved-away' }))
    await store.rules.upsertAccessRule(accessInput(ws, { target: ip('198.51.100.7/32'), ruleRef: 'moved-away' }))
    await store.rules.upsertAccessRule(accessInput(ws, { target: ip('198.51.100.8/32'), ruleRef: 'moved-onto' }))
    await store.rules.upsertAccessRule(accessInput(ws, { target, ruleRef: 'moved-onto' }))

    t.equal(await store.rules.deleteAccessByTarget(ws, target), 4, 'unkeyed, a, b (lapsed too) and moved-onto')
    t.equal(await store.rules.deleteAccessByTarget(ws, target), 0, 'idempotent')
    t.same((await store.rules.listAccessRules(ws, 0)).map((r) => r.ruleRef ?? r.target.value).sort(), ['DE', 'c', 'moved-away'])
    t.equal((await store.rules.list(otherWs, 'access_rule')).length, 1, 'other workspaces untouched')
    t.equal(await store.rules.deleteAccessByTarget(ws, { type: 'asn', value: 'AS64500' }), 0)
  })

  test('long identifiers behave like short ones (key encodings switch at 64 characters)', async (t, store) => {
    // A short workspace id keeps range bounds under 64 characters while the keys they must
    // match grow past it.
    const ws = freshWorkspaceId().slice(0, 8)
    const ref = 'R' + 'x'.repeat(127)
    const target = ip('2001:db8:1234:5678:9abc:def0:1234:5678/128')
    const cases = [
      { description: 'short ref', ref: 'a' },
      { description: '63-character ref', ref: 'b'.repeat(63) },
      { description: '64-character ref', ref: 'c'.repeat(64) },
      { description: '128-character ref', ref },
    ]
    for (const c of cases) {
      await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: c.ref, target }))
      await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: c.ref, target, seq: 2 }))
      await store.rules.upsertExpressionRule(expressionInput(ws, { ruleRef: c.ref }))
    }
    await store.rules.upsertAccessRule(accessInput(ws, { target }))
    t.equal((await store.rules.list(ws, 'access_rule')).length, cases.length + 1, 'one rule per identity')
    for (const c of cases) {
      t.equal(await store.rules.deleteByRef(ws, 'waf_rule', c.ref), true, c.description)
    }
    t.equal(await store.rules.deleteAccessByTarget(ws, target), cases.length + 1, 'the target finds every one')
    t.same(await store.rules.list(ws, 'access_rule'), [])

    const list = await (async () => {
      const w = await store.workspaces.create({ name: 'n'.repeat(200), subscription: 'active' })
      return store.lists.create({ workspaceId: w.id, name: 'L'.repeat(100) + ' é☃', description: 'd'.repeat(1000), defaults: {}, selector: {} })
    })()
    t.same((await store.lists.findByName(list.workspaceId, list.name)).map((l) => l.id), [list.id], 'a long list name')
    t.same(await store.lists.findByName(list.workspaceId, 'L'.repeat(100)), [], 'a prefix of it is another name')
  })

  test('expiry: lapsed rules (expiresAt <= now) are left out when `now` is given', async (t, store) => {
    const ws = freshWorkspaceId()
    const now = 1_000_000
    const rules = [
      accessInput(ws, { ruleRef: 'past', expiresAt: now - 1 }),
      accessInput(ws, { ruleRef: 'at-now', expiresAt: now }),
      accessInput(ws, { ruleRef: 'future', expiresAt: now + 1 }),
      accessInput(ws, { ruleRef: 'never', expiresAt: null, action: 'allow' }),
    ]
    for (const r of rules) await store.rules.upsertAccessRule(r)
    await store.rules.upsertExpressionRule(expressionInput(ws, { ruleRef: 'e-past', expiresAt: now - 1 }))
    await store.rules.upsertExpressionRule(expressionInput(ws, { ruleRef: 'e-future', expiresAt: now + 1 }))
    const refs = (rs: Rule[]) => rs.map((r) => r.ruleRef).sort()
    t.same(refs(await store.rules.list(ws, 'access_rule', now)), ['future', 'never'])
    t.same(refs(await store.rules.list(ws, 'access_rule')), ['at-now', 'future', 'never', 'past'], 'no filter without now')
    t.same(refs(await store.rules.listAccessRules(ws, now)), ['future', 'never'])
    t.same(refs(await store.rules.listAccessRules(ws, now - 1)), ['at-now', 'future', 'never'])
    t.same(refs(await store.rules.list(ws, 'waf_rule', now)), ['e-future'])
    t.same(refs(await store.rules.listAccessRules(freshWorkspaceId(), now)), [])
  })

  test('purgeLapsed deletes rules that lapsed before the instant, with their indexes', async (t, store) => {
    const ws = freshWorkspaceId()
    const target = ip('192.0.2.0/24')
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'old', target, expiresAt: 100 }))
    await store.rules.upsertAccessRule(accessInput(ws, { target, expiresAt: 150 }))
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'boundary', expiresAt: 200 }))
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'never' }))
    await store.rules.upsertExpressionRule(expressionInput(ws, { ruleRef: 'e-old', expiresAt: 50 }))
    // Re-upserted with a later expiry: its old expiry must not purge it.
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'renewed', expiresAt: 120 }))
    await store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'renewed', expiresAt: 10_000 }))
    const rev = (await store.revisions()).rules

    t.equal(await store.rules.purgeLapsed(200), 3, 'old, the unkeyed rule and e-old; not boundary (expiresAt = before)')
    t.same((await store.rules.list(ws, 'access_rule')).map((r) => r.ruleRef).sort(), ['boundary', 'never', 'renewed'])
    t.same(await store.rules.list(ws, 'waf_rule'), [])
    t.ok((await store.revisions()).rules > rev, 'a purge that removed rules raises the rules revision')
    t.equal(await store.rules.deleteAccessByTarget(ws, target), 0, 'the target index forgot the purged rules')
    t.equal(await store.rules.purgeLapsed(200), 0, 'nothing left to purge')
    t.equal(await store.rules.purgeLapsed(201), 1, 'boundary')
  })

  test('revisions: rules rises on every rule write, admin stays', async (t, store) => {
    const ws = freshWorkspaceId()
    const start = await store.revisions()
    let last = start.rules
    const steps: Array<[string, () => Promise<unknown>]> = [
      ['access upsert', () => store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'r' }))],
      ['access upsert again', () => store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'r' }))],
      ['expression upsert', () => store.rules.upsertExpressionRule(expressionInput(ws))],
      ['delete by ref', () => store.rules.deleteByRef(ws, 'waf_rule', 'rule-1')],
      ['delete by target', () => store.rules.deleteAccessByTarget(ws, accessInput(ws).target)],
      ['batch', () => store.applyRuleBatch({ ops: [{ op: 'upsertAccessRule', input: accessInput(ws) }] })],
    ]
    for (const [description, step] of steps) {
      await step()
      const now = (await store.revisions()).rules
      t.ok(now > last, description)
      last = now
    }
    t.equal((await store.revisions()).admin, start.admin)
  })

  test('revisionOf: a workspace\'s counter rises with its own rule changes only', async (t, store) => {
    const ws = freshWorkspaceId()
    const other = freshWorkspaceId()
    t.equal(await store.rules.revisionOf(ws), 0, 'no change yet')
    const target = ip('203.0.113.0/24')
    await store.rules.upsertAccessRule(accessInput(other))
    const otherRev = await store.rules.revisionOf(other)
    t.ok(otherRev > 0)
    let last = 0
    const steps: Array<[string, () => Promise<unknown>, boolean]> = [
      ['access upsert', () => store.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'r', target })), true],
      ['expression upsert', () => store.rules.upsertExpressionRule(expressionInput(ws, { ruleRef: 'e' })), true],
      ['delete by ref', () => store.rules.deleteByRef(ws, 'waf_rule', 'e'), true],
      ['delete by ref of nothing', () => store.rules.deleteByRef(ws, 'waf_rule', 'e'), false],
      ['delete by target', () => store.rules.deleteAccessByTarget(ws, target), true],
      ['delete by target of nothing', () => store.rules.deleteAccessByTarget(ws, target), false],
      ['batch', () => store.applyRuleBatch({ ops: [{ op: 'upsertAccessRule', input: accessInput(ws, { expiresAt: 100 }) }] }), true],
      ['purge of one of its rules', () => store.rules.purgeLapsed(101), true],
    ]
    for (const [description, step, moves] of steps) {
      await step()
      const now = await store.rules.revisionOf(ws)
      if (moves) t.ok(now > last, `${description}: rises`)
      else t.equal(now, last, `${description}: stays`)
      last = now
    }
    t.equal(await store.rules.revisionOf(other), otherRev, 'the other workspace\'s counter never moved')
  })

  test('accessRulesChangedSince: each call lists what changed since the last answer, and what went', async (t, store) => {
    const ws = freshWorkspaceId()
    const other = freshWorkspaceId()
    const refsOf = (rules: AccessRule[]): string[] => rules.map((r) => `${r.target.value}@${r.seq}`).sort()
    const now = 100
    const a = ip('198.51.100.1/32')
    const b = ip('198.51.100.2/32')
    const c = ip('198.51.100.3/32')
    await store.rules.upsertAccessRule(accessInput(ws, { target: a, seq: 1 }))
    await store.rules.upsertAccessRule(accessInput(ws, { target: b, seq: 2, expiresAt: 50 }))
    await store.rules.upsertAccessRule(accessInput(ws, { target: c, seq: 3, ruleRef: 'c' }))
    await store.rules.upsertAccessRule(accessInput(other, { target: a, seq: 4 }))
    await store.rules.upsertExpressionRule(expressionInput(ws, { seq: 9 }))
    // `gone`: what a store that lists removals hands over; `live`: what one that does not counts.
    const cases: Array<{ description: string, step: () => Promise<unknown>, changed: string[], gone: string[], live: number }> = [
      { description: 'from nothing: every access rule, lapsed too; a lapsed one is not live', step: async () => {}, changed: ['198.51.100.1/32@1', '198.51.100.2/32@2', '198.51.100.3/32@3'], gone: [], live: 2 },
      { description: 'nothing written since', step: async () => {}, changed: [], gone: [], live: 2 },
      { description: 'an update', step: () => store.rules.upsertAccessRule(accessInput(ws, { target: a, seq: 5, action: 'allow' })), changed: ['198.51.100.1/32@5'], gone: [], live: 2 },
      { description: 'a lapsed rule made live again', step: () => store.rules.upsertAccessRule(accessInput(ws, { target: b, seq: 6 })), changed: ['198.51.100.2/32@6'], gone: [], live: 3 },
      { description: 'a keyed rule deleted by its ref', step: () => store.rules.deleteByRef(ws, 'access_rule', 'c'), changed: [], gone: ['r c'], live: 2 },
      { description: 'a batch', step: () => store.applyRuleBatch({ ops: [{ op: 'upsertAccessRule', input: accessInput(ws, { target: c, seq: 7 }) }] }), changed: ['198.51.100.3/32@7'], gone: [], live: 3 },
      { description: 'an unkeyed rule deleted by its target', step: () => store.rules.deleteAccessByTarget(ws, a), changed: [], gone: ['t 198.51.100.1/32'], live: 2 },
      {
        description: 'deleted and stored again in one batch: both, in that order',
        step: () => store.applyRuleBatch({ ops: [{ op: 'deleteAccessByTarget', workspaceId: ws, target: b }, { op: 'upsertAccessRule', input: accessInput(ws, { target: b, seq: 8 }) }] }),
        changed: ['198.51.100.2/32@8'],
        gone: ['t 198.51.100.2/32'],
        live: 2,
      },
    ]
    let since = -1
    for (const k of cases) {
      await k.step()
      const seen: AccessRule[] = []
      const events: string[] = []
      const gone: string[] = []
      const r = await store.rules.accessRulesChangedSince(ws, since, now, (rule) => { seen.push(rule); events.push(`put ${rule.target.value}`) }, (ruleRef, target) => {
        const id = ruleRef !== null ? `r ${ruleRef}` : `t ${target!.value}`
        gone.push(id)
        events.push(`gone ${target?.value ?? ruleRef!}`)
      })
      t.equal(r.changed, seen.length, `${k.description}: counted`)
      t.same(refsOf(seen), k.changed, `${k.description}: changed`)
      if (r.live === null || since === -1) t.same(gone.sort(), since === -1 ? [] : k.gone, `${k.description}: gone`)
      if (r.live !== null) t.equal(r.live, k.live, `${k.description}: live`)
      if (r.live === null && k.gone.length > 0 && k.changed.length > 0) t.same(events, ['gone 198.51.100.2/32', 'put 198.51.100.2/32'], `${k.description}: in order`)
      since = r.seq
    }
    const changed: AccessRule[] = []
    await store.rules.accessRulesChangedSince(ws, -1, now, (rule) => { changed.push(rule) })
    const listed = await store.rules.list(ws, 'access_rule')
    t.same(changed.sort((x, y) => (x.id < y.id ? -1 : 1)), listed.sort((x, y) => (x.id < y.id ? -1 : 1)), 'a changed rule is the rule as listed')
    const none = await store.rules.accessRulesChangedSince(freshWorkspaceId(), -1, now, () => { t.fail('no rule') })
    t.same([none.changed, none.live], [0, 0], 'a workspace without rules')
  })

  test('accessRulesChangedSince: a large workspace is read whole; a write during the read is never lost', async (t, store) => {
    const ws = freshWorkspaceId()
    const n = 20_000
    const ops: RuleOp[] = []
    for (let i = 0; i < n; i++) ops.push({ op: 'upsertAccessRule', input: accessInput(ws, { target: ip(`10.${i >> 8 & 255}.${i & 255}.0/24`), seq: 10 + i }) })
    for (let i = 0; i < n; i += 5000) await store.applyRuleBatch({ ops: ops.slice(i, i + 5000) })
    // A write while the read runs is listed by this read, or the next, or both (the embedded
    // store reads each slice from the latest commit, so as not to pin freed pages), never by neither.
    const late = '11.0.0.0/24'
    const seen = new Set<string>()
    const reading = store.rules.accessRulesChangedSince(ws, -1, Date.now(), (rule) => { seen.add(rule.target.value) })
    await store.rules.upsertAccessRule(accessInput(ws, { target: ip(late), seq: 10 + n }))
    const r = await reading
    t.ok(r.changed === n || r.changed === n + 1, 'every rule, once')
    t.equal(seen.size, r.changed, 'no rule twice')
    t.equal(r.live, r.changed, 'counted as listed')
    const again: string[] = []
    await store.rules.accessRulesChangedSince(ws, r.seq, Date.now(), (rule) => { again.push(rule.target.value) }, () => { t.fail('nothing went') })
    t.ok(seen.has(late) || again.includes(late), 'the write during the read is listed by it or the next')
    t.ok(again.every((v) => v === late), 'the next call lists nothing else')
  })

  test('applyRuleBatch: ops in order, checkpoint in the same transaction', async (t, store) => {
    const ws = freshWorkspaceId()
    const target = ip('198.51.100.0/24')
    const ops: RuleOp[] = [
      { op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: 'a', target }) },
      { op: 'upsertAccessRule', input: accessInput(ws, { target }) },
      { op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: 'a', target, action: 'allow', seq: 2 }) },
      { op: 'upsertExpressionRule', input: expressionInput(ws, { ruleRef: 'w1' }) },
      { op: 'upsertExpressionRule', input: expressionInput(ws, { ruleRef: 'w2' }) },
      { op: 'deleteByRef', workspaceId: ws, kind: 'waf_rule', ruleRef: 'w2' },
      { op: 'deleteByRef', workspaceId: ws, kind: 'waf_rule', ruleRef: 'missing' },
      { op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: 'b', target: ip('192.0.2.9/32') }) },
      { op: 'deleteAccessByTarget', workspaceId: ws, target },
      { op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: 'c', target }) },
    ]
    t.same(await store.applyRuleBatch({ ops, checkpoint: { consumer: 'rules', seq: 42 } }), { applied: true, checkpoint: 42, upserted: 7, deleted: 3 })
    t.same((await store.rules.list(ws, 'access_rule')).map((r) => r.ruleRef).sort(), ['b', 'c'])
    t.same((await store.rules.list(ws, 'waf_rule')).map((r) => r.ruleRef), ['w1'])
    t.equal(await store.stream.getCheckpoint('rules'), 42)
    t.same(await store.applyRuleBatch({ ops: [], checkpoint: { consumer: 'rules', seq: 43 } }), { applied: true, checkpoint: 43, upserted: 0, deleted: 0 })
    t.equal(await store.stream.getCheckpoint('rules'), 43)
    t.same(await store.applyRuleBatch({ ops: [{ op: 'upsertAccessRule', input: accessInput(ws) }] }), { applied: true, checkpoint: null, upserted: 1, deleted: 0 }, 'no checkpoint')
  })

  test('applyRuleBatch: the checkpoint is a compare-and-set', async (t, store) => {
    const ws = freshWorkspaceId()
    const consumer = `cas-${randomUUID()}`
    const upsert = (ref: string): RuleOp => ({ op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: ref }) })
    const cases = [
      { description: 'none stored yet: expected 0 applies', expected: 0, seq: 10, want: { applied: true, checkpoint: 10, upserted: 1, deleted: 0 }, stored: 10 },
      { description: 'a stale expected applies nothing', expected: 0, seq: 20, want: { applied: false, checkpoint: 10, upserted: 0, deleted: 0 }, stored: 10 },
      { description: 'an expected ahead of the store applies nothing', expected: 15, seq: 20, want: { applied: false, checkpoint: 10, upserted: 0, deleted: 0 }, stored: 10 },
      { description: 'the stored position applies', expected: 10, seq: 20, want: { applied: true, checkpoint: 20, upserted: 1, deleted: 0 }, stored: 20 },
    ]
    for (const [i, c] of cases.entries()) {
      const rev = await store.revisions()
      t.same(await store.applyRuleBatch({ ops: [upsert(`r${i}`)], checkpoint: { consumer, seq: c.seq, expected: c.expected } }), c.want, c.description)
      t.equal(await store.stream.getCheckpoint(consumer), c.stored, `${c.description}: checkpoint`)
      const refs = (await store.rules.list(ws, 'access_rule')).map((r) => r.ruleRef)
      t.equal(refs.includes(`r${i}`), c.want.applied, `${c.description}: its op ${c.want.applied ? 'is' : 'is not'} there`)
      if (!c.want.applied) t.same(await store.revisions(), rev, `${c.description}: no revision moved`)
    }
  })

  test('applyRuleBatch: two consumers racing over one stream apply every record once, in order', async (t, store) => {
    // Each record upserts the rule of its target with its own seq; targets repeat, so a record
    // applied twice or out of order would leave a rule with the wrong seq, and a record applied
    // twice would show in the count of upserts.
    const ws = freshWorkspaceId()
    const consumer = `race-${randomUUID()}`
    const n = 300
    const targetOf = (seq: number): Target => ip(`198.51.100.${seq % 37}/32`)
    const records = await store.stream.append(Array.from({ length: n }, (_, i) => ({ workspaceId: ws, payload: String(i), acceptedAt: 1 })))
    const first = records[0]!
    await store.stream.setCheckpoint(consumer, first - 1)
    let upserts = 0
    let conflicts = 0
    const run = async (slice: number): Promise<void> => {
      let position = await store.stream.getCheckpoint(consumer)
      while (position < first + n - 1) {
        const batch = await store.stream.read(position + 1, slice)
        const ops: RuleOp[] = batch.map((r) => ({ op: 'upsertAccessRule', input: accessInput(ws, { target: targetOf(r.seq), seq: r.seq }) }))
        const last = batch.at(-1)?.seq ?? position
        const r = await store.applyRuleBatch({ ops, checkpoint: { consumer, seq: last, expected: position } })
        if (r.applied) upserts += r.upserted
        else conflicts++
        position = r.checkpoint!
      }
    }
    await Promise.all([run(7), run(11)])
    t.equal(upserts, n, 'every record applied exactly once')
    t.equal(await store.stream.getCheckpoint(consumer), first + n - 1, 'the checkpoint is at the head')
    const rules = await store.rules.list(ws, 'access_rule')
    const expected = new Map<string, number>()
    for (let seq = first; seq < first + n; seq++) expected.set(targetOf(seq).value, seq)
    t.same(Object.fromEntries(rules.map((r) => [(r as AccessRule).target.value, r.seq]).sort()), Object.fromEntries([...expected].sort()),
      'the rules of a single consumer: each target carries the seq of its last record')
    t.comment(`${conflicts} batches lost the race and re-read`)
  })

  test('applyRuleBatch is all or nothing', async (t, store) => {
    const ws = freshWorkspaceId()
    await store.stream.setCheckpoint('rules', 7)
    const cases = [
      { description: 'a malformed op after a good one', broken: { op: 'upsertAccessRule', input: { ...accessInput(ws, { ruleRef: 'bad' }), target: undefined } } },
      { description: 'an unknown op', broken: { op: 'dropEverything', workspaceId: ws } },
    ]
    for (const c of cases) {
      const rev = await store.revisions()
      await t.rejects(store.applyRuleBatch({
        ops: [{ op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: 'good' }) }, c.broken as unknown as RuleOp],
        checkpoint: { consumer: 'rules', seq: 8 },
      }), c.description)
      t.same(await store.rules.list(ws, 'access_rule'), [], `${c.description}: the op before it left no trace`)
      t.equal(await store.stream.getCheckpoint('rules'), 7, `${c.description}: the checkpoint did not move`)
      t.same(await store.revisions(), rev, `${c.description}: no revision moved`)
    }
  })

  test('model check: random op sequences match an in-memory oracle', async (t, store) => {
    const refs = ['a', 'b']
    const targets = [ip('192.0.2.1/32'), ip('192.0.2.2/32'), { type: 'asn' as const, value: 'AS64500' }]
    const kinds = ['access_rule', 'waf_rule'] as const
    const opArb = fc.oneof(
      fc.record({ t: fc.constant('access' as const), ref: fc.option(fc.constantFrom(...refs), { nil: null }), target: fc.constantFrom(...targets), seq: fc.nat(1000) }),
      fc.record({ t: fc.constant('expr' as const), ref: fc.constantFrom(...refs), seq: fc.nat(1000) }),
      fc.record({ t: fc.constant('delRef' as const), kind: fc.constantFrom(...kinds), ref: fc.constantFrom(...refs) }),
      fc.record({ t: fc.constant('delTarget' as const), target: fc.constantFrom(...targets) }),
    )
    await fc.assert(fc.asyncProperty(fc.array(opArb, { maxLength: 12 }), fc.boolean(), async (ops, batched) => {
      const ws = freshWorkspaceId()
      // The oracle: identity → [target or null, seq].
      const model = new Map<string, { target: string | null, seq: number }>()
      const batch: RuleOp[] = []
      for (const op of ops) {
        switch (op.t) {
          case 'access': {
            const id = op.ref === null ? `t:${op.target.value}` : `access_rule:${op.ref}`
            model.set(id, { target: op.target.value, seq: op.seq })
            batch.push({ op: 'upsertAccessRule', input: accessInput(ws, { ruleRef: op.ref, target: op.target, seq: op.seq }) })
            break
          }
          case 'expr':
            model.set(`waf_rule:${op.ref}`, { target: null, seq: op.seq })
            batch.push({ op: 'upsertExpressionRule', input: expressionInput(ws, { ruleRef: op.ref, seq: op.seq }) })
            break
          case 'delRef':
            model.delete(`${op.kind}:${op.ref}`)
            batch.push({ op: 'deleteByRef', workspaceId: ws, kind: op.kind, ruleRef: op.ref })
            break
          case 'delTarget':
            for (const [id, v] of model) if (v.target === op.target.value) model.delete(id)
            batch.push({ op: 'deleteAccessByTarget', workspaceId: ws, target: op.target })
            break
        }
      }
      if (batched) {
        await store.applyRuleBatch({ ops: batch })
      } else {
        for (const op of batch) {
          if (op.op === 'upsertAccessRule') await store.rules.upsertAccessRule(op.input)
          else if (op.op === 'upsertExpressionRule') await store.rules.upsertExpressionRule(op.input)
          else if (op.op === 'deleteByRef') await store.rules.deleteByRef(op.workspaceId, op.kind, op.ruleRef)
          else if (op.op === 'deleteAccessByTarget') await store.rules.deleteAccessByTarget(op.workspaceId, op.target)
          else throw new TypeError(`no RuleStore method for ${(op as { op: string }).op}`)
        }
      }
      const stored = [...await store.rules.list(ws, 'access_rule'), ...await store.rules.list(ws, 'waf_rule')]
      const actual = new Map(sortById(stored).map((r) => [
        r.kind === 'access_rule' && r.ruleRef === null ? `t:${r.target.value}` : `${r.kind}:${r.ruleRef}`,
        { target: r.kind === 'access_rule' ? r.target.value : null, seq: r.seq },
      ]))
      // Throws (rather than t.same) so that fast-check sees the failure and shrinks it.
      deepStrictEqual(Object.fromEntries([...actual].sort()), Object.fromEntries([...model].sort()))
    }), { numRuns: 25 })
    t.pass('25 random sequences agreed with the oracle')
  })
}
