/**
 * The delta protocol's answers (docs/deltas.md), one version apart on a real server: 304 for the
 * current version (either encoding, quoted or not, If-None-Match first), a delta for a known base,
 * the full feed with `X-Feed-Delta: full` for everything a delta cannot be had for, HEAD, the
 * answer formats' full bodies, and the bad inputs as a table of 400s naming the parameter.
 */
import t from 'tap'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { startRealServer } from '../helpers/real-server.js'
import { rawRequest, type RawResponse } from '../helpers/feed-server.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-delta-'))
const s = await startRealServer(dir, { THREATFEED_FEED_REBUILD_MS: '0' })
t.teardown(async () => {
  await s.server.stop()
  rmSync(dir, { recursive: true, force: true })
})
const auth = { authorization: `Bearer ${s.key}` }
const get = (query: string, headers: Record<string, string> = {}, method = 'GET'): Promise<RawResponse> =>
  rawRequest(s.base, `/v1/threat/feeds?${query}`, { method, headers: { ...auth, ...headers } })
const sha = (b: Buffer | string): string => `sha-256=:${createHash('sha256').update(b).digest('base64')}:`

async function until (query: string, check: (r: RawResponse) => boolean): Promise<RawResponse> {
  for (let i = 0; i < 100; i++) {
    const r = await get(query)
    if (r.status === 200 && check(r)) return r
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`${query}: not reached`)
}

const hosts = Array.from({ length: 40 }, (_, i) => `45.1.${i}.7`)
await s.postBlocks(hosts)
const v0 = await until('format=plain&family=v4', (r) => r.body.toString().split('\n').length === 41)
const v0gz = await get('format=plain&family=v4', { 'accept-encoding': 'gzip' })
const v0nft = await get('format=nftables&family=v4')
const v0md5 = await get('format=plain&family=v4&checksum=md5')
const v0json = await get('format=json')
await s.postBlocks(['45.2.0.1', '45.1.0.9'])
const v1 = await until('format=plain&family=v4', (r) => r.headers.etag !== v0.headers.etag && r.body.includes('45.2.0.1/32'))
const unquoted = (etag: string): string => etag.slice(1, -1)

t.test('since names a known base: a delta with the new version\'s validators', async (t) => {
  const d = await get(`format=plain&family=v4&since=${encodeURIComponent(v0.headers.etag!)}`)
  t.equal(d.status, 200)
  t.equal(d.body.toString(), '+45.1.0.9/32\n+45.2.0.1/32\n', 'additions in feed order')
  t.equal(d.headers['x-feed-delta'], 'delta')
  t.equal(d.headers['x-feed-delta-base'], v0.headers.etag)
  t.equal(d.headers['x-feed-delta-removed'], '0')
  t.equal(d.headers['x-feed-delta-added'], '2')
  t.equal(d.headers.etag, v1.headers.etag, 'the ETag of the version the client holds after applying it')
  t.equal(d.headers['last-modified'], v1.headers['last-modified'])
  t.equal(d.headers['content-digest'], sha(d.body))
  t.equal(d.headers['x-feed-result-digest'], sha(v1.body))
  t.equal(d.headers['content-type'], 'text/plain; charset=utf-8')

  const unq = await get(`format=plain&family=v4&since=${unquoted(v0.headers.etag!)}`)
  t.equal(unq.body.toString(), d.body.toString(), 'the base without its quotes')
  const fromGzipTag = await get(`format=plain&family=v4&since=${encodeURIComponent(v0gz.headers.etag!)}`)
  t.equal(fromGzipTag.body.toString(), d.body.toString(), 'the base by its gzip tag')

  const gz = await get(`format=plain&family=v4&since=${encodeURIComponent(v0.headers.etag!)}`, { 'accept-encoding': 'gzip' })
  t.equal(gz.headers['content-encoding'], 'gzip')
  t.equal(gunzipSync(gz.body).toString(), d.body.toString())
  t.equal(gz.headers['content-digest'], sha(gz.body), 'Content-Digest of the bytes sent')
  t.equal(gz.headers.etag, (await get('format=plain&family=v4', { 'accept-encoding': 'gzip' })).headers.etag, 'the gzip tag of the new version')
  t.equal(gz.headers['x-feed-result-digest'], sha(v1.body), 'the digest of the identity body, whatever the encoding')

  const head = await get(`format=plain&family=v4&since=${encodeURIComponent(v0.headers.etag!)}`, {}, 'HEAD')
  t.equal(head.status, 200)
  t.equal(head.body.length, 0)
  t.equal(head.headers['content-length'], String(d.body.length))
  t.equal(head.headers['x-feed-delta-added'], '2')

  const nft = await get(`format=nftables&family=v4&since=${encodeURIComponent(v0nft.headers.etag!)}&table=fw&set=bad_hosts`)
  t.equal(nft.body.toString(), 'add element inet fw bad_hosts { 45.1.0.9/32, 45.2.0.1/32 }\n')
  const json = await get(`format=json&since=${encodeURIComponent(v0json.headers.etag!)}`)
  t.same(JSON.parse(json.body.toString()), { deleted: [], new: ['45.1.0.9/32', '45.2.0.1/32'] })
  t.equal(json.headers['content-type'], 'application/json')
  const ipset = await get(`format=ipset&family=v4&since=${encodeURIComponent(v0json.headers.etag!)}`)
  t.equal(ipset.headers['x-feed-delta'], 'full', 'a json tag for an ipset answer: another variant')
})

