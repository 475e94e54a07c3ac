/**
 * The lapse of each published network (src/feed/render/lapses.ts) against a brute-force oracle:
 * random rules over a small IPv4 and IPv6 space, each address's latest covering expiry, the
 * earliest of those over each network.
 */
import t from 'tap'
import { lapsesOf } from '../../../src/feed/render/lapses.js'
import { NetworkSetBuilder } from '../../../src/net/network-set.js'
import { formatIpv4 } from '../../../src/net/ip.js'

let seed = 7
const rand = (n: number): number => { seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0; return seed % n }

t.test('matches the oracle on random IPv4 rules', async (t) => {
  const BASE = 0x0a000000
  for (let round = 0; round < 60; round++) {
    const rules: Array<{ first: number, len: number, e: number }> = []
    const n = 1 + rand(12)
    for (let k = 0; k < n; k++) {
      const len = 24 + rand(9)
      const first = (BASE + (rand(256) & ~((1 << (32 - len)) - 1) >>> 0)) >>> 0
      rules.push({ first: (first & ~((2 ** (32 - len)) - 1)) >>> 0, len, e: rand(4) === 0 ? Infinity : 1000 + rand(50) })
    }
    const b = new NetworkSetBuilder()
    for (const r of rules) b.addRangeV4(r.first, r.first + 2 ** (32 - r.len) - 1)
    const total = b.build().prefixes()
    const lapse = lapsesOf(total, {
      ips: rules.map((r) => `${formatIpv4(r.first)}/${r.len}\n`).join(''),
      ipExpiry: Float64Array.from(rules.map((r) => r.e)),
      asns: [], asnExpiry: [], countries: [], countryExpiry: [],
    }, null)
    t.equal(lapse.length, total.v4.length / 2)
    for (let j = 0; j < total.v4.length; j += 2) {
      const first = total.v4[j]!
      const size = 2 ** (32 - total.v4[j + 1]!)
      let min = Infinity
      for (let a = first; a < first + size; a++) {
        let max = -Infinity
        for (const r of rules) if (a >= r.first && a < r.first + 2 ** (32 - r.len) && r.e > max) max = r.e
        if (max < min) min = max
      }
      if (lapse[j / 2] !== min) t.fail(`round ${round}: ${formatIpv4(first)}/${total.v4[j + 1]} lapses at ${lapse[j / 2]}, not ${min}`)
    }
  }
  t.pass('60 rounds')
})

t.test('IPv6 and both families in one array', async (t) => {
  const total = { v4: new Uint32Array([0xc0000200, 24]), v6: new Uint32Array([0x20010db8, 0, 0, 0, 32, 0x20010db9, 0, 0, 1, 128]) }
  const lapse = lapsesOf(total, {
    ips: '192.0.2.0/25\n192.0.2.128/25\n2001:db8::/33\n2001:db8:8000::/33\n2001:db8::/32\n2001:db9::1/128\n',
    ipExpiry: new Float64Array([100, 300, 50, 40, 10, Infinity]),
    asns: [], asnExpiry: [], countries: [], countryExpiry: [],
  }, null)
  t.same([...lapse], [100, 40, Infinity], 'the earliest over a network of the latest over each address')
})
