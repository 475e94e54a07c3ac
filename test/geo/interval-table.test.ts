import t from 'tap'
import fc from 'fast-check'
import { findKey, IntervalTableBuilder, keyIntervals, unionIntervals } from '../../src/geo/interval-table.js'
import { NetworkSet, NetworkSetBuilder } from '../../src/net/network-set.js'

type Leaf = [addr: number, len: number, key: number]

/**
 * Disjoint prefixes in address order, each tagged with a key — what a tree walk yields. Runs of
 * neighbouring /24s of one key are mixed in so that joining gets exercised.
 */
const leavesArb = fc.tuple(
  fc.array(fc.tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 32 }), fc.integer({ min: 1, max: 4 })), { maxLength: 60 }),
  fc.array(fc.tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 4 })), { maxLength: 4 }),
).map(([nets, runs]) => {
  const all: Leaf[] = [
    ...nets.map(([a, len, key]): Leaf => [len === 0 ? 0 : (a & (0xffffffff << (32 - len))) >>> 0, len, key]),
    ...runs.flatMap(([base, n, key]) => Array.from({ length: n }, (_, i): Leaf => [((base << 16) + i * 256) >>> 0, 24, i % 3 === 0 ? key : 1 + (key % 4)])),
  ]
  all.sort((x, y) => x[0] - y[0] || x[1] - y[1])
  const out: Leaf[] = []
  let end = -1
  for (const l of all) {
    if (l[0] <= end) continue
    out.push(l)
    end = l[0] + 2 ** (32 - l[1]) - 1
  }
  return out
})

function setOf (leaves: readonly Leaf[]): NetworkSet {
  const b = new NetworkSetBuilder()
  for (const [a, len] of leaves) b.addV4(a, len)
  return b.build()
}

t.test('one key, and any union of keys, is exactly the NetworkSet of their networks (property)', async (t) => {
  fc.assert(fc.property(leavesArb, fc.subarray([1, 2, 3, 4]), (leaves, chosen) => {
    const b = new IntervalTableBuilder(4)
    for (const [a, len, key] of leaves) b.addV4(b.idOf(key * 1000), a, len)
    const table = b.build()
    for (const key of [1, 2, 3, 4]) {
      const r = findKey(table, key * 1000)
      const mine = leaves.filter((l) => l[2] === key)
      if (r < 0) { if (mine.length > 0) throw new Error(`key ${key} lost`); continue }
      const got = keyIntervals(table, r)
      if (Array.from(got.v4).join() !== Array.from(setOf(mine).intervals().v4).join()) throw new Error(`key ${key}: ${got.v4}`)
    }
    const ranks = chosen.map((k) => findKey(table, k * 1000)).filter((r) => r >= 0)
    const union = unionIntervals(table, ranks)
    const want = setOf(leaves.filter((l) => chosen.includes(l[2])))
    // fromIntervals re-checks the invariant: sorted, disjoint, never adjacent.
    return NetworkSet.fromIntervals(union.v4, union.v6).equals(want)
  }), { numRuns: 500 })
  t.pass()
})

