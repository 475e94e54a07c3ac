/**
 * Shards (`?shard=I&of=N`, README "Shards") over the real FeedService and snapshot builder:
 * - for random feeds and N in {1, 2, 3, 7, 64}, every format: the shards' union is the feed, no
 *   entry twice, each shard in the feed's order;
 * - after a random 1 % change, at least 98 % of the unchanged networks stay in their shard;
 * - each shard is a feed of its own: ETag, Last-Modified, entry count, 413 per shard, checksum,
 *   gzip, Content-Digest, 304; dialect_a gains `# shard: I/N` after SPEC 4.5's six lines;
 * - a list's stored N serves `shard=I` alone; bad combinations are 400s with details.supported;
 * - every nftables shard loads with `nft -c` into a set of its family.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { FeedService } from '../../src/feed/feed-service.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { buildGeoIndex } from '../../src/geo/load.js'
import type { AccessRuleInput } from '../../src/store/types.js'
import { bearer, rawRequest, startFeedServer, syncLists, type RawResponse } from '../helpers/feed-server.js'

const geo = buildGeoIndex({})
let service: FeedService | null = null
const server = await startFeedServer(async (store, ctx) => {
  service = new FeedService({ store, pool: { ...inProcessTasks(geo), setGeo: () => {} }, config: { feedRebuildMs: 0, pollMs: ctx.config.pollMs }, log: ctx.log, geo })
  await service.start()
  return service
})
const tmp = mkdtempSync(join(tmpdir(), 'tf-shards-'))
t.teardown(async () => {
  await service?.stop()
  await server.stop()
  rmSync(tmp, { recursive: true, force: true })
})
const ws = server.workspace.id
const auth = bearer(server.key)

let seed = 2026
const rand = (): number => { seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0; return seed }
function randomTarget (): string {
  const a = rand()
  if (a % 10 === 0) return `2001:db8:${(rand() & 0xffff).toString(16)}::${(rand() & 0xffff).toString(16)}/128`
  return `${(a >>> 24) % 200 + 11}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}/32`
}
function rule (value: string, feed: string, confidence: 'low' | 'high' | null = null): AccessRuleInput {
  return { kind: 'access_rule', workspaceId: ws, ruleRef: null, labels: { feed }, reason: null, expiresAt: null, seq: 0, target: { type: 'ip', value }, action: 'block', name: null, confidence, severity: null }
}

/** A list of `n` random networks, some with a confidence of their own (two dialect_b groups). */
async function randomList (name: string, n: number, defaults: Record<string, unknown> = {}): Promise<{ id: string, targets: string[] }> {
  const targets = [...new Set(Array.from({ length: n }, randomTarget))]
  for (const [i, v] of targets.entries()) await server.store.rules.upsertAccessRule(rule(v, name, i % 7 === 0 ? 'low' : null))
  const list = await server.store.lists.create({ workspaceId: ws, name, description: `random ${n}`, defaults, selector: { feed: name } })
  await syncLists(server)
  return { id: list.id, targets }
}

async function get (path: string, headers: Record<string, string> = {}): Promise<RawResponse> {
  return rawRequest(server.base, path, { headers: { ...auth, ...headers } })
}

/** The entries of a body: lines (dialect_a without its header), rows, or nftables elements. */
function entriesOf (format: string, body: string): string[] {
  if (format === 'nftables') return body === '' ? [] : body.replace(/^elements = \{ /, '').replace(/ \}\n$/, '').split(', ')
  return body.split('\n').filter((l) => l !== '' && !l.startsWith('#'))
}

const VARIANTS = [
  { format: 'plain', family: 'both' },
  { format: 'dialect_a', family: 'both' },
  { format: 'dialect_b', family: 'both' },
  { format: 'nftables', family: 'v4' },
  { format: 'nftables', family: 'v6' },
]

// Every rule is written before any feed is served: in-process builds run on this thread, and a
// poll that sees rules move rebuilds every feed in use.
const feedA = await randomList('random-a', 1500)
const feedB = await randomList('random-b', 400)
const capped = await randomList('capped', 300, { maxEntries: 100 })
const stored = await randomList('stored', 200, { shards: 4 })

t.test('the shards of a variant partition it exactly, in its order, for N in {1, 2, 3, 7, 64}', async (t) => {
  for (const feed of [feedA, feedB]) {
    for (const of of [1, 2, 3, 7, 64]) {
      for (const { format, family } of VARIANTS) {
        const q = `format=${format}&family=${family}`
        const whole = await get(`/v1/threat/feeds/${feed.id}?${q}`)
        t.equal(whole.status, 200)
        const all = entriesOf(format, whole.body.toString())
        const seen = new Set<string>()
        let repeats = 0
        for (let i = 1; i <= of; i++) {
          const r = await get(`/v1/threat/feeds/${feed.id}?${q}&shard=${i}&of=${of}`)
          t.equal(r.status, 200, `${q} ${i}/${of}`)
          const part = entriesOf(format, r.body.toString())
          t.equal(r.headers['x-feed-entry-count'], String(part.length), `${q} ${i}/${of}: its own entry count`)
          const inPart = new Set(part)
          t.same(part, all.filter((e) => inPart.has(e)), `${q} ${i}/${of}: the feed's entries in the feed's order`)
          for (const e of part) {
            if (seen.has(e)) repeats++
            seen.add(e)
          }
        }
        t.equal(repeats, 0, `${q} of ${of}: no entry in two shards`)
        t.same([...seen].sort(), [...all].sort(), `${q} of ${of}: the union is the feed`)
      }
    }
  }
})

