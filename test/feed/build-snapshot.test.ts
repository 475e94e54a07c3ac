import t from 'tap'
import { createHash } from 'node:crypto'
import { gunzipSync } from 'node:zlib'
import { buildSnapshot, type FeedDefinition } from '../../src/feed/build-snapshot.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { LastModifiedKeeper } from '../../src/feed/last-modified.js'
import { toRuleTable } from '../../src/feed/rule-table.js'
import { variantKey, type FeedSnapshot, type Variant } from '../../src/feed/snapshot-types.js'
import type { AccessList, AccessRule, Store } from '../../src/store/types.js'
import { FAMILIES, FEED_ACTIONS, FORMATS } from '../../src/store/types.js'
import { addRules, rule, tempStore, testGeo } from './fixtures.js'

const geo = await testGeo()
const tmp = await tempStore()
t.teardown(() => tmp.cleanup())
const ws = await tmp.store.workspaces.create({ name: 'acme', subscription: 'active' })
const T0 = Date.UTC(2025, 0, 1, 12, 0, 0)

async function build (rules: readonly AccessRule[], list: AccessList | null, now = T0, store: Store = tmp.store): Promise<FeedSnapshot> {
  const def: FeedDefinition = { workspaceId: ws.id, workspaceName: ws.name, list }
  const r = await buildSnapshot(def, toRuleTable(rules), { tasks: inProcessTasks(geo), lastModified: new LastModifiedKeeper(store.feedVersions, { timeoutMs: 2000 }), now })
  return r.snapshot
}
function variant (s: FeedSnapshot, format: string, family: string, action = 'block', checksum = false): Variant {
  const v = s.variants.get(`${format}|${family}|${action}|${checksum ? 'md5' : ''}`)
  if (v === undefined) throw new Error(`no variant ${format} ${family} ${action}`)
  return v
}
const body = (s: FeedSnapshot, format: string, family: string, action = 'block'): string => Buffer.from(variant(s, format, family, action).identity.body).toString()
const listOf = async (over: Partial<Omit<AccessList, 'id' | 'createdAt' | 'updatedAt'>>): Promise<AccessList> =>
  tmp.store.lists.create({ workspaceId: ws.id, name: 'list', description: 'a list', defaults: {}, selector: {}, ...over })

const rules = await addRules(tmp.store, [
  rule(ws.id, '192.0.2.0/24', { labels: { team: 'edge', tier: 2 } }),
  rule(ws.id, '198.51.100.0/24', { labels: { team: 'core' } }),
  rule(ws.id, '203.0.113.0/24', { labels: { team: 'edge', tier: 3 }, confidence: 'low' }),
  rule(ws.id, '2001:db8::/32', { labels: { team: 'edge', tier: 2, severity: 'critical' } }),
  rule(ws.id, '192.0.2.128/25', { action: 'allow', labels: { team: 'core' } }),
  rule(ws.id, '198.51.100.7/32', { action: 'allow', labels: { team: 'edge' } }),
])

t.test('every variant is there: 4 formats × 3 families × 2 actions × checksum, less nftables with both', async (t) => {
  const s = await build(rules, null)
  t.equal(s.variants.size, 44)
  for (const format of FORMATS) {
    for (const family of FAMILIES) {
      for (const action of FEED_ACTIONS) {
        for (const checksum of [false, true]) {
          const has = s.variants.has(variantKey({ format, family, action, checksum }))
          t.equal(has, !(format === 'nftables' && family === 'both'), `${format} ${family} ${action} ${checksum}`)
        }
      }
    }
  }
  t.equal(s.name, 'acme')
  t.equal(s.defaults, null)
  t.equal(s.limit, 131072)
})

