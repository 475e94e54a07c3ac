import { fileURLToPath } from 'node:url'
import t from 'tap'
import fc from 'fast-check'
import { computeNetworks, needsGeo, networksKey, shareResult, withMeta } from '../../../src/feed/render/compute-networks.js'
import { loadGeoIndex } from '../../../src/geo/load.js'
import { INTERVAL_WORDS, scanCidr } from '../../../src/net/cidr.js'
import { NetworkSet, NetworkSetBuilder } from '../../../src/net/network-set.js'
import { renderLines } from '../../../src/feed/render/text-streams.js'
import type { ComputeTask, TargetGroup, WirePrefixes } from '../../../src/pool/protocol.js'

const FIXTURES = fileURLToPath(new URL('../../fixtures/geo/maxmind', import.meta.url))
const geo = await loadGeoIndex({ countryDb: `${FIXTURES}/GeoLite2-Country-Test.mmdb`, asnDb: `${FIXTURES}/GeoLite2-ASN-Test.mmdb` })

function group (ips: string[], extra: Partial<TargetGroup> = {}): TargetGroup {
  return { confidence: 'high', severity: 'high', ips: ips.map((i) => i + '\n').join(''), asns: [], countries: [], ...extra }
}
function task (over: Partial<ComputeTask>): ComputeTask {
  return { geo: { version: 1 }, block: [], allow: [], carve: group([]), meta: 'm', ...over }
}
const lines = (p: WirePrefixes): string => Buffer.from(renderLines(p.v4, 4).bytes).toString() + Buffer.from(renderLines(p.v6, 6).bytes).toString()
const setLines = (s: NetworkSet): string => s.toLines()

t.test('ip, ASN and country targets expand, unite and coalesce', async (t) => {
  const r = computeNetworks(task({ block: [group(['81.2.69.160/28', '2001:db8::1'], { asns: [71], countries: ['SE'] })] }), geo)
  const expected = NetworkSet.parse(['81.2.69.160/28', '2001:db8::1'])
    .union(NetworkSet.fromPacked(geo.expandAsn(71)))
    .union(NetworkSet.fromPacked(geo.expandCountry('SE')))
  t.equal(lines(r.block.total), setLines(expected))
  t.ok(r.block.total.v6.length > 0)
  t.equal(r.invalid, 0)
})

t.test('deny = selected block rules minus every allow rule; allow = selected allow rules', async (t) => {
  const cases = [
    { description: 'a host carved out of a /24', block: ['192.0.2.0/24'], carve: ['192.0.2.7'], deny: NetworkSet.parse(['192.0.2.0/24']).subtract(NetworkSet.parse(['192.0.2.7'])) },
    { description: 'an allow wider than the block removes it', block: ['192.0.2.0/25'], carve: ['192.0.2.0/24'], deny: NetworkSet.empty() },
    { description: 'IPv6 carve', block: ['2001:db8::/32'], carve: ['2001:db8:8000::/33'], deny: NetworkSet.parse(['2001:db8::/33']) },
    { description: 'disjoint allow changes nothing', block: ['10.0.0.0/8'], carve: ['11.0.0.1'], deny: NetworkSet.parse(['10.0.0.0/8']) },
  ]
  for (const c of cases) {
    const r = computeNetworks(task({ block: [group(c.block)], allow: [group(['203.0.113.9'])], carve: group(c.carve) }), null)
    t.equal(lines(r.block.total), setLines(c.deny), c.description)
    t.equal(lines(r.allow.total), '203.0.113.9/32\n', `${c.description}: allow feed is the selected allow rules`)
  }
})

t.test('carving is lossless: every address of the deny feed is blocked and not allowed (random)', async () => {
  const v4 = fc.tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 8, max: 32 }))
    .map(([a, l]) => `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}/${l}`)
  await fc.assert(fc.property(fc.array(v4, { maxLength: 30 }), fc.array(v4, { maxLength: 30 }), (block, allow) => {
    const r = computeNetworks(task({ block: [group(block)], carve: group(allow) }), null)
    const expected = NetworkSet.parse(block).subtract(NetworkSet.parse(allow))
    return lines(r.block.total) === setLines(expected)
  }), { numRuns: 100 })
})