t.test('304 when since or If-None-Match names the current version', async (t) => {
  const cases: Array<{ description: string, query: string, headers?: Record<string, string> }> = [
    { description: 'since = current, quoted', query: `since=${encodeURIComponent(v1.headers.etag!)}` },
    { description: 'since = current, unquoted', query: `since=${unquoted(v1.headers.etag!)}` },
    { description: 'since = current gzip tag, identity asked', query: `since=${encodeURIComponent((await get('format=plain&family=v4', { 'accept-encoding': 'gzip' })).headers.etag!)}` },
    { description: 'If-None-Match current wins over an old since', query: `since=${encodeURIComponent(v0.headers.etag!)}`, headers: { 'if-none-match': v1.headers.etag! } },
  ]
  for (const c of cases) {
    const r = await get(`format=plain&family=v4&${c.query}`, c.headers)
    t.equal(r.status, 304, c.description)
    t.equal(r.headers.etag, v1.headers.etag, c.description)
    t.equal(r.body.length, 0)
  }
  const json = await get(`format=json&since=${encodeURIComponent((await get('format=json')).headers.etag!)}`)
  t.equal(json.status, 304, 'an answer format\'s own tag')
})

t.test('the full feed, marked, whenever a delta cannot be had', async (t) => {
  const otherNode = `"plain.v4.block.identity.${'A'.repeat(43)}"`
  const cases: Array<{ description: string, query: string, full: string }> = [
    { description: 'a tag this node never sent', query: `format=plain&family=v4&since=${encodeURIComponent(otherNode)}`, full: 'format=plain&family=v4' },
    { description: 'a tag of another variant (nftables base, plain asked)', query: `format=plain&family=v4&since=${encodeURIComponent(v0nft.headers.etag!)}`, full: 'format=plain&family=v4' },
    { description: 'a tag of another family', query: `format=plain&family=v6&since=${encodeURIComponent(v0.headers.etag!)}`, full: 'format=plain&family=v6' },
    { description: 'a weak tag', query: `format=plain&family=v4&since=${encodeURIComponent('W/' + v0.headers.etag!)}`, full: 'format=plain&family=v4' },
    { description: 'not one of our tags at all', query: 'format=plain&family=v4&since=xyz', full: 'format=plain&family=v4' },
    { description: 'dialect_a has no delta form', query: `format=dialect_a&since=${encodeURIComponent(v0.headers.etag!)}`, full: 'format=dialect_a' },
    { description: 'dialect_b has no delta form', query: `format=dialect_b&since=${encodeURIComponent(v0.headers.etag!)}`, full: 'format=dialect_b' },
    { description: 'checksum=md5: the checksum of the full body', query: `format=plain&family=v4&checksum=md5&since=${encodeURIComponent(v0md5.headers.etag!)}`, full: 'format=plain&family=v4&checksum=md5' },
  ]
  for (const c of cases) {
    const r = await get(c.query)
    const full = await get(c.full)
    t.equal(r.status, 200, c.description)
    t.equal(r.headers['x-feed-delta'], 'full', c.description)
    t.equal(r.body.toString(), full.body.toString(), c.description)
    t.equal(r.headers.etag, full.headers.etag, c.description)
  }
  const md5Current = await get(`format=plain&family=v4&checksum=md5&since=${encodeURIComponent((await get('format=plain&family=v4&checksum=md5')).headers.etag!)}`)
  t.equal(md5Current.status, 304, 'checksum=md5 with since = its current tag: 304')
})