t.test('selectors (DECISIONS §4) and carving (DECISIONS §5)', async (t) => {
  const cases: Array<{ description: string, list: Record<string, string> | null, block: string | null, allow: string }> = [
    { description: 'workspace feed: every rule; every allow carved', list: null, block: '192.0.2.0/25\n198.51.100.0/30\n198.51.100.4/31\n198.51.100.6/32\n198.51.100.8/29\n198.51.100.16/28\n198.51.100.32/27\n198.51.100.64/26\n198.51.100.128/25\n203.0.113.0/24\n2001:db8::/32\n', allow: '192.0.2.128/25\n198.51.100.7/32\n' },
    { description: 'a selector: only matching rules, but every allow of the workspace carves', list: { team: 'edge' }, block: '192.0.2.0/25\n203.0.113.0/24\n2001:db8::/32\n', allow: '198.51.100.7/32\n' },
    { description: 'a number label matches its string form', list: { tier: '2' }, block: '192.0.2.0/25\n2001:db8::/32\n', allow: '' },
    { description: 'every key must match', list: { team: 'edge', tier: '3' }, block: '203.0.113.0/24\n', allow: '' },
    { description: 'nothing matches', list: { team: 'nobody' }, block: '', allow: '' },
    { description: 'an empty selector selects every rule', list: {}, block: null, allow: '192.0.2.128/25\n198.51.100.7/32\n' },
  ]
  const all = await build(rules, null)
  for (const c of cases) {
    const s = await build(rules, c.list === null ? null : await listOf({ selector: c.list }))
    t.equal(body(s, 'plain', 'both'), c.block ?? body(all, 'plain', 'both'), `${c.description}: deny`)
    t.equal(body(s, 'plain', 'both', 'allow'), c.allow, `${c.description}: allow`)
  }
})

t.test('dialect_b confidence and severity: the rule own, else the list default, else high', async (t) => {
  const s = await build(rules, await listOf({ selector: { team: 'edge' }, defaults: { severity: 'medium' } }))
  t.equal(body(s, 'dialect_b', 'both'), [
    '192.0.2.0-192.0.2.127,IP Range,high,medium',
    '203.0.113.0-203.0.113.255,IP Range,low,medium',
    '2001:db8::-2001:db8:ffff:ffff:ffff:ffff:ffff:ffff,IP Range,high,critical',
    '',
  ].join('\n'))
  const ws = await build(rules, null)
  t.match(body(ws, 'dialect_b', 'v4'), /^192\.0\.2\.0-192\.0\.2\.127,IP Range,high,high\n/)
})

t.test('headers, content types and representations', async (t) => {
  const s = await build(rules, null)
  const plain = variant(s, 'plain', 'v4')
  t.equal(plain.contentType, 'text/plain; charset=utf-8')
  t.equal(variant(s, 'dialect_b', 'v4').contentType, 'text/csv; charset=utf-8')
  t.equal(variant(s, 'dialect_b', 'v4', 'block', true).contentType, 'text/plain; charset=utf-8', 'a checksum is text/plain')
  const h = new Map(plain.gzip.headers)
  t.same(Object.fromEntries(h), {
    'Content-Type': 'text/plain; charset=utf-8',
    'Cache-Control': 'private, max-age=30, must-revalidate',
    Vary: 'Accept-Encoding, Authorization',
    'X-Feed-Entry-Count': String(plain.entries),
    'X-Feed-Entry-Limit': '131072',
    ETag: plain.gzip.etag,
    'Last-Modified': plain.lastModifiedHttp,
    'Content-Digest': `sha-256=:${createHash('sha256').update(plain.gzip.body).digest('base64')}:`,
    'Content-Encoding': 'gzip',
  })
  t.notOk(new Map(plain.identity.headers).has('Content-Encoding'))
  t.same(plain.identity.notModifiedHeaders, [['ETag', plain.identity.etag], ['Last-Modified', plain.lastModifiedHttp], ['Cache-Control', 'private, max-age=30, must-revalidate'], ['Vary', 'Accept-Encoding, Authorization']])
  t.equal(plain.lastModifiedHttp, 'Wed, 01 Jan 2025 12:00:00 GMT')
  for (const [key, v] of s.variants) {
    t.same(gunzipSync(v.gzip.body), Buffer.from(v.identity.body), `${key}: gunzip(gzip) = identity`)
  }
})

t.test('checksum=md5 is the MD5 of the body of the same variant, dialect_a included', async (t) => {
  const s = await build(rules, null)
  for (const [key, v] of s.variants) {
    if (key.endsWith('|md5')) continue
    const md5 = Buffer.from(s.variants.get(key + 'md5')!.identity.body).toString()
    t.equal(md5, createHash('md5').update(v.identity.body).digest('hex'), key)
  }
})

