import t from 'tap'
import { computeNetworks, networksKey } from '../../src/feed/render/compute-networks.js'
import type { ComputeTask } from '../../src/pool/protocol.js'
import { allTargets, groupTargets, matchesSelector, selectRules, toRuleTable } from '../../src/feed/rule-table.js'
import type { AccessList, AccessRule } from '../../src/store/types.js'

let n = 0
function rule (value: string, over: Partial<AccessRule> = {}): AccessRule {
  n++
  const type = value.startsWith('AS') ? 'asn' : /^[A-Z]{2}$/.test(value) ? 'country' : 'ip'
  return { id: `r${n}`, workspaceId: 'w', kind: 'access_rule', ruleRef: null, labels: {}, reason: null, expiresAt: null, createdAt: 1, updatedAt: 1, seq: n, target: { type, value }, action: 'block', name: null, confidence: null, severity: null, ...over }
}
const list = (selector: Record<string, string>, defaults: AccessList['defaults'] = {}): AccessList =>
  ({ id: 'l', workspaceId: 'w', name: 'l', description: '', defaults, selector, createdAt: 0, updatedAt: 0 })

t.test('label selectors (DECISIONS §4)', async (t) => {
  const cases: Array<{ description: string, labels: Record<string, string | number | boolean>, selector: Record<string, string>, expected: boolean }> = [
    { description: 'empty selector matches anything', labels: { a: '1' }, selector: {}, expected: true },
    { description: 'no labels, empty selector', labels: {}, selector: {}, expected: true },
    { description: 'string equality', labels: { team: 'edge' }, selector: { team: 'edge' }, expected: true },
    { description: 'other value', labels: { team: 'core' }, selector: { team: 'edge' }, expected: false },
    { description: 'missing key', labels: {}, selector: { team: 'edge' }, expected: false },
    { description: 'a number matches its string form', labels: { tier: 2 }, selector: { tier: '2' }, expected: true },
    { description: 'a boolean matches its string form', labels: { prod: true }, selector: { prod: 'true' }, expected: true },
    { description: 'every pair must match', labels: { team: 'edge', tier: 3 }, selector: { team: 'edge', tier: '2' }, expected: false },
    { description: 'case matters', labels: { team: 'Edge' }, selector: { team: 'edge' }, expected: false },
    { description: 'inherited keys do not count', labels: {}, selector: { toString: 'x' }, expected: false },
  ]
  for (const c of cases) t.equal(matchesSelector(c.labels, c.selector), c.expected, c.description)
})

t.test('selection: lapsed rules out, the carve is every allow rule, expiresAt the earliest that matters', async (t) => {
  const table = toRuleTable([
    rule('192.0.2.1/32', { labels: { k: 'a' }, expiresAt: 5000 }),
    rule('192.0.2.2/32', { labels: { k: 'b' }, expiresAt: 3000 }),
    rule('192.0.2.3/32', { labels: { k: 'a' }, expiresAt: 1000 }),
    rule('192.0.2.4/32', { labels: { k: 'b' }, action: 'allow', expiresAt: 4000 }),
    rule('192.0.2.5/32', { labels: { k: 'a' }, action: 'allow' }),
  ])
  const s = selectRules(table, list({ k: 'a' }), 1000)
  t.same(Array.from(s.block), [0], 'the rule lapsed at 1000 is out')
  t.same(Array.from(s.allow), [4])
  t.same(Array.from(s.carve), [3, 4], 'every allow rule of the workspace')
  t.equal(s.expiresAt, 4000, "an unselected allow rule's expiry still changes the carve")
  const all = selectRules(table, null, 0)
  t.same(Array.from(all.block), [0, 1, 2])
  t.equal(all.expiresAt, 1000)
  t.equal(selectRules(toRuleTable([rule('192.0.2.9/32')]), null, 0).expiresAt, Infinity)
})

