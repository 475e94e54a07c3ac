/**
 * GET /v1/threat/explain through the server as `threatfeed serve` composes it (src/main.ts), over
 * a store seeded with every reason (test/helpers/explain-fixture.ts) and the test MMDBs: exact
 * fields of rules, networks, rows and reasons; the rules:read scope; bad addresses as a table;
 * and, for every answer, "published" against the bodies the feed routes serve.
 */
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer } from '../../src/main.js'
import { openStore } from '../../src/store/open.js'
import type { AccessRule } from '../../src/store/types.js'
import type { ExplainedAction, ExplainedFeed, ExplainReason, Explanation } from '../../src/feed/explain.js'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { buildOpenApiDocument } from '../../src/ingest/openapi.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'
import { expectedRule, seedExplainFixture } from '../helpers/explain-fixture.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-explain-http-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const seeding = await openStore({ kind: 'embedded', dataDir: dir })
const fx = await seedExplainFixture(seeding)
await seeding.close()

const config = loadConfig({
  HOST: '127.0.0.1',
  PORT: '0',
  THREATFEED_DATA_DIR: dir,
  THREATFEED_LOG_LEVEL: 'silent',
  THREATFEED_POLL_MS: '50',
  THREATFEED_FEED_REBUILD_MS: '50',
  THREATFEED_WORKERS: '1',
  // The stored lapsed rule must stay stored; the swept one was swept while seeding.
  THREATFEED_SWEEP_INTERVAL: 'off',
  THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
  THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
})
const server = await startServer(config, createLogger('silent'))
t.teardown(() => server.stop())
const base = `http://127.0.0.1:${server.port}`
const auth = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
// Explaining every feed builds none: the fixture's feeds are polled first, as appliances would.
for (const path of ['/v1/threat/feeds', ...Object.values(fx.lists).map((id) => `/v1/threat/feeds/${id}`)]) {
  await (await fetch(`${base}${path}`, { headers: auth(fx.rulesKey) })).arrayBuffer()
}

async function explain (query: string, key = fx.rulesKey): Promise<{ status: number, body: unknown, headers: Headers }> {
  const r = await fetch(`${base}/v1/threat/explain${query}`, { headers: auth(key) })
  return { status: r.status, body: await r.json(), headers: r.headers }
}

