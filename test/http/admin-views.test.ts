/**
 * The admin API's read-only views (issue 22): rules searched by target, rule_ref, label and kind
 * and paged; recent signal batches with the failed entries' reasons and the posting key's id; feed sizes per variant over
 * time; consumers, stale first; paging limits as a table.
 */
import t from 'tap'
import type { RuleStore } from '../../src/store/types.js'
import { startAdminServer, type Json } from '../helpers/admin-server.js'

const srv = await startAdminServer()
t.teardown(() => srv.close())

async function signal (api: 'v1' | 'v2', body: unknown[]): Promise<{ status: number }> {
  return fetch(`${srv.base}/${api}/signal`, { method: 'POST', headers: { authorization: `Bearer ${srv.keys.signals}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
}

// 7 access rules (one labelled), 1 WAF rule, a partly failed batch and a wholly failed one.
// Statuses asserted in the first subtest: an assertion at the top level between awaits let tap
// end the top-level test (and its teardown close the server) before the next request.
const statuses: number[] = []
statuses.push((await signal('v1', [1, 2, 3, 4, 5].map((i) => ({ type: 'access_rules', action: 'block', ip: `192.0.2.${i}` })))).status)
statuses.push((await signal('v2', [
  { kind: 'access_rule', op: 'upsert', rule_ref: 'edge-1', labels: { team: 'edge' }, rule: { target: { ip: '198.51.100.0/24' }, action: 'block' } },
  { kind: 'access_rule', op: 'upsert', rule: { target: { country: 'XX' }, action: 'block' } },
  { kind: 'waf_rule', op: 'upsert', rule_ref: 'waf-1', rule: { type: 'custom', name: '<img src=x onerror=alert(1)>', expression: 'http.request.uri.path eq "/x"', action: 'block' } },
  { kind: 'access_rule', op: 'upsert', rule: { target: { asn: 'AS1221' }, action: 'allow' } },
])).status)
statuses.push((await signal('v1', [{ type: 'access_rules', action: 'block', ip: '10.0.0.1/4' }])).status)
const applied = await (async () => {
  for (let i = 0; i < 100; i++) {
    if ((await srv.server.store.rules.list(srv.main.id, 'access_rule')).length === 7) return true
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return false
})()

t.test('the signals were answered and applied', async (t) => {
  t.same(statuses, [200, 206, 400])
  t.ok(applied)
})

t.test('rules: search by target, rule_ref, label and kind', async (t) => {
  const cases: Array<{ description: string, query: string, expected: string[] }> = [
    { description: 'a host by address', query: 'target=192.0.2.3', expected: ['192.0.2.3/32'] },
    { description: 'a network by CIDR with host bits', query: 'target=198.51.100.7/24', expected: ['198.51.100.0/24'] },
    { description: 'an ASN any case', query: 'target=as1221', expected: ['AS1221'] },
    { description: 'by rule_ref', query: 'rule_ref=edge-1', expected: ['198.51.100.0/24'] },
    { description: 'by label', query: 'label=team%3Dedge', expected: ['198.51.100.0/24'] },
    { description: 'by label, no match', query: 'label=team%3Dcore', expected: [] },
    { description: 'an address without rules', query: 'target=203.0.113.9', expected: [] },
  ]
  for (const c of cases) {
    const r = await srv.call('GET', `/v1/admin/rules?${c.query}`, 'admin')
    t.equal(r.status, 200, c.description)
    t.same(r.body.items.map((x: Json) => x.target.value).sort(), c.expected, c.description)
  }
  const waf = await srv.call('GET', '/v1/admin/rules?kind=waf_rule', 'admin')
  t.match(waf.body.items, [{ kind: 'waf_rule', rule_ref: 'waf-1', name: '<img src=x onerror=alert(1)>', type: 'custom', action: 'block', lapsed: false }])
  t.equal(waf.body.next_cursor, null)
})

t.test('rules: pages of `limit`, newest first, every rule once', async (t) => {
  const seen: string[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const r: { body: Json } = await srv.call('GET', `/v1/admin/rules?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`, 'admin')
    t.ok(r.body.items.length <= 2)
    seen.push(...r.body.items.map((x: Json) => x.id as string))
    cursor = r.body.next_cursor
    pages++
  } while (cursor !== null && pages < 10)
  t.equal(pages, 4, '7 rules in pages of 2')
  t.equal(new Set(seen).size, 7, 'each once')
  const all = await srv.call('GET', '/v1/admin/rules?limit=500', 'admin')
  t.same(all.body.items.map((x: Json) => x.id), seen, 'the same order as one page')
})

t.test('rules through a store that reads newest first (MongoDB\'s rulesNewestFirst): the same pages, the read stopped with each', async (t) => {
  const pagesOf = async (query: string): Promise<string[][]> => {
    const out: string[][] = []
    let cursor: string | null = null
    do {
      const r: { body: Json } = await srv.call('GET', `/v1/admin/rules?${query}${cursor === null ? '' : `&cursor=${cursor}`}`, 'admin')
      out.push(r.body.items.map((x: Json) => x.id as string))
      cursor = r.body.next_cursor
    } while (cursor !== null && out.length < 10)
    return out
  }
  const queries = ['limit=2', 'limit=3&label=team%3Dedge', 'kind=waf_rule', 'limit=500']
  const expected = await Promise.all(queries.map(pagesOf))
  // The contract's semantics over the embedded store's rules, counting what it hands over.
  const rules = srv.server.store.rules as RuleStore
  let handed = 0
  rules.rulesNewestFirst = async (workspaceId, kind, before, each) => {
    const all = (await rules.list(workspaceId, kind)).sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1))
    for (const r of all) {
      if (before !== undefined && !(r.createdAt < before.at || (r.createdAt === before.at && r.id < before.id))) continue
      handed++
      if (!each(r)) return
    }
  }
  t.teardown(() => { delete rules.rulesNewestFirst })
  handed = 0
  t.same(await pagesOf('limit=2'), expected[0], 'pages of 2')
  t.ok(handed <= 7 + 4, `each page read about its own rules (${handed} handed for 4 pages of 7 rules)`)
  for (let i = 1; i < queries.length; i++) t.same(await pagesOf(queries[i]!), expected[i], queries[i]!)
})

t.test('paging and query limits: 400 with details', async (t) => {
  const cases: Array<{ description: string, path: string, field: string }> = [
    { description: 'limit 0', path: '/v1/admin/rules?limit=0', field: 'limit' },
    { description: 'limit 501', path: '/v1/admin/rules?limit=501', field: 'limit' },
    { description: 'limit not a number', path: '/v1/admin/batches?limit=ten', field: 'limit' },
    { description: 'limit negative', path: '/v1/admin/audit?limit=-1', field: 'limit' },
    { description: 'limit twice', path: '/v1/admin/rules?limit=1&limit=2', field: 'limit' },
    { description: 'a forged cursor', path: '/v1/admin/rules?cursor=abc', field: 'cursor' },
    { description: 'a cursor of another shape', path: `/v1/admin/batches?cursor=${Buffer.from('{"a":1}').toString('base64url')}`, field: 'cursor' },
    { description: 'unknown parameter', path: '/v1/admin/rules?sort=asc', field: 'sort' },
    { description: 'unknown kind', path: '/v1/admin/rules?kind=dns_rule', field: 'kind' },
    { description: 'target on expression rules', path: '/v1/admin/rules?kind=waf_rule&target=192.0.2.1', field: 'target' },
    { description: 'a bad target', path: '/v1/admin/rules?target=192.0.2.300', field: 'target' },
    { description: 'a label without =', path: '/v1/admin/rules?label=team', field: 'label' },
    { description: 'failed not a boolean', path: '/v1/admin/batches?failed=yes', field: 'failed' },
  ]
  for (const c of cases) {
    const r = await srv.call('GET', c.path, 'admin')
    t.equal(r.status, 400, c.description)
    t.equal(r.body.error, 'ValidationError', c.description)
    t.equal(r.body.details[0].field, c.field, c.description)
  }
  t.equal((await srv.call('GET', '/v1/admin/rules?limit=500', 'admin')).status, 200, 'limit 500 is allowed')
})

t.test('batches: recent batches with counts and the failed entries\' reasons', async (t) => {
  let items: Json[] = []
  for (let i = 0; i < 100 && items.length < 3; i++) {
    items = (await srv.call('GET', '/v1/admin/batches', 'admin')).body.items
    if (items.length < 3) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.match(items, [
    { api: 'v1', status: 400, entries: 1, accepted: 0, failed: 1, errors: ['[0].ip: IPv4 prefixes shorter than /8 are refused'] },
    { api: 'v2', status: 206, entries: 4, accepted: 3, failed: 1, errors: ['Entry 1: rule.target.country: must be an ISO-3166 alpha-2 code'], errors_truncated: 0 },
    { api: 'v1', status: 200, entries: 5, accepted: 5, failed: 0, errors: [] },
  ])
  // The receipt its answer carried, for an appended batch (issue 35); null for a refused one.
  t.equal(items[0]!.batch, null, 'a refused batch has no receipt')
  t.match(items[1]!.batch, { id: /^[0-9a-f-]{36}$/, first_seq: Number, last_seq: Number }, 'a 206 batch has its receipt')
  t.equal((items[1]!.batch as { last_seq: number }).last_seq - (items[1]!.batch as { first_seq: number }).first_seq, 2, 'the 3 accepted entries')
  t.match(items[2]!.batch, { id: /^[0-9a-f-]{36}$/, first_seq: 1, last_seq: 5 }, 'a 200 batch has its receipt')
  // Which key posted each batch, refused ones too: its id, never the key itself.
  t.same(items.map((b) => b.key_id), [srv.keyIds.signals, srv.keyIds.signals, srv.keyIds.signals], 'each batch names the posting key\'s id')
  const raw = (await srv.call('GET', '/v1/admin/batches', 'root')).text
  t.notOk(raw.includes(srv.keys.signals), 'the key itself is nowhere in the answer')
  const failed = await srv.call('GET', '/v1/admin/batches?failed=true&limit=1', 'admin')
  t.equal(failed.body.items.length, 1)
  t.equal(failed.body.items[0].status, 400)
  const next = await srv.call('GET', `/v1/admin/batches?failed=true&limit=1&cursor=${failed.body.next_cursor as string}`, 'admin')
  t.equal(next.body.items[0].status, 206, 'the next failed batch, the good one skipped')
  t.equal(next.body.next_cursor, null)
  t.same((await srv.call('GET', '/v1/admin/batches', 'otherAdmin')).body.items, [], 'another workspace sees none of them')
})

t.test('feed versions: entries and sizes per variant, one point an hour', async (t) => {
  const poll = await fetch(`${srv.base}/v1/threat/feeds?family=v4`, { headers: { authorization: `Bearer ${srv.keys.feeds}` } })
  t.equal(poll.status, 200)
  const body = await poll.text()
  // The sampler runs every 5 minutes; the test samples now, through the same journal.
  const r0 = await srv.call('GET', '/v1/admin/feed-versions?list=*', 'admin')
  t.equal(r0.status, 200)
  t.ok(await sample() > 0, 'sampled the built variants')
  const r = await srv.call('GET', '/v1/admin/feed-versions?list=*', 'admin')
  const plain = r.body.items.find((x: Json) => x.variant.startsWith('plain|v4|block'))
  t.ok(plain !== undefined, 'the polled variant is there')
  t.equal(plain.list, '*')
  t.equal(plain.points.length, 1)
  t.match(plain.points[0], { entries: body.trim().split('\n').length, bytes: Buffer.byteLength(body) })
  t.equal(Date.parse(plain.points[0].at) % 3_600_000, 0, 'at the start of the hour')
  await sample()
  const again = await srv.call('GET', '/v1/admin/feed-versions?list=*', 'admin')
  t.equal(again.body.items.find((x: Json) => x.variant === plain.variant).points.length, 1, 'a second sample in the hour replaces the first')
  t.equal((await srv.call('GET', '/v1/admin/feed-versions?list=00000000-0000-4000-8000-000000000000', 'admin')).status, 404)
})

t.test('consumers: every poller of the workspace, stale first', async (t) => {
  let items: Json[] = []
  for (let i = 0; i < 200 && items.length === 0; i++) {
    items = (await srv.call('GET', '/v1/admin/consumers', 'admin')).body.items
    if (items.length === 0) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.ok(items.length >= 1, 'the poll above is a consumer')
  t.match(items[0], { key_id: srv.keyIds.feeds, address: '127.0.0.1', list: '*', stale: false })
  t.same((await srv.call('GET', '/v1/admin/consumers', 'otherAdmin')).body.items, [])
})

function sample (): Promise<number> {
  return srv.server.adminJournal.sampleFeeds()
}