t.test('after a random 1 % change, at least 98 % of the unchanged networks stay in their shard', async (t) => {
  const of = 7
  const shardMap = async (): Promise<Map<string, number>> => {
    const m = new Map<string, number>()
    for (let i = 1; i <= of; i++) {
      for (const e of entriesOf('plain', (await get(`/v1/threat/feeds/${feedA.id}?shard=${i}&of=${of}`)).body.toString())) m.set(e, i)
    }
    return m
  }
  const before = await shardMap()
  const change = Math.ceil(feedA.targets.length / 200) // 0.5 % removed and 0.5 % added: 1 % of the lines
  for (const v of feedA.targets.splice(0, change)) await server.store.rules.deleteAccessByTarget(ws, { type: 'ip', value: v })
  for (let i = 0; i < change; i++) {
    const v = randomTarget()
    feedA.targets.push(v)
    await server.store.rules.upsertAccessRule(rule(v, 'random-a'))
  }
  let after = await shardMap()
  for (const deadline = Date.now() + 5000; [...before.keys()].filter((k) => !after.has(k)).length < change && Date.now() < deadline;) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    after = await shardMap()
  }
  const unchanged = [...before.keys()].filter((k) => after.has(k))
  t.ok(unchanged.length >= before.size - change, 'the removed networks left')
  const stayed = unchanged.filter((k) => before.get(k) === after.get(k)).length
  t.ok(stayed / unchanged.length >= 0.98, `${stayed} of ${unchanged.length} stayed in their shard`)
})

