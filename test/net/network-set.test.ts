import t from 'tap'
import fc from 'fast-check'
import { Netmask } from 'netmask'
import { NetworkSet, NetworkSetBuilder } from '../../src/net/network-set.js'
import {
  BITS, bigOfWords, coalesce, covers, decompose, formatNet, formatV4, formatV6, maxOf, netArb, subtract, v4Addr, v6Addr, wordsOf,
  type Fam, type Net,
} from './oracle.js'

/** Adds an oracle network through one of the builder's entry points, chosen by `via`. */
function add (b: NetworkSetBuilder, n: Net, via: number): void {
  const len = prefixLengthOf(n)
  if (via % 3 === 0) {
    // Text: a CIDR when the interval is one, else a range.
    const fmt = n.family === 4 ? formatV4 : formatV6
    const text = len >= 0 ? `${fmt(n.first)}/${len}` : `${fmt(n.first)}-${fmt(n.last)}`
    if (!b.addText(text)) throw new Error(`addText refused ${text}`)
  } else if (n.family === 4) {
    if (len >= 0 && via % 3 === 1) b.addV4(Number(n.first), len)
    else b.addRangeV4(Number(n.first), Number(n.last))
  } else if (len >= 0 && via % 3 === 1) {
    const w = wordsOf(n.first)
    b.addV6(w[0]!, w[1]!, w[2]!, w[3]!, len)
  } else {
    b.addRangeV6(wordsOf(n.first), wordsOf(n.last))
  }
}

/** The prefix length when [first, last] is exactly one CIDR, else -1. */
function prefixLengthOf (n: Net): number {
  const size = n.last - n.first + 1n
  if ((size & (size - 1n)) !== 0n || n.first % size !== 0n) return -1
  return BITS[n.family] - (size.toString(2).length - 1)
}

function build (nets: readonly Net[], via = 0): NetworkSet {
  const b = new NetworkSetBuilder(4, 4)
  nets.forEach((n, i) => add(b, n, via + i))
  return b.build()
}

/** The set's intervals as oracle networks. */
function netsOf (s: NetworkSet): Net[] {
  const { v4, v6 } = s.intervals()
  const out: Net[] = []
  for (let k = 0; k < v4.length; k += 2) out.push({ family: 4, first: BigInt(v4[k]!), last: BigInt(v4[k + 1]!) })
  for (let k = 0; k < v6.length; k += 8) out.push({ family: 6, first: bigOfWords(v6, k), last: bigOfWords(v6, k + 4) })
  return out
}

function expectedLines (set: readonly Net[], family: 'v4' | 'v6' | 'both' = 'both'): string {
  return decompose(set)
    .filter((p) => family === 'both' || (family === 'v4') === (p.family === 4))
    .map((p) => formatNet(p.family, p.first, p.len) + '\n').join('')
}

const nets = fc.array(netArb, { maxLength: 40 })

function same (a: unknown, b: unknown): boolean {
  return JSON.stringify(a, bigints) === JSON.stringify(b, bigints)
}

t.test('build: the coalesced set covers exactly the input, minimal, sorted (BigInt oracle)', async () => {
  fc.assert(fc.property(nets, fc.nat(2), (input, via) => {
    const s = build(input, via)
    const expected = coalesce(input)
    return same(netsOf(s), expected) &&
      s.toLines() === expectedLines(expected) &&
      s.toLines('v4') === expectedLines(expected, 'v4') &&
      s.toLines('v6') === expectedLines(expected, 'v6') &&
      s.count() === decompose(expected).length &&
      s.count('v4') + s.count('v6') === s.count() &&
      s.addressCount() === expected.reduce((sum, n) => sum + n.last - n.first + 1n, 0n)
  }), { numRuns: 200 })
})