async function explained (query: string): Promise<Explanation> {
  const r = await explain(query)
  if (r.status !== 200) throw new Error(`${query}: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body as Explanation
}

const stored = new Map<string, AccessRule>()
for (const r of await server.store.rules.list(fx.workspaceId, 'access_rule')) stored.set(r.ruleRef!, r as AccessRule)
const rule = (ref: string, expansion?: Record<string, string | null>): ReturnType<typeof expectedRule> => expectedRule(stored.get(ref)!, expansion)
const feedOf = (e: Explanation, name: string | null): ExplainedFeed => e.feeds.find((f) => (f.list?.name ?? null) === name)!

/** The body lines a variant serves (dialect_a without its header). */
async function served (list: string | null, format: string, family: string, action: string): Promise<string[]> {
  const path = list === null ? '/v1/threat/feeds' : `/v1/threat/feeds/${list}`
  const r = await fetch(`${base}${path}?format=${format}&family=${family}&action=${action}`, { headers: auth(fx.rulesKey) })
  const text = await r.text()
  if (r.status === 413) return []
  if (format === 'nftables') return text === '' ? [] : text.replace(/^elements = \{ | \}\n?$/g, '').split(', ')
  return text.split('\n').filter((l) => l !== '' && !l.startsWith('#'))
}

/** Every format of every action of every feed: published ⇔ its network (or row) is a body line. */
async function checkAgainstBodies (t: Test, e: Explanation): Promise<void> {
  for (const f of e.feeds) {
    for (const [action, a] of Object.entries(f.actions) as Array<[string, ExplainedAction]>) {
      for (const v of a.formats) {
        const lines = await served(f.list?.id ?? null, v.format, v.family, action)
        const shown = v.format === 'dialect_b' ? v.rows!.map((r) => r.row) : v.network === null ? [] : [v.network!]
        const inBody = shown.length > 0 && shown.every((s) => lines.includes(s))
        t.equal(v.published, inBody, `${e.ip} ${f.name} ${action} ${v.format} ${v.family}`)
      }
    }
  }
}

t.test('a direct IP inside a CIDR of another dialect_b group: networks, rows and both rules, exact', async (t) => {
  const e = await explained('?ip=203.0.113.7')
  t.match(e, { ip: '203.0.113.7', family: 'v4', workspace: { id: fx.workspaceId, name: 'acme' }, geo: { country: null, asn: null } })
  t.same(e.feeds.map((f) => f.list?.name ?? '*'), ['*', 'edge', 'tiny', 'v6only'], 'the workspace feed, then every list by name')
  const block = feedOf(e, null).actions.block
  t.equal(block.published, true)
  t.same(block.default, { format: 'plain', family: 'both' })
  t.same(block.formats.find((f) => f.format === 'plain' && f.family === 'v4'), { format: 'plain', family: 'v4', status: 200, entries: 5, limit: 131072, published: true, network: '203.0.113.0/24' })
  t.same(block.formats.find((f) => f.format === 'dialect_b' && f.family === 'v4')!.rows, [
    { row: '203.0.113.7,IP,medium,high', network: '203.0.113.7/32', confidence: 'medium', severity: 'high' },
    { row: '203.0.113.0-203.0.113.255,IP Range,high,critical', network: '203.0.113.0/24', confidence: 'high', severity: 'critical' },
  ], 'dialect_b groups differ: the /32 keeps its own row')
  t.same(block.rules, [rule('r-ip'), rule('r-net')], 'most specific first, every field')
  t.same(block.reasons, [])
  t.same(feedOf(e, null).actions.allow.reasons, [{ code: 'no_rule', message: 'no allow rule covers 203.0.113.7' }])
  t.equal(e.feeds[0]!.held, undefined, 'no publish guard holds a feed (the extension point stays absent)')
  await checkAgainstBodies(t, e)
})

t.test('CIDR and allow carving: carved half and kept half, exact reasons', async (t) => {
  const carved = await explained('?ip=198.51.100.200')
  const ws = feedOf(carved, null)
  t.equal(ws.actions.block.published, false)
  t.same(ws.actions.block.rules, [rule('r-cidr')])
  t.same(ws.actions.block.reasons, [{ code: 'carved', message: 'carved out by allow rule a-carve (ip 198.51.100.128/25): an allow rule of the workspace always wins', by: [rule('a-carve')] }])
  t.equal(ws.actions.allow.published, true)
  t.equal(ws.actions.allow.formats[0]!.network, '198.51.100.128/25')
  const kept = await explained('?ip=198.51.100.5')
  t.equal(feedOf(kept, null).actions.block.formats[0]!.network, '198.51.100.0/25', 'the covering network is the carved, coalesced one')
  await checkAgainstBodies(t, carved)
  await checkAgainstBodies(t, kept)
})

t.test('country and ASN expansions name the code, the record network and the database', async (t) => {
  const se = await explained('?ip=89.160.20.115')
  const country = { country: 'SE', network: '89.160.20.112/28', database: COUNTRY_TEST_DB, database_type: 'GeoLite2-Country' }
  t.same(se.geo.country, { code: 'SE', network: '89.160.20.112/28', database: COUNTRY_TEST_DB, database_type: 'GeoLite2-Country' })
  t.same(feedOf(se, null).actions.block.rules, [rule('r-se', country)])
  t.equal(feedOf(se, null).actions.block.formats[0]!.network, '89.160.20.112/28')
  const as = await explained('?ip=1.130.0.1')
  const asn = { asn: 'AS1221', organization: 'Telstra Pty Ltd', network: '1.128.0.0/11', database: ASN_TEST_DB, database_type: 'GeoLite2-ASN' }
  t.same(feedOf(as, null).actions.block.rules, [rule('r-as', asn)])
  t.equal(feedOf(as, null).actions.block.formats[0]!.network, '1.128.0.0/11')
  t.equal(feedOf(as, 'edge').actions.block.published, true, 'the ASN rule carries team=edge')
  await checkAgainstBodies(t, se)
  await checkAgainstBodies(t, as)
})

t.test('a list whose selector leaves the rule out says which label', async (t) => {
  const e = await explained('?ip=89.160.20.115&list=edge')
  t.same(e.feeds.map((f) => f.list?.name), ['edge'], 'only the list asked for')
  const block = e.feeds[0]!.actions.block
  t.equal(block.published, false)
  t.same(block.reasons, [{
    code: 'not_selected',
    message: "the list's selector does not select block rule r-se (country SE): team=geo, selector wants team=edge",
    rules: [{ rule: rule('r-se', { country: 'SE', network: '89.160.20.112/28', database: COUNTRY_TEST_DB, database_type: 'GeoLite2-Country' }), mismatched: [{ label: 'team', selector: 'edge', rule: 'geo' }] }],
  }])
  t.same((await explained(`?ip=89.160.20.115&list=${fx.lists.edge}`)).feeds[0]!.actions.block.reasons, block.reasons, 'by UUID alike')
})

t.test('lapsed: a rule still stored, and one the sweep removed (from its tombstone)', async (t) => {
  const kept = feedOf(await explained('?ip=192.0.2.50'), null).actions.block
  t.equal(kept.published, false)
  t.same(kept.reasons, [{
    code: 'lapsed',
    message: `block rule lapsed-kept (ip 192.0.2.50/32) lapsed at ${new Date(fx.lapsedAt).toISOString()}`,
    lapsed: [{ target: { type: 'ip', value: '192.0.2.50/32' }, rule_ref: 'lapsed-kept', lapsed_at: new Date(fx.lapsedAt).toISOString(), swept: false, rule: rule('lapsed-kept') }],
  }])
  const swept = feedOf(await explained('?ip=192.0.2.60'), null).actions.block
  t.same(swept.reasons, [{
    code: 'lapsed',
    message: `block rule swept (ip 192.0.2.60/32) lapsed at ${new Date(fx.sweptAt).toISOString()} (swept; from its tombstone)`,
    lapsed: [{ target: { type: 'ip', value: '192.0.2.60/32' }, rule_ref: 'swept', lapsed_at: new Date(fx.sweptAt).toISOString(), swept: true }],
  }])
  t.same(feedOf(await explained('?ip=192.0.2.60'), null).actions.allow.reasons, [{ code: 'no_rule', message: 'no allow rule covers 192.0.2.60' }], 'the tombstone keeps the action: not an allow')
})

t.test('a variant over its cap answers 413; a list of the other family does not publish it', async (t) => {
  const tiny = feedOf(await explained('?ip=203.0.113.7&list=tiny'), 'tiny').actions.block
  t.equal(tiny.published, false)
  t.same(tiny.reasons, [{ code: 'over_cap', message: 'the plain both variant has 16 entries, over its limit of 1: it answers 413', format: 'plain', family: 'both', entries: 16, limit: 1 }])
  t.same(tiny.rules, [rule('r-ip'), rule('r-net')], 'the rules are still shown')
  t.ok(tiny.formats.every((f) => f.status === 413 && !f.published && (f.format === 'dialect_b' || f.network === '203.0.113.0/24')))
  const v6 = feedOf(await explained('?ip=203.0.113.7&list=v6only'), 'v6only').actions.block
  t.equal(v6.published, false)
  t.same(v6.default, { format: 'plain', family: 'v6' })
  t.same(v6.reasons, [{ code: 'family_not_published', message: 'this feed publishes v6 only by default; 203.0.113.7 is v4 (ask with family=v4 or family=both)', family: 'v6' }])
  t.equal(v6.formats.find((f) => f.format === 'plain' && f.family === 'v4')!.published, true, 'with ?family=v4 it is there')
  const six = feedOf(await explained('?ip=2001:db8::1&list=v6only'), 'v6only').actions.block
  t.equal(six.published, true)
  t.same(six.formats.find((f) => f.format === 'nftables'), { format: 'nftables', family: 'v6', status: 200, entries: 11, limit: 131072, published: true, network: '2001:db8::/32' })
})

t.test('answers are what /openapi.json documents', async (t) => {
  const ajv = new Ajv2020({ strict: false, validateFormats: false })
  ajv.addSchema({ $id: 'https://threatfeed.test/openapi', components: buildOpenApiDocument().components })
  const valid = ajv.compile({ $ref: 'https://threatfeed.test/openapi#/components/schemas/Explanation' })
  for (const ip of ['203.0.113.7', '198.51.100.200', '89.160.20.115', '192.0.2.60', '2001:db8::1']) {
    t.ok(valid(await explained(`?ip=${ip}`)), `${ip}: ${JSON.stringify(valid.errors)}`)
  }
  const doc = await (await fetch(`${base}/openapi.json`)).json() as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }
  t.same(Object.keys(doc.paths['/v1/threat/explain']!).sort(), ['get', 'head'])
  t.ok(doc.paths['/v1/threat/explain']!.get!.responses['403'], '403 documented')
})

t.test('no rule covers it', async (t) => {
  const e = await explained('?ip=10.9.9.9')
  for (const f of e.feeds) {
    t.same(f.actions.block.reasons.at(-1), { code: 'no_rule', message: 'no block rule covers 10.9.9.9' }, f.name)
    t.same(f.actions.block.rules, [])
  }
  t.same(feedOf(e, 'tiny').actions.block.reasons.map((r) => r.code), ['over_cap', 'no_rule'], 'every reason that holds is given')
  t.same(feedOf(e, 'v6only').actions.block.reasons.map((r) => r.code), ['family_not_published', 'no_rule'])
  await checkAgainstBodies(t, e)
})

t.test('a list nobody polled is not built by explaining every feed: not_built, from the rules alone', async (t) => {
  const unpolled = await server.store.lists.create({ workspaceId: fx.workspaceId, name: 'unpolled', description: '', defaults: { family: 'v6' }, selector: { team: 'edge' } })
  const notBuilt = (name: string): ExplainReason => ({ code: 'not_built', message: `not built: nobody polled list ${name} lately, and explaining every feed builds none (ask with list=${unpolled.id} to build it); what follows comes from the rules alone` })
  const e = await explained('?ip=203.0.113.7')
  const f = feedOf(e, 'unpolled')
  t.same({ feed: f.feed, name: f.name, built_at: f.built_at, held: f.held }, { feed: unpolled.id, name: 'unpolled', built_at: null, held: undefined })
  t.same(f.actions.block, {
    published: false,
    default: { format: 'plain', family: 'v6' },
    formats: [],
    rules: [rule('r-ip'), rule('r-net')],
    reasons: [notBuilt('unpolled'), { code: 'family_not_published', message: 'this feed publishes v6 only by default; 203.0.113.7 is v4 (ask with family=v4 or family=both)', family: 'v6' }],
  }, 'the selected rules that cover it, and what the rules alone say')
  t.same(feedOf(e, 'unpolled').actions.allow.reasons.map((r) => r.code), ['not_built', 'family_not_published', 'no_rule'])
  const carved = feedOf(await explained('?ip=198.51.100.200'), 'unpolled').actions.block
  t.same(carved.reasons.map((r) => r.code), ['not_built', 'family_not_published', 'carved'], 'carving is a rule-only reason')
  t.equal(feedOf(await explained('?ip=203.0.113.7'), 'edge').built_at !== null, true, 'a polled list is explained from its snapshot')
  // Had the explanation started a build, it would be done well within this.
  await new Promise((resolve) => setTimeout(resolve, 800))
  t.equal(feedOf(await explained('?ip=203.0.113.7'), 'unpolled').built_at, null, 'still not built')
  const asked = await explain(`?ip=2001:db8::1&list=${unpolled.id}`)
  t.equal(asked.status, 200, 'asking for the list builds it, as a poll would')
  const one = (asked.body as Explanation).feeds[0]!
  t.not(one.built_at, null)
  t.equal(one.actions.block.published, true)
  t.equal(feedOf(await explained('?ip=2001:db8::1'), 'unpolled').actions.block.published, true, 'explained from its snapshot from then on')
})

t.test('stream_seq is the stream position of the signal that last changed the rule', async (t) => {
  const body = JSON.stringify([{ kind: 'access_rule', op: 'upsert', rule_ref: 'r-signal', labels: { team: 'edge' }, rule: { target: { ip: '192.0.2.77' }, action: 'block' } }])
  const r = await fetch(`${base}/v2/signal`, { method: 'POST', headers: { ...auth(fx.rulesKey), 'content-type': 'application/json' }, body })
  t.equal(r.status, 200, await r.text())
  const head = await server.store.stream.head()
  const deadline = Date.now() + 5000
  let found: ExplainedAction['rules'] = []
  while (found.length === 0 && Date.now() < deadline) {
    found = feedOf(await explained('?ip=192.0.2.77'), null).actions.block.rules
    if (found.length === 0) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.equal(found[0]?.stream_seq, head)
  t.equal(found[0]?.rule_ref, 'r-signal')
})

t.test('scope, list and method errors use the feed error body', async (t) => {
  const forbidden = await explain('?ip=203.0.113.7', fx.feedsKey)
  t.equal(forbidden.status, 403)
  t.same(forbidden.body, { success: false, error: 'API key lacks the rules:read scope', details: {} }, 'feeds:read is not enough')
  const anonymous = await fetch(`${base}/v1/threat/explain?ip=203.0.113.7`)
  t.equal(anonymous.status, 401)
  t.equal((await anonymous.json() as { success: boolean }).success, false)
  const noList = await explain('?ip=203.0.113.7&list=nope')
  t.same({ status: noList.status, body: noList.body }, { status: 404, body: { success: false, error: 'no such access-rules list', details: {} } })
  const post = await fetch(`${base}/v1/threat/explain?ip=203.0.113.7`, { method: 'POST', headers: auth(fx.rulesKey) })
  t.equal(post.status, 405)
  t.equal(post.headers.get('allow'), 'GET, HEAD')
  const ok = await explain('?ip=203.0.113.7')
  t.equal(ok.headers.get('cache-control'), 'no-store')
})

t.test('bad addresses: 400 with the feed error body and a clear message', async (t) => {
  const long = '1'.repeat(70)
  const cases = [
    { description: 'no ip', query: '', error: 'ip: an address is required (?ip=ADDR)', details: { parameter: 'ip', value: '' } },
    { description: 'empty ip', query: '?ip=', error: 'ip: an address is required (?ip=ADDR)', details: { parameter: 'ip', value: '' } },
    { description: 'a word', query: '?ip=abc', error: 'ip: "abc" is not an IPv4 or IPv6 address', details: { parameter: 'ip', value: 'abc' } },
    { description: 'three octets', query: '?ip=1.2.3', error: 'ip: "1.2.3" is not an IPv4 or IPv6 address', details: { parameter: 'ip', value: '1.2.3' } },
    { description: 'a leading zero', query: '?ip=01.2.3.4', error: 'ip: "01.2.3.4" is not an IPv4 or IPv6 address', details: { parameter: 'ip', value: '01.2.3.4' } },
    { description: 'an octet over 255', query: '?ip=1.2.3.256', error: 'ip: "1.2.3.256" is not an IPv4 or IPv6 address', details: { parameter: 'ip', value: '1.2.3.256' } },
    { description: 'a network', query: '?ip=203.0.113.0%2F24', error: 'ip: "203.0.113.0/24" is a network; give one address', details: { parameter: 'ip', value: '203.0.113.0/24' } },
    { description: 'a zone id', query: '?ip=fe80::1%25eth0', error: 'ip: "fe80::1%eth0" has a zone id; give the address without it', details: { parameter: 'ip', value: 'fe80::1%eth0' } },
    { description: 'two IPv6 gaps', query: '?ip=1::2::3', error: 'ip: "1::2::3" is not an IPv4 or IPv6 address', details: { parameter: 'ip', value: '1::2::3' } },
    { description: 'blanks', query: '?ip=%201.2.3.4', error: 'ip: " 1.2.3.4" is not an IPv4 or IPv6 address', details: { parameter: 'ip', value: ' 1.2.3.4' } },
    { description: 'too long', query: `?ip=${long}`, error: 'ip: longer than 64 characters, not an IP address', details: { parameter: 'ip', value: '1'.repeat(64) + '…' } },
    { description: 'repeated ip', query: '?ip=1.2.3.4&ip=1.2.3.5', error: 'repeated parameter: ip', details: { parameter: 'ip' } },
    { description: 'repeated list', query: '?ip=1.2.3.4&list=a&list=b', error: 'repeated parameter: list', details: { parameter: 'list' } },
  ]
  for (const c of cases) {
    const r = await explain(c.query)
    t.same({ status: r.status, body: r.body }, { status: 400, body: { success: false, error: c.error, details: c.details } }, c.description)
  }
  const mapped = await explained('?ip=::ffff:203.0.113.7')
  t.equal(mapped.ip, '203.0.113.7', 'IPv4-mapped IPv6 is explained as the IPv4 address')
})