t.test('groups: own confidence and severity (field, then label), then list defaults, then high', async (t) => {
  const table = toRuleTable([
    rule('192.0.2.1/32'),
    rule('192.0.2.2/32', { confidence: 'low' }),
    rule('192.0.2.3/32', { labels: { severity: 'critical' } }),
    rule('192.0.2.4/32', { confidence: 'medium', labels: { confidence: 'low' } }),
    rule('192.0.2.5/32', { labels: { confidence: 'bogus' } }),
    rule('AS13335'),
    rule('SE', { confidence: 'low' }),
  ])
  const rows = selectRules(table, null, 0).block
  const g = groupTargets(table, rows, null)
  t.same(g.map((x) => [x.confidence, x.severity, text(x.ips), x.asns, x.countries]), [
    ['low', 'high', '192.0.2.2/32\n', [], ['SE']],
    ['medium', 'high', '192.0.2.4/32\n', [], []],
    ['high', 'high', '192.0.2.1/32\n192.0.2.5/32\n', [13335], []],
    ['high', 'critical', '192.0.2.3/32\n', [], []],
  ], 'a rule field beats its label; an invalid label is ignored; groups in a fixed order')
  const withDefaults = groupTargets(table, rows, { confidence: 'medium', severity: 'low' })
  t.same(withDefaults.map((x) => `${x.confidence}/${x.severity}`), ['low/low', 'medium/low', 'medium/critical'], 'each field falls back on its own')
  const all = allTargets(table, rows)
  t.same({ ...all, ips: text(all.ips) }, { confidence: 'high', severity: 'high', ips: '192.0.2.1/32\n192.0.2.2/32\n192.0.2.3/32\n192.0.2.4/32\n192.0.2.5/32\n', asns: [13335], countries: ['SE'] })
  t.ok(typeof all.ips !== 'string' && all.ips.buffer instanceof SharedArrayBuffer, 'the targets text is shared memory: a pool task shares it, no copy')
})

t.test('the targets text as bytes computes the same networks as the text as a string', async (t) => {
  const cases = [
    { description: 'IPv4 and IPv6 targets', values: ['192.0.2.1/32', '2001:db8::/32', '10.0.0.0/8', '2001:db8:1::1/128'] },
    { description: 'a non-ASCII target is unreadable, not misread', values: ['192.0.2.1/32', '19\u00b2.0.2.2/32'] },
    { description: 'none', values: [] },
  ]
  for (const c of cases) {
    const table = toRuleTable(c.values.map((v) => rule(v)))
    const bytes = allTargets(table, selectRules(table, null, 0).block)
    const asString = { ...bytes, ips: text(bytes.ips) }
    const task = (g: typeof bytes): ComputeTask => ({ geo: { version: 0 }, block: [g], allow: [], carve: { ...g, ips: '' }, meta: '' })
    t.same(computeNetworks(task(bytes), null), computeNetworks(task(asString), null), c.description)
    // The key hashes the text as given: for ASCII (every canonical target) both forms are one key.
    if (Buffer.byteLength(asString.ips) === asString.ips.length) t.equal(networksKey(task(bytes)), networksKey(task(asString)), `${c.description}: one content key`)
  }
})

t.test('compact: label sets are kept once; the fingerprint moves with every change', async (t) => {
  const rules = Array.from({ length: 1000 }, (_, i) => rule(`10.0.${i >> 8}.${i & 255}/32`, { labels: i % 2 === 0 ? { team: 'edge' } : {} }))
  const table = toRuleTable(rules)
  t.equal(table.labelSets.length, 2)
  t.equal(table.length, 1000)
  const fp = table.fingerprint
  t.equal(toRuleTable(rules).fingerprint, fp, 'same rules, same fingerprint')
  t.not(toRuleTable(rules.slice(1)).fingerprint, fp, 'a deletion')
  t.not(toRuleTable([...rules, rule('192.0.2.1/32')]).fingerprint, fp, 'an insertion')
  t.not(toRuleTable([{ ...rules[0]!, updatedAt: 2, seq: 5000 }, ...rules.slice(1)]).fingerprint, fp, 'an update')
  t.not(toRuleTable([{ ...rules[0]!, expiresAt: 99 }, ...rules.slice(1)]).fingerprint, fp, 'a new expiry')
})

/** A group's targets text as a string, whichever form it came in. */
function text (ips: string | Uint8Array): string {
  return typeof ips === 'string' ? ips : Buffer.from(ips).toString('latin1')
}