t.test('entry cap: max_entries sets it; over it a variant is a 413 that carries no network', async (t) => {
  const s = await build(rules, await listOf({ defaults: { maxEntries: 2 } }))
  t.equal(s.limit, 2)
  const over = variant(s, 'plain', 'both')
  t.equal(over.status, 413)
  t.equal(over.contentType, 'application/json')
  t.same(JSON.parse(Buffer.from(over.identity.body).toString()), { success: false, error: 'feed exceeds its entry limit', details: { entries: 11, limit: 2, hint: "ask for family=v4 or family=v6, or raise the list's max_entries" } })
  t.same(Object.fromEntries(over.identity.headers), { 'Content-Type': 'application/json', 'Cache-Control': 'private, max-age=30, must-revalidate', Vary: 'Accept-Encoding, Authorization', 'X-Feed-Entry-Count': '11', 'X-Feed-Entry-Limit': '2' })
  t.same(over.identity.notModifiedHeaders, [])
  t.equal(variant(s, 'plain', 'v6').status, 200, 'one IPv6 network is under the cap')
  t.equal(variant(s, 'nftables', 'v4', 'block', true).status, 413, 'the checksum of an over-cap feed is a 413 too')
  t.equal(variant(s, 'plain', 'both', 'allow').status, 200)
  for (const [key, v] of s.variants) {
    if (v.status !== 413) continue
    t.notMatch(gunzipSync(v.gzip.body).toString(), /192\.0\.2|2001:db8/, `${key}: no network in a 413`)
  }
})

t.test('expiry: lapsed rules are not served; expiresAt is the earliest expiry of a rule that shapes the feed', async (t) => {
  const ex = await addRules(tmp.store, [
    rule(ws.id, '10.1.0.0/16', { expiresAt: T0 + 5000, labels: { team: 'ops' } }),
    rule(ws.id, '10.2.0.0/16', { expiresAt: T0 + 9000, labels: { team: 'web' } }),
    rule(ws.id, '10.3.0.0/16', { expiresAt: T0 + 7000, action: 'allow', labels: { team: 'x' } }),
  ])
  const all = [...rules, ...ex]
  t.equal((await build(all, null)).expiresAt, T0 + 5000)
  t.equal((await build(all, await listOf({ selector: { team: 'web' } }))).expiresAt, T0 + 7000, 'an allow rule expiring changes the carve of every feed')
  t.equal((await build(rules, null)).expiresAt, Infinity)
  const later = await build(all, null, T0 + 5000)
  t.notMatch(body(later, 'plain', 'v4'), /10\.1\.0\.0/, 'a rule is gone at its expiry instant')
  t.match(body(later, 'plain', 'v4'), /10\.2\.0\.0\/16/)
  t.equal(later.expiresAt, T0 + 7000)
})

