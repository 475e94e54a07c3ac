/**
 * `threatfeed explain` from the store (test/helpers/explain-fixture.ts: every reason) with the
 * test MMDBs: each reason with exact fields in --json, the text form, and usage errors as a table.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { explainCommand } from '../../src/cli/explain.js'
import { feedCommand } from '../../src/cli/feed.js'
import { keyCommand } from '../../src/cli/key.js'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import type { AccessRule } from '../../src/store/types.js'
import type { ExplainedAction, Explanation } from '../../src/feed/explain.js'
import { runCommand } from '../helpers/cli.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'
import { expectedRule, seedExplainFixture } from '../helpers/explain-fixture.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-cli-explain-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const env = { THREATFEED_DATA_DIR: dir, THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB, THREATFEED_GEO_ASN_DB: ASN_TEST_DB }
const store = await openEmbeddedStore(dir)
const fx = await seedExplainFixture(store)
const stored = new Map<string, AccessRule>()
for (const r of await store.rules.list(fx.workspaceId, 'access_rule')) stored.set(r.ruleRef!, r as AccessRule)
await store.close()
const rule = (ref: string, expansion?: Record<string, string | null>): ReturnType<typeof expectedRule> => expectedRule(stored.get(ref)!, expansion)

async function explain (ip: string, ...more: string[]): Promise<Explanation> {
  const r = await runCommand(explainCommand, [ip, '--workspace', fx.workspaceId, '--json', ...more], { env })
  if (r.code !== 0) throw new Error(`explain ${ip}: ${r.code} ${r.stderr}`)
  return JSON.parse(r.stdout) as Explanation
}
const action = (e: Explanation, list: string | null, a: 'block' | 'allow'): ExplainedAction => e.feeds.find((f) => (f.list?.name ?? null) === list)!.actions[a]

t.test('each reason, exact fields, as the server words them', async (t) => {
  const direct = await explain('203.0.113.7')
  t.same(direct.feeds.map((f) => f.list?.name ?? '*'), ['*', 'edge', 'tiny', 'v6only'])
  t.same(action(direct, null, 'block').rules, [rule('r-ip'), rule('r-net')], 'direct IP and the CIDR around it')
  t.same(action(direct, null, 'block').formats.find((f) => f.format === 'dialect_b' && f.family === 'both')!.rows!.map((r) => r.row), ['203.0.113.7,IP,medium,high', '203.0.113.0-203.0.113.255,IP Range,high,critical'])
  t.same(action(direct, 'tiny', 'block').reasons.map((r) => r.code), ['over_cap'])
  t.same(action(direct, 'v6only', 'block').reasons, [{ code: 'family_not_published', message: 'this feed publishes v6 only by default; 203.0.113.7 is v4 (ask with family=v4 or family=both)', family: 'v6' }])

  const carved = action(await explain('198.51.100.200'), null, 'block')
  t.same(carved.reasons, [{ code: 'carved', message: 'carved out by allow rule a-carve (ip 198.51.100.128/25): an allow rule of the workspace always wins', by: [rule('a-carve')] }])

  const country = { country: 'SE', network: '89.160.20.112/28', database: COUNTRY_TEST_DB, database_type: 'GeoLite2-Country' }
  const se = await explain('89.160.20.115', '--list', 'edge')
  t.same(action(se, 'edge', 'block').reasons, [{
    code: 'not_selected',
    message: "the list's selector does not select block rule r-se (country SE): team=geo, selector wants team=edge",
    rules: [{ rule: rule('r-se', country), mismatched: [{ label: 'team', selector: 'edge', rule: 'geo' }] }],
  }])
  t.same(action(await explain('89.160.20.115'), null, 'block').rules, [rule('r-se', country)], 'country expansion')
  t.same(action(await explain('1.130.0.1'), null, 'block').rules, [rule('r-as', { asn: 'AS1221', organization: 'Telstra Pty Ltd', network: '1.128.0.0/11', database: ASN_TEST_DB, database_type: 'GeoLite2-ASN' })], 'ASN expansion')

  t.same(action(await explain('192.0.2.50'), null, 'block').reasons, [{
    code: 'lapsed',
    message: `block rule lapsed-kept (ip 192.0.2.50/32) lapsed at ${new Date(fx.lapsedAt).toISOString()}`,
    lapsed: [{ target: { type: 'ip', value: '192.0.2.50/32' }, rule_ref: 'lapsed-kept', lapsed_at: new Date(fx.lapsedAt).toISOString(), swept: false, rule: rule('lapsed-kept') }],
  }])
  t.same(action(await explain('192.0.2.60'), null, 'block').reasons, [{
    code: 'lapsed',
    message: `block rule swept (ip 192.0.2.60/32) lapsed at ${new Date(fx.sweptAt).toISOString()} (swept; from its tombstone)`,
    lapsed: [{ target: { type: 'ip', value: '192.0.2.60/32' }, rule_ref: 'swept', lapsed_at: new Date(fx.sweptAt).toISOString(), swept: true }],
  }])
  t.same(action(await explain('10.9.9.9'), null, 'block').reasons, [{ code: 'no_rule', message: 'no block rule covers 10.9.9.9' }])
})

t.test('published agrees with `feed get` in every format', async (t) => {
  for (const ip of ['203.0.113.7', '198.51.100.200', '198.51.100.5', '89.160.20.115', '1.130.0.1', '2001:db8::1', '10.9.9.9']) {
    const e = await explain(ip)
    for (const f of e.feeds) {
      for (const a of ['block', 'allow'] as const) {
        for (const v of f.actions[a].formats) {
          const got = await runCommand(feedCommand, ['get', '--workspace', fx.workspaceId, ...(f.list === null ? [] : ['--list', f.list.id]), '--format', v.format, '--family', v.family, '--action', a], { env })
          const lines = got.code !== 0 ? [] : v.format === 'nftables' ? got.stdout.replace(/^elements = \{ | \}\n?$/g, '').split(', ') : got.stdout.split('\n')
          const shown = v.format === 'dialect_b' ? v.rows!.map((r) => r.row) : v.network === null ? [] : [v.network!]
          t.equal(v.published, shown.length > 0 && shown.every((s) => lines.includes(s)), `${ip} ${f.name} ${a} ${v.format} ${v.family}`)
        }
      }
    }
  }
})

t.test('the text form: one block per feed, its networks, rules and reasons', async (t) => {
  const r = await runCommand(explainCommand, ['198.51.100.200', '--workspace', fx.workspaceId, '--list', 'edge'], { env })
  t.equal(r.code, 0, r.stderr)
  const cidr = stored.get('r-cidr')!
  const carve = stored.get('a-carve')!
  const iso = (ms: number): string => new Date(ms).toISOString()
  t.match(r.stdout, /^198\.51\.100\.200 \(v4\) in workspace "acme" \([0-9a-f-]{36}\) at \S+Z\ngeo: in neither database\n\n/)
  t.ok(r.stdout.includes(`list "edge" (${fx.lists.edge}) selecting team=edge, built `), 'the list, its selector')
  t.ok(r.stdout.includes([
    '  block: not published (default plain, both)',
    `    rule: block ip 198.51.100.0/24 rule_ref r-cidr, confidence -, severity - labels {"team":"edge"}; created ${iso(cidr.createdAt)}, updated ${iso(cidr.updatedAt)}, expires never, stream seq 5`,
    '    why: carved out by allow rule a-carve (ip 198.51.100.128/25): an allow rule of the workspace always wins',
    '  allow: not published (default plain, both)',
    '    why: the list\'s selector does not select allow rule a-carve (ip 198.51.100.128/25): team=(absent), selector wants team=edge',
    '',
  ].join('\n')), r.stdout)
  t.equal(carve.action, 'allow')
})

t.test('key create takes the rules:read scope', async (t) => {
  const r = await runCommand(keyCommand, ['create', '--workspace', fx.workspaceId, '--scopes', 'feeds:read,rules:read', '--json'], { env })
  t.equal(r.code, 0, r.stderr)
  const ls = await runCommand(keyCommand, ['ls', '--workspace', fx.workspaceId, '--json'], { env })
  const created = (JSON.parse(ls.stdout) as Array<{ id: string, scopes: string[] }>).find((k) => k.id === (JSON.parse(r.stdout) as { id: string }).id)
  t.same(created?.scopes, ['feeds:read', 'rules:read'])
  const bad = await runCommand(keyCommand, ['create', '--workspace', fx.workspaceId, '--scopes', 'rules:write'], { env })
  t.match(bad.stderr, /unknown scope "rules:write"; scopes are signals:write, feeds:read, rules:read/)
})

t.test('usage errors', async (t) => {
  const cases = [
    { description: 'no workspace', args: ['203.0.113.7'], code: 2, stderr: /--workspace is required/ },
    { description: 'no address', args: ['--workspace', fx.workspaceId], code: 2, stderr: /an address is required/ },
    { description: 'a network', args: ['203.0.113.0/24', '--workspace', fx.workspaceId], code: 2, stderr: /ip: "203\.0\.113\.0\/24" is a network; give one address/ },
    { description: 'not an address', args: ['nope', '--workspace', fx.workspaceId], code: 2, stderr: /ip: "nope" is not an IPv4 or IPv6 address/ },
    { description: 'two addresses', args: ['1.2.3.4', '1.2.3.5', '--workspace', fx.workspaceId], code: 2, stderr: /one address at a time; got 2/ },
    { description: 'unknown workspace', args: ['1.2.3.4', '--workspace', '00000000-0000-4000-8000-000000000000'], code: 1, stderr: /no workspace with id/ },
    { description: 'unknown list', args: ['1.2.3.4', '--workspace', fx.workspaceId, '--list', 'nope'], code: 1, stderr: /no list "nope"/ },
    { description: 'unknown option', args: ['1.2.3.4', '--workspace', fx.workspaceId, '--format', 'plain'], code: 2, stderr: /Unknown option '--format'/ },
  ]
  for (const c of cases) {
    const r = await runCommand(explainCommand, c.args, { env })
    t.equal(r.code, c.code, c.description)
    t.match(r.stderr, c.stderr, c.description)
    t.equal(r.stdout, '', c.description)
  }
  const help = await runCommand(explainCommand, ['--help'], { env })
  t.match(help.stdout, /^Usage: threatfeed explain ADDR --workspace ID \[--list NAME\|UUID\] \[--json\]/)
})
