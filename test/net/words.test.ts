import t from 'tap'
import fc from 'fast-check'
import { compare128, copy128, decrement128, increment128, isSuccessor128, reaches128 } from '../../src/net/words.js'
import { bigOfWords, wordsOf } from './oracle.js'

const MAX = (1n << 128n) - 1n
/** Values near word boundaries, where carries and borrows happen. */
const value = fc.oneof(
  fc.bigInt({ min: 0n, max: MAX }),
  fc.constantFrom(0n, 1n, MAX, MAX - 1n, (1n << 32n) - 1n, 1n << 32n, (1n << 64n) - 1n, 1n << 64n, (1n << 96n) - 1n, 1n << 96n),
)
const w = (x: bigint): Uint32Array => Uint32Array.from(wordsOf(x))

t.test('compare, successor and reach agree with BigInt', async () => {
  fc.assert(fc.property(value, value, (a, b) => {
    const c = compare128(w(a), 0, w(b), 0)
    return c === (a < b ? -1 : a > b ? 1 : 0) &&
      isSuccessor128(w(a), 0, w(b), 0) === (b === a + 1n) &&
      reaches128(w(a), 0, w(b), 0) === (b <= a + 1n)
  }), { numRuns: 2000 })
  fc.assert(fc.property(value, (a) => isSuccessor128(w(a), 0, w(a + 1n > MAX ? 0n : a + 1n), 0) === (a < MAX)))
})

t.test('increment and decrement agree with BigInt, including overflow', async () => {
  fc.assert(fc.property(value, (a) => {
    const out = new Uint32Array(4)
    const ok = increment128(w(a), 0, out, 0)
    const up = ok === (a < MAX) && bigOfWords(out) === (a + 1n) % (MAX + 1n)
    if (a === 0n) return up
    decrement128(w(a), 0, out, 0)
    return up && bigOfWords(out) === a - 1n
  }), { numRuns: 2000 })
})

t.test('copy128 copies between offsets', async (t) => {
  const dst = new Uint32Array(6)
  copy128([9, 1, 2, 3, 4], 1, dst, 2)
  t.same([...dst], [0, 0, 1, 2, 3, 4])
})