t.test('Last-Modified: the start of the current content run, per list, family and action', async (t) => {
  const list = await listOf({ name: 'lm', selector: { team: 'core' } })
  const a = await build(rules, list, T0 + 1000)
  t.equal(variant(a, 'plain', 'v4').lastModified, T0 + 1000)
  t.match(body(a, 'dialect_a', 'v4'), /# generated: 2025-01-01T12:00:01Z\n/)
  const same = await build(rules, list, T0 + 60_000)
  t.equal(variant(same, 'dialect_a', 'v4').lastModified, T0 + 1000, 'unchanged content keeps its time')
  t.equal(variant(same, 'dialect_a', 'v4').identity.etag, variant(a, 'dialect_a', 'v4').identity.etag, 'and so dialect_a keeps its body and ETag')
  const extra = await addRules(tmp.store, [rule(ws.id, '198.18.0.0/15', { labels: { team: 'core' } })])
  const b = await build([...rules, ...extra], list, T0 + 120_000)
  t.equal(variant(b, 'plain', 'v4').lastModified, T0 + 120_000, 'v4 changed')
  t.equal(variant(b, 'plain', 'v6').lastModified, T0 + 1000, 'v6 did not')
  t.equal(variant(b, 'nftables', 'v4').lastModified, variant(b, 'dialect_b', 'v4').lastModified, 'shared by all formats')
  const back = await build(rules, list, T0 + 180_000)
  t.equal(variant(back, 'plain', 'v4').lastModified, T0 + 180_000, 'A → B → A starts a new run')
})

t.test('ETag and Last-Modified are the same after a restart on the same data', async (t) => {
  const list = await listOf({ name: 'restart', selector: { team: 'edge' } })
  const before = await build(rules, list, T0 + 3_600_000)
  const store = await tmp.reopen()
  const reread = await store.rules.listAccessRules(ws.id, T0)
  const after = await build(reread.filter((r) => rules.some((x) => x.id === r.id)), list, T0 + 7_200_000, store)
  t.equal(after.variants.size, before.variants.size)
  for (const [key, v] of before.variants) {
    const w = after.variants.get(key)!
    t.equal(w.identity.etag, v.identity.etag, `${key} identity ETag`)
    t.equal(w.gzip.etag, v.gzip.etag, `${key} gzip ETag`)
    t.equal(w.lastModifiedHttp, v.lastModifiedHttp, `${key} Last-Modified`)
    t.same(Buffer.from(w.gzip.body), Buffer.from(v.gzip.body))
  }
})

t.test('feeds selecting the same networks share their bytes: text, compressed chunks, assembled bodies', async (t) => {
  // Enough networks for chunks of their own (a few KB each), straight into a table: no store needed.
  const many: AccessRule[] = Array.from({ length: 6000 }, (_, i) => ({
    ...rules[0]!, id: `bulk-${i}`, seq: 10_000 + i, labels: { team: 'edge' }, target: { type: 'ip', value: `10.${(i >> 8) & 255}.${i & 255}.${(i * 7) & 255}/32` },
  }))
  const table = toRuleTable([...rules, ...many])
  const lm = new LastModifiedKeeper(tmp.store.feedVersions, { timeoutMs: 2000 })
  const feed = async (name: string): Promise<FeedSnapshot> => (await buildSnapshot({ workspaceId: ws.id, workspaceName: ws.name, list: await listOf({ name, selector: { team: 'edge' } }) }, table, { tasks: inProcessTasks(geo), lastModified: lm, now: T0 })).snapshot
  const a = await feed('appliance-a')
  const b = await feed('appliance-b')
  for (const key of ['plain|v4|block|', 'plain|both|block|', 'dialect_b|v4|block|', 'nftables|v4|block|']) {
    const x = a.variants.get(key)!
    const y = b.variants.get(key)!
    t.equal(x.identity.body.buffer, y.identity.body.buffer, `${key}: one copy of the text`)
    t.equal(x.identity.body.byteOffset, y.identity.body.byteOffset)
    t.equal(x.gzip.etag, y.gzip.etag)
    t.equal(x.gzip.body, y.gzip.body, `${key}: the gzip body, assembled once for both`)
  }
  t.match(Buffer.from(variant(a, 'dialect_a', 'v4').identity.body).toString(), /^# appliance-a\n/)
  t.match(Buffer.from(variant(b, 'dialect_a', 'v4').identity.body).toString(), /^# appliance-b\n/, 'each feed its own dialect_a header')
})

t.test('a rebuild from the previous caches gives exactly the bytes of a build without them', async (t) => {
  const list = await listOf({ name: 'caches', selector: {} })
  const def: FeedDefinition = { workspaceId: ws.id, workspaceName: ws.name, list }
  const opts = { tasks: inProcessTasks(geo), lastModified: new LastModifiedKeeper(tmp.store.feedVersions, { timeoutMs: 2000 }), now: T0 }
  const first = await buildSnapshot(def, toRuleTable(rules), opts)
  const extra = await addRules(tmp.store, [rule(ws.id, '192.0.2.200/32', { labels: { team: 'ops' } }), rule(ws.id, '2001:db8:1::/48')])
  const warm = await buildSnapshot(def, toRuleTable([...rules, ...extra]), { ...opts, caches: first.caches })
  const cold = await buildSnapshot(def, toRuleTable([...rules, ...extra]), opts)
  for (const [key, v] of cold.snapshot.variants) {
    const w = warm.snapshot.variants.get(key)!
    t.same([w.identity.etag, w.gzip.etag], [v.identity.etag, v.gzip.etag], key)
    t.same(Buffer.from(w.identity.body), Buffer.from(v.identity.body))
    t.same(Buffer.from(w.gzip.body), Buffer.from(v.gzip.body))
  }
})
