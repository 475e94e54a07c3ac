/**
 * explainAddress where the store and the snapshot disagree (rules changed after the build), and
 * the publish-guard field (`held`; through HTTP in test/http/explain-held.test.ts).
 */
import t from 'tap'
import { buildSnapshot } from '../../src/feed/build-snapshot.js'
import { explainAddress, type ExplainSources } from '../../src/feed/explain.js'
import { parseExplainAddress } from '../../src/feed/explain-lookup.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { LastModifiedKeeper } from '../../src/feed/last-modified.js'
import { toRuleTable } from '../../src/feed/rule-table.js'
import { GeoIndex } from '../../src/geo/geo-index.js'
import type { AccessRule } from '../../src/store/types.js'
import { tempStore } from './fixtures.js'

const temp = await tempStore()
t.teardown(() => temp.cleanup())
const WS = 'aaaaaaaa-0000-4000-8000-000000000002'
const BUILT = Date.parse('2026-01-01T00:00:00Z')

function rule (ref: string, value: string, updatedAt: number): AccessRule {
  return { id: `00000000-0000-4000-8000-0000000000${ref.length}${ref.charCodeAt(0) % 10}`, kind: 'access_rule', workspaceId: WS, ruleRef: ref, target: { type: 'ip', value }, action: 'block', name: null, confidence: null, severity: null, labels: {}, reason: null, expiresAt: null, createdAt: updatedAt, updatedAt, seq: 1 }
}

const old = rule('old', '192.0.2.1/32', BUILT - 1000)
const { snapshot } = await buildSnapshot({ workspaceId: WS, workspaceName: 'w', list: null }, toRuleTable([old]), {
  tasks: inProcessTasks(GeoIndex.empty()), lastModified: new LastModifiedKeeper(temp.store.feedVersions, { timeoutMs: 2000 }), now: BUILT,
})

function sources (rules: AccessRule[], heldBy?: ExplainSources['heldBy']): ExplainSources {
  return {
    rules: { accessRulesOfTargets: async (_ws, targets) => rules.filter((r) => targets.some((x) => x.value === r.target.value)), lapsedTombstones: async () => [] },
    geo: { index: GeoIndex.empty(), lookup: null },
    snapshotOf: async () => snapshot,
    ...(heldBy !== undefined ? { heldBy } : {}),
  }
}

t.test('a rule written after the build: not published yet, and said so', async (t) => {
  const fresh = rule('new', '192.0.2.2/32', BUILT + 5000)
  const e = await explainAddress(sources([old, fresh]), { id: WS, name: 'w' }, [null], parseExplainAddress('192.0.2.2'), BUILT + 6000)
  const block = e.feeds[0]!.actions.block
  t.equal(block.published, false)
  t.same(block.reasons, [{ code: 'changed_since_build', message: 'the rules covering it changed at 2026-01-01T00:00:05.000Z, after this snapshot was built at 2026-01-01T00:00:00.000Z; the next build publishes it', built_at: '2026-01-01T00:00:00.000Z' }])
})

t.test('a rule deleted after the build: still published, with no rule, and said so', async (t) => {
  const e = await explainAddress(sources([]), { id: WS, name: 'w' }, [null], parseExplainAddress('192.0.2.1'), BUILT + 6000)
  const block = e.feeds[0]!.actions.block
  t.equal(block.published, true)
  t.same(block.rules, [])
  t.same(block.reasons.map((r) => r.code), ['changed_since_build'])
})

t.test('held: absent without guards, carried when a guard reports a hold', async (t) => {
  const plain = await explainAddress(sources([old]), { id: WS, name: 'w' }, [null], parseExplainAddress('192.0.2.1'), BUILT)
  t.notOk('held' in plain.feeds[0]!)
  const hold = { reason: 'the new content drops 40 % of the networks', since: '2026-01-01T00:00:00.000Z', guards: { block: 'max_shrink_pct' }, digest: 'd1' }
  const held = await explainAddress(sources([old], (ws, feed) => ws === WS && feed === '*' ? hold : undefined), { id: WS, name: 'w' }, [null], parseExplainAddress('192.0.2.1'), BUILT)
  t.same(held.feeds[0]!.held, hold)
})

t.test('a rule deleted after the build of a held feed: the next build stays held, and explain says so (issue 36)', async (t) => {
  const hold = { reason: 'held', since: '2026-01-01T00:00:00.000Z', guards: { block: 'max_shrink_pct' }, digest: 'd1' }
  const e = await explainAddress(sources([], () => hold), { id: WS, name: 'w' }, [null], parseExplainAddress('192.0.2.1'), BUILT + 6000)
  const block = e.feeds[0]!.actions.block
  t.equal(block.published, true)
  t.same(block.reasons.map((r) => r.code), ['held'], 'not changed_since_build: the next build does not drop it')
  t.equal(block.reasons[0]!.message, "no current block rule selected here covers 192.0.2.1, but a publish guard (max_shrink_pct) holds this feed's new block builds since 2026-01-01T00:00:00.000Z, so it keeps serving the last published build until build d1 is accepted (threatfeed list accept, or POST …/accept); accepting it drops 192.0.2.1")
  // A rule written after the build of a held feed: published only once the held build is accepted.
  const fresh = rule('new', '192.0.2.2/32', BUILT + 5000)
  const added = await explainAddress(sources([old, fresh], () => hold), { id: WS, name: 'w' }, [null], parseExplainAddress('192.0.2.2'), BUILT + 6000)
  t.same(added.feeds[0]!.actions.block.reasons.map((r) => r.code), ['held'])
  t.match(added.feeds[0]!.actions.block.reasons[0]!.message, /accepting it publishes 192\.0\.2\.2$/)
})