t.test('prefixes are maximal, disjoint, sorted and exactly cover the input', async () => {
  fc.assert(fc.property(nets, (input) => {
    const expected = coalesce(input)
    const p = build(input).prefixes()
    const list: { family: Fam, first: bigint, last: bigint, len: number }[] = []
    for (let k = 0; k < p.v4.length; k += 2) {
      const len = p.v4[k + 1]!
      const first = BigInt(p.v4[k]!)
      list.push({ family: 4, first, last: first + (1n << BigInt(32 - len)) - 1n, len })
    }
    for (let k = 0; k < p.v6.length; k += 5) {
      const len = p.v6[k + 4]!
      const first = bigOfWords(p.v6, k)
      list.push({ family: 6, first, last: first + (1n << BigInt(128 - len)) - 1n, len })
    }
    for (let i = 0; i < list.length; i++) {
      const x = list[i]!
      const bits = BigInt(BITS[x.family] - x.len)
      if (x.first % (1n << bits) !== 0n) return false // aligned
      if (x.len > 0) {
        // Maximal: the parent prefix is not inside the set, so no two outputs could merge.
        const parentSize = 1n << (bits + 1n)
        const parent = x.first - (x.first % parentSize)
        if (covers(expected, x.family, parent, parent + parentSize - 1n)) return false
      }
      const prev = list[i - 1]
      if (prev !== undefined && prev.family === x.family && prev.last >= x.first) return false // sorted, disjoint
      if (prev !== undefined && prev.family === 6 && x.family === 4) return false // IPv4 first
    }
    // Exact cover: merging the prefixes gives back the coalesced input.
    return same(coalesce(list.map(({ family, first, last }) => ({ family, first, last }))), expected)
  }), { numRuns: 200 })
})

function bigints (_k: string, v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString() : v
}

t.test('union and subtract agree with the oracle', async () => {
  fc.assert(fc.property(nets, nets, (a, b) => {
    const sa = build(a)
    const sb = build(b, 1)
    return same(netsOf(sa.union(sb)), coalesce([...a, ...b])) &&
      same(netsOf(sb.union(sa)), coalesce([...a, ...b])) &&
      same(netsOf(sa.subtract(sb)), subtract(a, b)) &&
      same(netsOf(sb.subtract(sa)), subtract(b, a)) &&
      sa.subtract(sa).isEmpty() &&
      sa.union(sa).equals(sa)
  }), { numRuns: 200 })
})

t.test('has() agrees with the oracle for addresses and CIDRs', async () => {
  fc.assert(fc.property(nets, v4Addr, v6Addr, fc.integer({ min: 16, max: 32 }), (input, a4, a6, len) => {
    const s = build(input)
    const set = coalesce(input)
    const host = 1n << BigInt(32 - len)
    const first = a4 - (a4 % host)
    return s.has(formatV4(a4)) === covers(set, 4, a4, a4) &&
      s.has(formatV6(a6)) === covers(set, 6, a6, a6) &&
      s.has(`${formatV4(a4)}/${len}`) === covers(set, 4, first, first + host - 1n) &&
      s.has(`::ffff:${formatV4(a4)}`) === covers(set, 4, a4, a4)
  }), { numRuns: 200 })
})

t.test('netmask, as an independent IPv4 oracle, agrees with every block of the decomposition', async () => {
  fc.assert(fc.property(fc.array(netArb.filter((n) => n.family === 4), { maxLength: 30 }), (input) => {
    const s = build(input)
    const { v4 } = s.prefixes('v4')
    let total = 0
    let prevLast = -2
    for (let k = 0; k < v4.length; k += 2) {
      const text = `${formatV4(BigInt(v4[k]!))}/${v4[k + 1]!}`
      const block = new Netmask(text)
      // netmask normalizes to the network: equal base means the prefix is aligned.
      if (`${block.base}/${block.bitmask}` !== text) return false
      if (!s.has(block.first) || !s.has(block.last) || !s.has(text)) return false
      // Two neighbouring blocks of the same size that form an aligned pair would be one block.
      const prev = k > 0 ? new Netmask(`${formatV4(BigInt(v4[k - 2]!))}/${v4[k - 1]!}`) : undefined
      if (prev !== undefined && prevLast + 1 === block.netLong && prev.bitmask === block.bitmask && (prev.netLong / prev.size) % 2 === 0) return false
      prevLast = block.netLong + block.size - 1
      total += block.size
    }
    return BigInt(total) === s.addressCount('v4')
  }), { numRuns: 200 })
})

t.test('PackedPrefixes and interval arrays round-trip', async () => {
  fc.assert(fc.property(nets, (input) => {
    const s = build(input)
    const { v4, v6 } = s.intervals()
    return NetworkSet.fromPacked(s.prefixes()).equals(s) &&
      NetworkSet.fromIntervals(v4.slice(), v6.slice()).equals(s) &&
      NetworkSet.fromPacked(s.prefixes('v4')).equals(s.subtract(NetworkSet.parse(['::/0'])))
  }), { numRuns: 200 })
})