t.test('IPv6: touching prefixes join across word boundaries, other keys cut them (property)', async (t) => {
  const prefix = fc.tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 1, max: 128 }), fc.integer({ min: 1, max: 3 }))
  fc.assert(fc.property(fc.array(prefix, { maxLength: 40 }), (raw) => {
    // Disjoint sorted prefixes from (w0, w3, len): via NetworkSet's minimal cover of each, then
    // dropping overlaps between different ones.
    const leaves: { w: Uint32Array, len: number, key: number }[] = []
    for (const [a, b, len, key] of raw) {
      const p = new NetworkSetBuilder().addV6(a, 0, 0, b, len).build().prefixes('v6').v6
      leaves.push({ w: p.slice(0, 4), len: p[4]!, key })
    }
    const cmp = (x: Uint32Array, y: Uint32Array): number => { for (let k = 0; k < 4; k++) if (x[k] !== y[k]) return x[k]! < y[k]! ? -1 : 1; return 0 }
    leaves.sort((x, y) => cmp(x.w, y.w) || x.len - y.len)
    const kept: typeof leaves = []
    for (const l of leaves) {
      const prev = kept.at(-1)
      if (prev !== undefined) {
        const prevSet = new NetworkSetBuilder().addV6(prev.w[0]!, prev.w[1]!, prev.w[2]!, prev.w[3]!, prev.len).build()
        const mine = new NetworkSetBuilder().addV6(l.w[0]!, l.w[1]!, l.w[2]!, l.w[3]!, l.len).build()
        if (!prevSet.union(mine).subtract(prevSet).equals(mine)) continue // overlap
      }
      kept.push(l)
    }
    const b = new IntervalTableBuilder()
    for (const l of kept) b.addV6(b.idOf(l.key), l.w, l.len)
    const table = b.build()
    for (const key of [1, 2, 3]) {
      const mine = kept.filter((l) => l.key === key)
      const r = findKey(table, key)
      if (mine.length === 0) { if (r >= 0) return false; continue }
      const want = new NetworkSetBuilder()
      for (const l of mine) want.addV6(l.w[0]!, l.w[1]!, l.w[2]!, l.w[3]!, l.len)
      if (Array.from(keyIntervals(table, r).v6).join() !== Array.from(want.build().intervals().v6).join()) return false
    }
    const all = new NetworkSetBuilder()
    for (const l of kept) all.addV6(l.w[0]!, l.w[1]!, l.w[2]!, l.w[3]!, l.len)
    const u = unionIntervals(table, [0, 1, 2].filter((r) => r < table.keys.length))
    return NetworkSet.fromIntervals(u.v4, u.v6).equals(all.build())
  }), { numRuns: 300 })
  t.pass()
})

t.test('layout: one interval array in address order, members per key, join bits', async (t) => {
  const b = new IntervalTableBuilder()
  const w = (w0: number, w3: number): Uint32Array => new Uint32Array([w0, 0, 0, w3])
  const big = b.idOf(70000)
  const small = b.idOf(5)
  b.addV6(big, w(0x20010db8, 0), 127) // ::0-::1
  b.addV6(big, w(0x20010db8, 2), 127) // ::2-::3, joins the previous: same key
  b.addV6(small, w(0x20010db8, 4), 126) // ::4-::7, touches, other key
  b.addV6(big, w(0x20010db8, 16), 124) // ::10-::1f, a gap before it
  b.addV4(small, 0x0a000000, 8)
  b.addV4(small, 0x0b000000, 8)
  const table = b.build()
  t.same(Array.from(table.keys), [5, 70000])
  t.same(Array.from(table.v6), [
    0x20010db8, 0, 0, 0, 0x20010db8, 0, 0, 3,
    0x20010db8, 0, 0, 4, 0x20010db8, 0, 0, 7,
    0x20010db8, 0, 0, 16, 0x20010db8, 0, 0, 31,
  ])
  t.same(Array.from(table.v6Joins), [0b010], 'interval 1 starts where interval 0 ends')
  t.same(Array.from(table.v6Members), [1, 0, 2], 'AS5 owns interval 1; AS70000 owns 0 and 2')
  t.same(Array.from(table.v6MemberStart), [0, 1, 3])
  t.same(Array.from(table.v4), [0x0a000000, 0x0bffffff], '10/8 and 11/8 of one key join')
  t.same(Array.from(unionIntervals(table, [0, 1]).v6), [0x20010db8, 0, 0, 0, 0x20010db8, 0, 0, 7, 0x20010db8, 0, 0, 16, 0x20010db8, 0, 0, 31], 'joined across keys by the join bit')
  t.equal(findKey(table, 6), -1)
  t.ok(Object.values(table).every((a) => a.buffer instanceof SharedArrayBuffer))
})
