import { fileURLToPath } from 'node:url'
import t from 'tap'
import fc from 'fast-check'
import { computeNetworks, needsGeo } from '../../../src/feed/render/compute-networks.js'
import { loadGeoIndex } from '../../../src/geo/load.js'
import { NetworkSet } from '../../../src/net/network-set.js'
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
