import { MessageChannel, Worker } from 'node:worker_threads'
import t from 'tap'
import fc from 'fast-check'
import { NetworkSet, NetworkSetBuilder } from '../../src/net/network-set.js'
import { GeoIndex, type GeoIndexData } from '../../src/geo/geo-index.js'
import { loadGeoIndexSync } from '../../src/geo/load.js'
import { maxmind } from './fixtures.js'

const index = loadGeoIndexSync({ countryDb: maxmind('GeoIP2-Country-Test.mmdb'), asnDb: maxmind('GeoLite2-ASN-Test.mmdb') })

t.test('keys, membership and expansion', async (t) => {
  const cc = index.countries()
  t.equal(cc.length, 46)
  t.same(cc, [...cc].sort(), 'countries sorted')
  t.ok(cc.every((c) => /^[A-Z]{2}$/.test(c)), 'upper-case alpha-2')
  const asns = index.asns()
  t.same(asns, [...asns].sort((a, b) => a - b), 'ASNs ascending')
  const cases: { description: string, input: () => unknown, expected: unknown }[] = [
    { description: 'hasCountry upper', input: () => index.hasCountry('GB'), expected: true },
    { description: 'hasCountry any case', input: () => index.hasCountry('gB'), expected: true },
    { description: 'hasCountry absent', input: () => index.hasCountry('ZW'), expected: false },
    { description: 'hasCountry not a code', input: () => index.hasCountry('G1'), expected: false },
    { description: 'hasCountry three letters', input: () => index.hasCountry('GBR'), expected: false },
    { description: 'hasAsn present', input: () => index.hasAsn(asns[0]!), expected: true },
    { description: 'hasAsn absent', input: () => index.hasAsn(64512), expected: false },
    { description: 'hasAsn not an integer', input: () => index.hasAsn(1.5), expected: false },
    { description: 'unknown country expands to nothing', input: () => index.expandCountry('ZW').v4.length + index.expandCountry('ZW').v6.length, expected: 0 },
    { description: 'unknown ASN expands to nothing', input: () => index.expandAsn(64512).v4.length, expected: 0 },
    { description: 'GB has IPv4', input: () => index.expandCountry('gb').v4.length > 0, expected: true },
  ]
  for (const c of cases) t.same(c.input(), c.expected, c.description)
  t.same(index.sources.map((s) => [s.kind, s.databaseType]), [['country', 'GeoIP2-Country'], ['asn', 'GeoLite2-ASN']])
  t.same(GeoIndex.empty().countries(), [])
  t.notOk(GeoIndex.empty().hasAsn(1))
})

function allArrays (d: GeoIndexData): Uint32Array[] {
  return [d.country, d.asn].flatMap((x) => Object.values(x) as Uint32Array[])
}

t.test('expandToSet is the union of the expansions (property)', async (t) => {
  const countries = index.countries()
  const asns = index.asns()
  fc.assert(fc.property(fc.subarray(countries), fc.subarray(asns), fc.boolean(), (cc, as, withUnknown) => {
    const want = new NetworkSetBuilder()
    for (const c of cc) want.addPacked(index.expandCountry(c))
    for (const a of as) want.addPacked(index.expandAsn(a))
    const got = index.expandToSet({ countries: withUnknown ? [...cc, 'ZZ', 'not'] : cc, asns: withUnknown ? [...as, 64512, 1.5] : as })
    const { v4, v6 } = got.intervals()
    return got.equals(want.build()) && !(v4.buffer instanceof SharedArrayBuffer) && !(v6.buffer instanceof SharedArrayBuffer)
  }), { numRuns: 200 })
  t.ok(index.expandToSet({}).isEmpty())
  t.ok(index.expandToSet({ countries: ['GB'] }).equals(NetworkSet.fromPacked(index.expandCountry('GB'))), 'one key')
})

t.test('toTransferable is SharedArrayBuffer-backed: posting it shares memory instead of copying', async (t) => {
  const data = index.toTransferable()
  t.ok(allArrays(data).every((a) => a.buffer instanceof SharedArrayBuffer), 'every array is over a SharedArrayBuffer')
  const { port1, port2 } = new MessageChannel()
  const received = await new Promise<GeoIndexData>((resolve) => {
    port2.once('message', resolve)
    port1.postMessage(data)
  })
  port1.close()
  const copy = GeoIndex.fromTransferable(received)
  t.same(copy.countries(), index.countries())
  t.same(Array.from(copy.expandAsn(index.asns()[0]!).v4), Array.from(index.expandAsn(index.asns()[0]!).v4))
  const v4 = data.country.v4
  const old = v4[0]!
  v4[0] = 0xdeadbeef
  t.equal(received.country.v4[0], 0xdeadbeef, 'a write on one side is seen on the other: shared, not copied')
  v4[0] = old
})

t.test('a worker thread reads the index in place', async (t) => {
  // Plain JavaScript in the worker: it only needs the typed arrays.
  const code = `
    const { parentPort } = require('node:worker_threads')
    parentPort.once('message', (d) => {
      const gb = (0x47 << 8) | 0x42
      let r = -1
      for (let i = 0; i < d.country.keys.length; i++) if (d.country.keys[i] === gb) r = i
      const v4 = []
      for (let i = d.country.v4MemberStart[r]; i < d.country.v4MemberStart[r + 1]; i++) {
        const m = d.country.v4Members[i]
        v4.push(d.country.v4[2 * m], d.country.v4[2 * m + 1])
      }
      parentPort.postMessage({ shared: d.country.v4.buffer instanceof SharedArrayBuffer, v4 })
    })`
  const w = new Worker(code, { eval: true })
  t.teardown(() => w.terminate())
  const reply = await new Promise<{ shared: boolean, v4: number[] }>((resolve, reject) => {
    w.once('message', resolve)
    w.once('error', reject)
    w.postMessage(index.toTransferable())
  })
  t.ok(reply.shared)
  t.same(reply.v4, Array.from(NetworkSet.fromPacked(index.expandCountry('GB')).intervals().v4))
})