const lines = (s: NetworkSet, family?: 'v4' | 'v6' | 'both'): string[] => s.toLines(family).split('\n').slice(0, -1)

t.test('coalescing examples', async (t) => {
  const cases: { description: string, input: string[], expected: string[] }[] = [
    { description: 'adjacent halves merge', input: ['10.0.0.0/25', '10.0.0.128/25'], expected: ['10.0.0.0/24'] },
    { description: 'overlap and duplicates', input: ['10.0.0.0/24', '10.0.0.7', '10.0.0.0/24', '10.0.0.0/26'], expected: ['10.0.0.0/24'] },
    { description: 'unaligned neighbours do not merge', input: ['10.0.1.0/24', '10.0.2.0/24'], expected: ['10.0.1.0/24', '10.0.2.0/24'] },
    { description: 'range to CIDRs', input: ['10.0.0.1-10.0.0.6'], expected: ['10.0.0.1/32', '10.0.0.2/31', '10.0.0.4/31', '10.0.0.6/32'] },
    { description: 'IPv4 before IPv6, then address order', input: ['2001:db8::/32', '192.0.2.0/24', '::1', '10.0.0.0/8'], expected: ['10.0.0.0/8', '192.0.2.0/24', '::1/128', '2001:db8::/32'] },
    { description: 'the whole IPv4 space', input: ['0.0.0.0/1', '128.0.0.0/1'], expected: ['0.0.0.0/0'] },
    { description: 'the top address', input: ['255.255.255.255', '255.255.255.254'], expected: ['255.255.255.254/31'] },
    { description: 'the whole IPv6 space', input: ['::/1', '8000::/1'], expected: ['::/0'] },
    { description: 'top of IPv6', input: ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'], expected: ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127'] },
    { description: 'mapped joins IPv4', input: ['10.0.0.0/25', '::ffff:10.0.0.128/121'], expected: ['10.0.0.0/24'] },
    { description: 'host bits ignored', input: ['10.9.9.9/8'], expected: ['10.0.0.0/8'] },
  ]
  for (const c of cases) t.same(lines(NetworkSet.parse(c.input)), c.expected, c.description)
})

t.test('subtract examples (the allow-list carve)', async (t) => {
  const cases: { description: string, a: string[], b: string[], expected: string[] }[] = [
    { description: 'carve a host out of a /30', a: ['10.0.0.0/30'], b: ['10.0.0.1'], expected: ['10.0.0.0/32', '10.0.0.2/31'] },
    { description: 'carve everything', a: ['10.0.0.0/8'], b: ['0.0.0.0/0'], expected: [] },
    { description: 'disjoint carve is a no-op', a: ['10.0.0.0/8'], b: ['11.0.0.0/8', '2001:db8::/32'], expected: ['10.0.0.0/8'] },
    { description: 'carve the top address', a: ['255.255.255.252/30'], b: ['255.255.255.255'], expected: ['255.255.255.252/31', '255.255.255.254/32'] },
    { description: 'carve address zero', a: ['0.0.0.0/30'], b: ['0.0.0.0'], expected: ['0.0.0.1/32', '0.0.0.2/31'] },
    { description: 'one carve spanning two intervals', a: ['10.0.0.0/24', '10.0.2.0/24'], b: ['10.0.0.128-10.0.2.127'], expected: ['10.0.0.0/25', '10.0.2.128/25'] },
    { description: 'IPv6 carve', a: ['2001:db8::/126'], b: ['2001:db8::2'], expected: ['2001:db8::/127', '2001:db8::3/128'] },
    { description: 'IPv6 carve at the top', a: ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126'], b: ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'], expected: ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/127', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/128'] },
  ]
  for (const c of cases) t.same(lines(NetworkSet.parse(c.a).subtract(NetworkSet.parse(c.b))), c.expected, c.description)
})