t.test('dialect_b groups: each coalesced and carved on its own; total is their union', async (t) => {
  const r = computeNetworks(task({
    block: [group(['10.0.0.0/16', '10.1.0.0/16'], { confidence: 'low' }), group(['10.0.0.0/8'], { severity: 'critical' })],
    carve: group(['10.0.0.0/24']),
  }), null)
  t.equal(r.block.groups.length, 2)
  t.equal(lines(r.block.groups[0]!), setLines(NetworkSet.parse(['10.0.0.0/15']).subtract(NetworkSet.parse(['10.0.0.0/24']))))
  t.equal(r.block.groups[0]!.confidence, 'low')
  t.equal(lines(r.block.groups[1]!), setLines(NetworkSet.parse(['10.0.0.0/8']).subtract(NetworkSet.parse(['10.0.0.0/24']))))
  t.equal(lines(r.block.total), lines(r.block.groups[1]!))
  const single = computeNetworks(task({ block: [group(['10.0.0.0/8'])] }), null)
  t.equal(single.block.groups[0]!.v4, single.block.total.v4, 'one group shares the total arrays')
})

t.test('content hash: format-independent facts only; same content, same hash', async (t) => {
  const base = computeNetworks(task({ block: [group(['192.0.2.0/25', '192.0.2.128/25', '2001:db8::/32'])] }), null)
  const same = computeNetworks(task({ block: [group(['2001:db8::/32', '192.0.2.0/24'])] }), null)
  t.same(same.block.hash, base.block.hash, 'same networks, other targets → same hash')
  const v6changed = computeNetworks(task({ block: [group(['192.0.2.0/24', '2001:db9::/32'])] }), null)
  t.equal(v6changed.block.hash.v4, base.block.hash.v4, 'v4 hash ignores v6')
  t.not(v6changed.block.hash.v6, base.block.hash.v6)
  t.not(v6changed.block.hash.both, base.block.hash.both)
  const relabelled = computeNetworks(task({ block: [group(['192.0.2.0/24', '2001:db8::/32'], { severity: 'low' })] }), null)
  t.not(relabelled.block.hash.v4, base.block.hash.v4, 'dialect_b labels are content')
  const renamed = computeNetworks(task({ meta: 'other', block: [group(['192.0.2.0/24', '2001:db8::/32'])] }), null)
  t.not(renamed.block.hash.v4, base.block.hash.v4, 'dialect_a header text is content')
  t.not(base.allow.hash.v4, base.block.hash.v4)
})

t.test('unreadable targets are left out and counted', async (t) => {
  const r = computeNetworks(task({ block: [group(['192.0.2.1', 'not-an-ip', '300.0.0.0/8'])] }), null)
  t.equal(lines(r.block.total), '192.0.2.1/32\n')
  t.equal(r.invalid, 2)
  t.equal(computeNetworks(task({ block: [group([], { asns: [71] })] }), null).invalid, 1, 'geo targets without an index')
})

t.test('needsGeo', async (t) => {
  t.notOk(needsGeo(task({ block: [group(['192.0.2.1'])] })))
  t.ok(needsGeo(task({ block: [group([], { countries: ['SE'] })] })))
  t.ok(needsGeo(task({ carve: group([], { asns: [3] }) })))
})

t.test('the one-pass IPv4 reader agrees with scanCidr on any line: same networks, same unreadable count', async (t) => {
  // Lines near the canonical form, so that the fast path and every way out of it are taken.
  const octet = fc.oneof(fc.integer({ min: 0, max: 255 }).map(String), fc.constantFrom('256', '999', '01', '00', '007', '', 'x', '1000'))
  const length = fc.oneof(fc.integer({ min: 0, max: 32 }).map(String), fc.constantFrom('33', '99', '100', '08', '00', '', '1x', '032'))
  const v4 = fc.tuple(octet, octet, octet, octet, fc.option(length)).map(([a, b, c, d, l]) => `${a}.${b}.${c}.${d}` + (l === null ? '' : `/${l}`))
  const other = fc.constantFrom('2001:db8::/32', '::ffff:192.0.2.1', '::ffff:192.0.2.0/120', '1.2.3', '1.2.3.4.5', ' 1.2.3.4', '1.2.3.4 ', '1.2.3.4/', '', 'x', '1.2.3.4/24\r')
  await fc.assert(fc.property(fc.array(fc.oneof(v4, other), { maxLength: 40 }), (lines) => {
    const r = computeNetworks(task({ block: [{ confidence: 'high', severity: 'high', ips: lines.join('\n') + (lines.length > 0 ? '\n' : ''), asns: [], countries: [] }] }), null)
    const b = new NetworkSetBuilder()
    const interval = new Uint32Array(INTERVAL_WORDS)
    let invalid = 0
    for (const l of lines) {
      if (l.length === 0) continue
      const family = scanCidr(l, 0, l.length, interval)
      if (family === 0) invalid++
      else b.addScanned(family, interval)
    }
    const expected = b.build().prefixes()
    return r.invalid === invalid && Buffer.from(r.block.total.v4.buffer).equals(Buffer.from(expected.v4.buffer)) && Buffer.from(r.block.total.v6.buffer).equals(Buffer.from(expected.v6.buffer))
  }), { numRuns: 300 })
  // A last line without its newline reads the same.
  t.equal(lines(computeNetworks(task({ block: [{ confidence: 'high', severity: 'high', ips: '10.0.0.1\n192.0.2.0/24', asns: [], countries: [] }] }), null).block.total), '10.0.0.1/32\n192.0.2.0/24\n')
})