t.test('the answer formats\' full bodies', async (t) => {
  const json = await get('format=json&family=v4')
  t.same(JSON.parse(json.body.toString()), { deleted: [], new: v1.body.toString().trim().split('\n') })
  t.match(json.headers.etag, /^"json\.v4\.block\.identity\./)
  t.equal(json.headers['content-digest'], sha(json.body))
  const ipset = await get('format=ipset&family=v4&set=edge')
  const lines = ipset.body.toString().split('\n')
  t.same(lines.slice(0, 3), ['create edge hash:net family inet maxelem 262144 -exist', 'create edge-new hash:net family inet maxelem 262144 -exist', 'flush edge-new'])
  t.same(lines.slice(3, -3), v1.body.toString().trim().split('\n').map((n) => `add edge-new ${n}`))
  t.same(lines.slice(-3), ['swap edge-new edge', 'destroy edge-new', ''])
  const gz = await get('format=ipset&family=v4&set=edge', { 'accept-encoding': 'gzip' })
  t.equal(gunzipSync(gz.body).toString(), ipset.body.toString())
  t.match(gz.headers.etag, /^"ipset\.v4\.block\.gzip\./)
  const again = await get('format=ipset&family=v4&set=edge', { 'if-none-match': ipset.headers.etag! })
  t.equal(again.status, 304)
})

t.test('bad inputs: 400 with the feed error body naming the parameter', async (t) => {
  const setRule = 'a letter, then up to 26 letters, digits, "_", "." or "-"'
  const sinceRule = 'an ETag of this feed, with or without its quotes'
  const cases: Array<{ description: string, query: string, error: string, details: Record<string, unknown> }> = [
    { description: 'empty since', query: 'since=', error: 'unsupported since: ""', details: { parameter: 'since', value: '', expected: sinceRule } },
    { description: 'since with a space', query: 'since=a%20b', error: 'unsupported since: "a b"', details: { parameter: 'since', value: 'a b', expected: sinceRule } },
    { description: 'since with a quote inside', query: 'since=%22a%22b%22', error: 'unsupported since: "\\"a\\"b\\""', details: { parameter: 'since', value: '"a"b"', expected: sinceRule } },
    { description: 'since with a control character', query: 'since=a%01', error: 'unsupported since: "a\\u0001"', details: { parameter: 'since', value: 'a\u0001', expected: sinceRule } },
    { description: 'since longer than a tag', query: `since=${'a'.repeat(300)}`, error: `unsupported since: "${'a'.repeat(64)}…"`, details: { parameter: 'since', value: 'a'.repeat(64) + '…', expected: sinceRule } },
    { description: 'repeated since', query: 'since=a&since=b', error: 'unsupported repeated parameter: since', details: { parameter: 'since', expected: sinceRule } },
    { description: 'bad set name', query: 'format=ipset&family=v4&set=1x', error: 'unsupported set: "1x"', details: { parameter: 'set', value: '1x', expected: setRule } },
    { description: 'set name too long', query: `format=nftables&family=v4&set=${'s'.repeat(28)}`, error: `unsupported set: "${'s'.repeat(28)}"`, details: { parameter: 'set', value: 's'.repeat(28), expected: setRule } },
    { description: 'bad table name', query: 'format=nftables&family=v4&table=a;b', error: 'unsupported table: "a;b"', details: { parameter: 'table', value: 'a;b', expected: setRule } },
    { description: 'ipset with both families', query: 'format=ipset', error: 'unsupported family "both" with format ipset: an ipset set holds one family', details: { parameter: 'family', value: 'both', supported: ['v4', 'v6'] } },
    { description: 'json with a checksum', query: 'format=json&checksum=md5', error: 'unsupported checksum with format json: a checksum is of a plain, dialect or nftables body', details: { parameter: 'checksum', value: 'md5', supported: [] } },
  ]
  for (const c of cases) {
    const r = await get(c.query)
    t.equal(r.status, 400, c.description)
    t.same(JSON.parse(r.body.toString()), { success: false, error: c.error, details: c.details }, c.description)
  }
  const anonymous = await rawRequest(s.base, `/v1/threat/feeds?since=${encodeURIComponent(v0.headers.etag!)}`)
  t.equal(anonymous.status, 401, 'authentication comes before any delta')
})

t.test('deltas one and two versions behind are rendered in the pool once per build, not per request', async (t) => {
  const renders = async (where: 'pool' | 'request'): Promise<number> => {
    const text = await (await fetch(`${s.base}/metrics`)).text()
    const line = text.split('\n').find((l) => l.startsWith(`threatfeed_feed_delta_renders_total{where="${where}"}`))
    return line === undefined ? 0 : Number(line.split(' ').pop())
  }
  const v1nft = await get('format=nftables&family=v4')
  const pool0 = await renders('pool')
  await s.postBlocks(['45.9.9.9'])
  const v2 = await until('format=plain&family=v4', (r) => r.body.includes('45.9.9.9/32'))
  for (let i = 0; i < 100 && await renders('pool') === pool0; i++) await new Promise((resolve) => setTimeout(resolve, 50))
  t.ok(await renders('pool') > pool0, 'the build rendered deltas in the pool')
  const request0 = await renders('request')
  const v2nft = await get('format=nftables&family=v4')
  const asked = [
    { query: `format=plain&family=v4&since=${encodeURIComponent(v1.headers.etag!)}`, added: '1', full: v2 },
    { query: `format=plain&family=v4&since=${encodeURIComponent(v0.headers.etag!)}`, added: '3', full: v2 },
    { query: `format=plain&family=v4&since=${encodeURIComponent(v0gz.headers.etag!)}`, added: '3', full: v2 },
    { query: `format=nftables&family=v4&since=${encodeURIComponent(v1nft.headers.etag!)}`, added: '1', full: v2nft },
  ]
  for (const a of asked) {
    for (const gzip of [false, true]) {
      const r = await get(a.query, gzip ? { 'accept-encoding': 'gzip' } : {})
      t.equal(r.headers['x-feed-delta'], 'delta', a.query)
      t.equal(r.headers['x-feed-delta-added'], a.added, a.query)
      t.equal(r.headers['x-feed-result-digest'], sha(a.full.body), a.query)
    }
  }
  t.equal(await renders('request'), request0, 'no request rendered a delta one or two versions behind')
  const named = await get(`format=nftables&family=v4&table=fw&since=${encodeURIComponent(v1nft.headers.etag!)}`)
  t.equal(named.body.toString(), 'add element inet fw blocklist_v4 { 45.9.9.9/32 }\n')
  t.equal(await renders('request'), request0 + 1, 'other names: rendered once for the request…')
  await get(`format=nftables&family=v4&table=fw&since=${encodeURIComponent(v1nft.headers.etag!)}`)
  t.equal(await renders('request'), request0 + 1, '…and kept for the next one')
})
