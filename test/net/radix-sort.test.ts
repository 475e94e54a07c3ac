import t from 'tap'
import fc from 'fast-check'
import { sortU32, sortWords4 } from '../../src/net/radix-sort.js'
import { bigOfWords } from './oracle.js'

/** Keys clustered on shared high bits, with duplicates: the trivial-digit skips and leaves. */
const u32 = fc.oneof(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 0x3ff }).map((x) => (0x0a000000 + x) >>> 0), fc.constant(0xffffffff))
const word = fc.oneof(fc.integer({ min: 0, max: 0xffffffff }), fc.constant(0), fc.constant(0x20010db8), fc.integer({ min: 0, max: 3 }))

t.test('sortU32 sorts like Array.prototype.sort, at every size class', async () => {
  fc.assert(fc.property(fc.array(u32, { maxLength: 3000 }), (keys) => {
    const a = Uint32Array.from(keys)
    sortU32(a, a.length)
    const want = [...keys].sort((x, y) => x - y)
    return want.every((x, i) => a[i] === x)
  }), { numRuns: 150 })
})

t.test('sortU32 only touches the first n keys', async (t) => {
  const a = Uint32Array.from([3, 2, 1, 0])
  sortU32(a, 3)
  t.same([...a], [1, 2, 3, 0])
})

t.test('sortWords4 sorts 128-bit records lexicographically, at every size class', async () => {
  fc.assert(fc.property(fc.array(fc.tuple(word, word, word, word), { maxLength: 3000 }), (records) => {
    const a = Uint32Array.from(records.flat())
    sortWords4(a, records.length)
    const want = records.map((r) => bigOfWords(r)).sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))
    return want.every((x, i) => bigOfWords(a, 4 * i) === x)
  }), { numRuns: 150 })
})

t.test('sortWords4 on identical records and on one varying low byte', async (t) => {
  const same = new Uint32Array(4 * 500).fill(7)
  sortWords4(same, 500)
  t.ok(same.every((x) => x === 7))
  const n = 2000
  const a = new Uint32Array(4 * n)
  for (let i = 0; i < n; i++) { a[4 * i] = 0x20010db8; a[4 * i + 3] = (n - i) & 0xff }
  sortWords4(a, n)
  let ok = true
  for (let i = 1; i < n; i++) if (a[4 * i + 3]! < a[4 * i - 1]!) ok = false
  t.ok(ok)
})