t.test('geo expansions are kept per index and key set: any order of the same keys, the same networks', async (t) => {
  const a = computeNetworks(task({ block: [group([], { countries: ['SE', 'GB'], asns: [71, 3] })] }), geo)
  const b = computeNetworks(task({ block: [group([], { countries: ['GB', 'SE', 'GB'], asns: [3, 71] })] }), geo)
  t.same(Array.from(b.block.total.v4), Array.from(a.block.total.v4))
  t.same(Array.from(b.block.total.v6), Array.from(a.block.total.v6))
  const fresh = NetworkSet.fromPacked(geo.expandCountry('SE')).union(NetworkSet.fromPacked(geo.expandCountry('GB')))
    .union(NetworkSet.fromPacked(geo.expandAsn(71))).union(NetworkSet.fromPacked(geo.expandAsn(3)))
  t.equal(lines(a.block.total), setLines(fresh))
  const other = computeNetworks(task({ block: [group([], { countries: ['SE'] })] }), geo)
  t.equal(lines(other.block.total), setLines(NetworkSet.fromPacked(geo.expandCountry('SE'))), 'another key set is not confused with the first')
})

t.test('networksKey: everything the networks depend on, and nothing else', async (t) => {
  const base = task({ block: [group(['192.0.2.0/24'], { countries: ['SE'], asns: [71] })], carve: group(['192.0.2.7']) })
  const key = networksKey(base)
  t.equal(networksKey({ ...base, meta: 'another list name' }), key, 'the list name and description are not networks')
  t.equal(networksKey({ ...base, geo: { version: 9 } }), key, 'the geo index is the caller\'s to tell apart')
  const cases: Array<{ description: string, task: ComputeTask }> = [
    { description: 'one more IP', task: { ...base, block: [group(['192.0.2.0/24', '10.0.0.1'], { countries: ['SE'], asns: [71] })] } },
    { description: 'another country', task: { ...base, block: [group(['192.0.2.0/24'], { countries: ['GB'], asns: [71] })] } },
    { description: 'another ASN', task: { ...base, block: [group(['192.0.2.0/24'], { countries: ['SE'], asns: [72] })] } },
    { description: 'other labels', task: { ...base, block: [group(['192.0.2.0/24'], { countries: ['SE'], asns: [71], confidence: 'low' })] } },
    { description: 'another carve', task: { ...base, carve: group(['192.0.2.8']) } },
    { description: 'the block rules as allow rules', task: { ...base, block: [], allow: base.block } },
    { description: 'two groups instead of one', task: { ...base, block: [...base.block, group([])] } },
    { description: 'a country list that joins alike', task: { ...base, block: [group(['192.0.2.0/24'], { countries: ['SE,GB'], asns: [71] })] } },
  ]
  const keys = new Set([key])
  for (const c of cases) {
    const k = networksKey(c.task)
    t.notOk(keys.has(k), c.description)
    keys.add(k)
  }
})

t.test('withMeta: the same networks with the content hashes of another meta; shareResult: the same in shared memory', async (t) => {
  const input = task({ block: [group(['192.0.2.0/24', '2001:db8::/32'])], meta: 'a' })
  const r = computeNetworks(input, null)
  const other = withMeta(r, 'b')
  t.same(other.block.hash, computeNetworks({ ...input, meta: 'b' }, null).block.hash)
  t.not(other.block.hash.v4, r.block.hash.v4)
  t.equal(other.block.total.v4, r.block.total.v4, 'the arrays are not copied')
  const shared = shareResult(r)
  t.ok(shared.block.total.v4.buffer instanceof SharedArrayBuffer)
  t.same(Array.from(shared.block.total.v4), Array.from(r.block.total.v4))
  t.equal(shared.block.groups[0]!.v4, shared.block.total.v4, 'arrays used twice are shared once')
  t.same(shared.block.hash, r.block.hash)
})
