/**
 * Issue 33, item 3: a workspace's rules revision that goes back. After a MongoDB failover with
 * rollback (or a restore), the revision a node last read may be higher than the store's, and the
 * rule seqs after the rollback point are reused by new rules: a node that kept the highest
 * revision it saw served the rolled-back rules while the workspace was quiet, and an incremental
 * read `seq > since` skipped the new ones. The node follows the revision back and reads whole.
 *
 * A store fake with what the cache reads (revisionOf, accessRulesChangedSince as MongoDB answers
 * it: changed after `since`, the live count, the highest seq).
 */
import t from 'tap'
import { WorkspaceState } from '../../src/feed/feed-state.js'
import type { AccessRule, RuleStore } from '../../src/store/types.js'

const WS = 'ws-1'
const rule = (value: string, seq: number): AccessRule => ({
  kind: 'access_rule', workspaceId: WS, ruleRef: null, target: { type: 'ip', value }, action: 'block', name: null, confidence: null, severity: null,
  labels: {}, reason: null, expiresAt: null, createdAt: 0, updatedAt: 0, seq,
} as unknown as AccessRule)

function fakeRules () {
  const state = { revision: 0, rules: [] as AccessRule[] }
  const store = {
    revisionOf: async () => state.revision,
    accessRulesChangedSince: async (_ws: string, since: number, _now: number, each: (r: AccessRule) => void) => {
      let changed = 0
      for (const r of state.rules) if (r.seq > since) { each(r); changed++ }
      return { changed, live: state.rules.length, seq: Math.max(since, ...state.rules.map((r) => r.seq)) }
    },
  } as unknown as RuleStore
  return { state, store }
}

/** The live targets of the workspace's table. */
function served (ws: WorkspaceState): string[] {
  const t = ws.rules.table!
  const out: string[] = []
  for (let i = 0; i < t.length; i++) if (t.expiresAt[i]! > Date.now()) out.push(t.value[i]!)
  return out.sort()
}

const log = { warn: () => {} }

t.test('a revision that goes back: the node follows it and reads the workspace whole', async (t) => {
  const { state, store } = fakeRules()
  const ws = new WorkspaceState(WS)
  state.rules = [rule('192.0.2.1/32', 5), rule('192.0.2.2/32', 6)]
  state.revision = 2
  await ws.catchUp(store, Date.now(), true, log)
  t.same(served(ws), ['192.0.2.1/32', '192.0.2.2/32'], 'the first read')
  // Rolled back: the rule of seq 6 is gone, and a new rule took seq 6; the revision is back at 1.
  state.rules = [rule('192.0.2.1/32', 5), rule('192.0.2.3/32', 6)]
  state.revision = 1
  await ws.catchUp(store, Date.now(), true, log)
  t.equal(ws.revision, 1, 'the revision followed back')
  t.equal(ws.rulesRevision, 1)
  t.same(served(ws), ['192.0.2.1/32', '192.0.2.3/32'], 'the rolled-back rule gone, the one with the reused seq read')
  // Forward again from there: incremental as before.
  state.rules.push(rule('192.0.2.4/32', 7))
  state.revision = 2
  await ws.catchUp(store, Date.now(), true, log)
  t.same(served(ws), ['192.0.2.1/32', '192.0.2.3/32', '192.0.2.4/32'])
})