t.test('builder and set API edges', async (t) => {
  const b = new NetworkSetBuilder()
  t.throws(() => b.addV4(0, 33), RangeError)
  t.throws(() => b.addV4(0, 1.5), RangeError)
  t.throws(() => b.addV6(0, 0, 0, 0, 129), RangeError)
  t.throws(() => b.addRangeV4(5, 4), RangeError)
  t.throws(() => b.addRangeV4(0, 2 ** 32), RangeError)
  t.throws(() => b.addRangeV6([0, 0, 0, 5], [0, 0, 0, 4]), RangeError)
  t.notOk(b.addText('10.0.0.0/33'))
  t.notOk(b.addText('10.0.0.9-10.0.0.1'))
  t.equal(b.size, 0)
  b.addV4(0x0a000001, 8).addRangeV6([0, 0, 0, 0, 1], [9, 0, 0, 0, 2], 1, 1)
  t.equal(b.size, 2)
  t.same(lines(b.build()), ['10.0.0.0/8', '::1/128', '::2/128'])
  t.equal(b.size, 0, 'build empties the builder')
  t.ok(b.build().isEmpty())
  t.ok(NetworkSet.empty().isEmpty())
  t.equal(NetworkSet.empty().toLines(), '')
  t.equal(NetworkSet.empty().count(), 0)
  t.throws(() => NetworkSet.parse(['nope']), RangeError)
  t.throws(() => NetworkSet.fromIntervals(new Uint32Array([5, 4]), new Uint32Array(0)), RangeError)
  t.throws(() => NetworkSet.fromIntervals(new Uint32Array([1, 2, 3, 4]), new Uint32Array(0)), RangeError, 'adjacent intervals are not canonical')
  t.throws(() => NetworkSet.fromIntervals(new Uint32Array([1]), new Uint32Array(0)), RangeError)
  t.throws(() => NetworkSet.fromIntervals(new Uint32Array(0), new Uint32Array([0, 0, 0, 1, 0, 0, 0, 0])), RangeError)
  const s = NetworkSet.parse(['10.0.0.0/8', '2001:db8::/32'])
  t.notOk(s.has('not an ip'))
  t.ok(s.isEmpty('v6') === false && s.isEmpty('v4') === false)
  t.equal(s.addressCount('v4'), 1n << 24n)
  t.equal(s.addressCount('v6'), 1n << 96n)
  t.same(s.prefixes('v6').v4.length, 0)
  t.equal(Buffer.from(s.toBytes('v6')).toString(), '2001:db8::/32\n')
  t.notOk(s.equals(NetworkSet.parse(['10.0.0.0/8'])))
  t.equal(maxOf(4), 0xffffffffn)
})

t.test('large clustered input: a million-scale shape in miniature (radix paths, growth)', async (t) => {
  const b = new NetworkSetBuilder(16, 16)
  const oracle: Net[] = []
  let x = 12345
  const next = (): number => { x = (x * 1103515245 + 12345) >>> 0; return x }
  for (let i = 0; i < 30_000; i++) {
    const a = (0x0a000000 + (next() & 0xfffff)) >>> 0
    b.addRangeV4(a, a)
    oracle.push({ family: 4, first: BigInt(a), last: BigInt(a) })
    const w = [0x20010db8, 0, next() & 0xff, next() & 0xffff]
    b.addV6(w[0]!, w[1]!, w[2]!, w[3]!, 128)
    oracle.push({ family: 6, first: bigOfWords(w), last: bigOfWords(w) })
  }
  const s = b.build()
  t.same(netsOf(s), coalesce(oracle))
})

t.test('writeText: the same bytes as toBytes, in chunks that each fit, whatever the chunk size', async (t) => {
  const b = new NetworkSetBuilder(16, 16)
  let x = 777
  const next = (): number => { x = (x * 1103515245 + 12345) >>> 0; return x }
  for (let i = 0; i < 3000; i++) b.addV4(next(), 8 + next() % 25)
  for (let i = 0; i < 1000; i++) b.addV6(0x20010db8, next(), next(), next(), 33 + next() % 96)
  b.addRangeV4(1, 0xfffffffe) // one interval of 62 prefixes
  const set = b.build()
  for (const family of ['v4', 'v6', 'both'] as const) {
    const whole = Buffer.from(set.toBytes(family))
    for (const chunkBytes of [1, 64, 4096, 1 << 20]) {
      const chunks: Buffer[] = []
      await set.writeText(family, async (bytes) => { chunks.push(Buffer.from(bytes)) }, chunkBytes)
      t.ok(Buffer.concat(chunks).equals(whole), `${family}, chunks of ${chunkBytes}`)
      t.notOk(chunks.some((c) => c.length === 0), 'no empty chunk')
    }
  }
})