t.test('a shard is a feed of its own: ETag, Last-Modified, count, checksum, gzip, digest, 304', async (t) => {
  const whole = await get(`/v1/threat/feeds/${feedB.id}?format=dialect_a`)
  const etags = new Set([whole.headers.etag])
  for (let i = 1; i <= 3; i++) {
    const path = `/v1/threat/feeds/${feedB.id}?format=dialect_a&shard=${i}&of=3`
    const r = await get(path)
    t.equal(r.status, 200)
    const lines = r.body.toString().split('\n')
    t.match(lines.slice(0, 7), ['# random-b', '# random 400', '# action: block', '# family: both', /^# generated: \S+Z$/, `# entries: ${r.headers['x-feed-entry-count']}`, `# shard: ${i}/3`], 'six SPEC lines, then the shard line')
    t.notOk(lines[7]!.startsWith('#'))
    etags.add(r.headers.etag)
    t.ok(r.headers['last-modified'])
    t.equal(r.headers['content-digest'], `sha-256=:${createHash('sha256').update(r.body).digest('base64')}:`)
    const md5 = await get(`${path}&checksum=md5`)
    t.equal(md5.body.toString(), createHash('md5').update(r.body).digest('hex'), 'checksum of the shard')
    const gz = await get(path, { 'accept-encoding': 'gzip' })
    t.same(gunzipSync(gz.body), r.body, 'gzip of the shard')
    t.not(gz.headers.etag, r.headers.etag)
    const again = await get(path, { 'if-none-match': r.headers.etag! })
    t.equal(again.status, 304, '304 on the shard\'s tag')
    const other = await get(`/v1/threat/feeds/${feedB.id}?format=dialect_a&shard=${i % 3 + 1}&of=3`, { 'if-none-match': r.headers.etag! })
    t.equal(other.status, 200, 'another shard\'s tag does not match')
  }
  t.equal(etags.size, 4, 'every shard has its own tag')
  const unsharded = await get(`/v1/threat/feeds/${feedB.id}?format=dialect_a`)
  t.notMatch(unsharded.body.toString(), /# shard:/, 'unsharded bodies are unchanged')
})

t.test('the entry cap holds per shard: 413 for the feed, 200 for shards that fit', async (t) => {
  const feed = capped
  const whole = await get(`/v1/threat/feeds/${feed.id}`)
  t.equal(whole.status, 413)
  let total = 0
  for (let i = 1; i <= 8; i++) {
    const r = await get(`/v1/threat/feeds/${feed.id}?shard=${i}&of=8`)
    t.equal(r.status, 200, `shard ${i}/8 fits`)
    t.equal(r.headers['x-feed-entry-limit'], '100')
    total += Number(r.headers['x-feed-entry-count'])
  }
  t.equal(String(total), whole.headers['x-feed-entry-count'])
  const one = await get(`/v1/threat/feeds/${feed.id}?shard=1&of=1`)
  t.equal(one.status, 413, 'one shard of one holds the whole feed: over the cap')
  t.same(JSON.parse(one.body.toString()).details.limit, 100)
})

t.test('a stored shard count serves shard=I alone', async (t) => {
  const feed = stored
  const alone = await get(`/v1/threat/feeds/${feed.id}?shard=2`)
  const explicit = await get(`/v1/threat/feeds/${feed.id}?shard=2&of=4`)
  t.equal(alone.status, 200)
  t.same(alone.body, explicit.body)
  t.equal(alone.headers.etag, explicit.headers.etag)
  const other = await get(`/v1/threat/feeds/${feed.id}?shard=2&of=5`)
  t.equal(other.status, 200, 'an explicit of overrides the stored one')
  t.not(other.headers.etag, explicit.headers.etag)
})

t.test('bad shard parameters: 400 with details.supported', async (t) => {
  const range = (n: number): string[] => Array.from({ length: n }, (_, i) => String(i + 1))
  const cases: Array<{ description: string, path: string, parameter: string, supported: string[] }> = [
    { description: 'shard without of, no stored N', path: `/v1/threat/feeds?shard=1`, parameter: 'of', supported: range(64) },
    { description: 'of alone', path: `/v1/threat/feeds?of=4`, parameter: 'shard', supported: range(4) },
    { description: 'of alone on a list with a stored N', path: `/v1/threat/feeds/${stored.id}?of=4`, parameter: 'shard', supported: range(4) },
    { description: 'shard 0', path: '/v1/threat/feeds?shard=0&of=4', parameter: 'shard', supported: range(64) },
    { description: 'of 0', path: '/v1/threat/feeds?shard=1&of=0', parameter: 'of', supported: range(64) },
    { description: 'of 65', path: '/v1/threat/feeds?shard=1&of=65', parameter: 'of', supported: range(64) },
    { description: 'shard 65', path: '/v1/threat/feeds?shard=65&of=64', parameter: 'shard', supported: range(64) },
    { description: 'shard over of', path: '/v1/threat/feeds?shard=3&of=2', parameter: 'shard', supported: range(2) },
    { description: 'shard over the stored N', path: `/v1/threat/feeds/${stored.id}?shard=5`, parameter: 'shard', supported: range(4) },
    { description: 'a leading zero', path: '/v1/threat/feeds?shard=01&of=4', parameter: 'shard', supported: range(64) },
    { description: 'not a number', path: '/v1/threat/feeds?shard=x&of=4', parameter: 'shard', supported: range(64) },
    { description: 'empty', path: '/v1/threat/feeds?shard=&of=4', parameter: 'shard', supported: range(64) },
    { description: 'repeated shard', path: '/v1/threat/feeds?shard=1&shard=2&of=4', parameter: 'shard', supported: range(64) },
    { description: 'repeated of', path: '/v1/threat/feeds?shard=1&of=4&of=4', parameter: 'of', supported: range(64) },
  ]
  for (const c of cases) {
    const r = await get(c.path)
    t.equal(r.status, 400, c.description)
    const body = JSON.parse(r.body.toString())
    t.equal(body.success, false, c.description)
    t.equal(body.details.parameter, c.parameter, c.description)
    t.same(body.details.supported, c.supported, c.description)
  }
})

const hasNft = spawnSync('sh', ['-c', 'command -v nft'], { stdio: 'ignore' }).status === 0
t.test('every nftables shard loads with nft -c where the unsharded feed does', { skip: hasNft ? false : 'nft is not installed (apt-get install nftables)' }, async (t) => {
  const check = (family: 'v4' | 'v6', body: string, name: string): number | null => {
    const elements = join(tmp, `${name}.nft`)
    writeFileSync(elements, body)
    const def = join(tmp, `${name}-set.nft`)
    writeFileSync(def, `table inet tf_shards\ndelete table inet tf_shards\ntable inet tf_shards {\n  set s {\n    type ${family === 'v4' ? 'ipv4_addr' : 'ipv6_addr'}; flags interval;\n    include "${elements}"\n  }\n}\n`)
    return spawnSync('nft', ['-c', '-f', def], { encoding: 'utf8' }).status
  }
  for (const family of ['v4', 'v6'] as const) {
    const whole = await get(`/v1/threat/feeds/${feedA.id}?format=nftables&family=${family}`)
    t.equal(check(family, whole.body.toString(), `whole-${family}`), 0, `the unsharded ${family} feed loads`)
    for (const of of [3, 7]) {
      for (let i = 1; i <= of; i++) {
        const r = await get(`/v1/threat/feeds/${feedA.id}?format=nftables&family=${family}&shard=${i}&of=${of}`)
        if (r.body.length === 0) continue // an empty shard is an empty body, as an empty feed is (DECISIONS §5)
        t.equal(check(family, r.body.toString(), `s${i}-${of}-${family}`), 0, `${family} ${i}/${of} loads`)
      }
    }
  }
})
