/**
 * The feed side's rule cache on the embedded store: a delete is caught up as a change (its row
 * lapses at once), and a table that is mostly holes is read whole again.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { WorkspaceRuleCache } from '../../src/feed/rule-cache.js'
import { selectRules } from '../../src/feed/rule-table.js'
import type { RuleOp } from '../../src/store/batch-types.js'
import { openStore } from '../../src/store/open.js'
import type { RuleStore } from '../../src/store/types.js'
import { accessInput, freshWorkspaceId, ip } from '../store/contract-fixtures.js'

const target = (i: number): string => `10.5.${i >> 8}.${i & 255}/32`

t.test('deletes are caught up as changes until holes are most of the table, then it is read whole', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-rule-cache-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  const ws = freshWorkspaceId()
  const n = 10_000
  const ops: RuleOp[] = Array.from({ length: n }, (_, i) => ({ op: 'upsertAccessRule', input: accessInput(ws, { target: ip(target(i)) }) }))
  await store.applyRuleBatch({ ops })
  // Counts what each read hands over, as the cache asks for it.
  const handed: number[] = []
  const rules = new Proxy(store.rules, {
    get: (r, p) => p === 'accessRulesChangedSince'
      ? async (...a: Parameters<RuleStore['accessRulesChangedSince']>) => {
        const answer = await r.accessRulesChangedSince(...a)
        handed.push(answer.changed)
        return answer
      }
      : Reflect.get(r, p),
  }) as RuleStore
  const cache = new WorkspaceRuleCache(ws)
  const deleteRange = (from: number, to: number): Promise<unknown> => store.applyRuleBatch({
    ops: Array.from({ length: to - from }, (_, k) => ({ op: 'deleteAccessByTarget' as const, workspaceId: ws, target: ip(target(from + k)) })),
  })
  const steps: Array<[string, () => Promise<unknown>, { handed: number[], rows: number, live: number }]> = [
    ['the first read', async () => {}, { handed: [n], rows: n, live: n }],
    ['100 deleted: caught up, their rows lapse', () => deleteRange(0, 100), { handed: [0], rows: n, live: n - 100 }],
    ['one stored again: a row of its own', () => store.applyRuleBatch({ ops: [{ op: 'upsertAccessRule', input: accessInput(ws, { target: ip(target(5)) }) }] }), { handed: [1], rows: n + 1, live: n - 99 }],
    ['8,000 more deleted: mostly holes, read whole', () => deleteRange(100, 8100), { handed: [0, n - 8100 + 1], rows: n - 8100 + 1, live: n - 8100 + 1 }],
  ]
  for (const [name, step, expected] of steps) {
    await step()
    handed.length = 0
    const table = await cache.refresh(rules, Date.now())
    const selected = selectRules(table, null, Date.now())
    t.same({ handed: [...handed], rows: table.length, live: selected.block.length }, expected, name)
  }
})
