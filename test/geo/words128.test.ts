import t from 'tap'
import fc from 'fast-check'
import { compare128 } from '../../src/net/words.js'
import { addPowerOfTwo, largestBlockBits } from '../../src/geo/words128.js'

const big = (w: ArrayLike<number>, o = 0): bigint => (BigInt(w[o]!) << 96n) | (BigInt(w[o + 1]!) << 64n) | (BigInt(w[o + 2]!) << 32n) | BigInt(w[o + 3]!)
const word = fc.integer({ min: 0, max: 0xffffffff })
const value = fc.tuple(word, word, word, word)

t.test('largestBlockBits is the greedy CIDR step, against BigInt (property)', async (t) => {
  fc.assert(fc.property(value, fc.bigInt({ min: 0n, max: 2n ** 128n - 1n }), (first, span) => {
    const f = big(first)
    const l = f + span > 2n ** 128n - 1n ? 2n ** 128n - 1n : f + span
    const w = new Uint32Array([...first, Number(l >> 96n), Number((l >> 64n) & 0xffffffffn), Number((l >> 32n) & 0xffffffffn), Number(l & 0xffffffffn)])
    const bits = largestBlockBits(w)
    const size = 1n << BigInt(bits)
    // Aligned, fits, and the next size up would not.
    return f % size === 0n && f + size - 1n <= l && (bits === 128 || f % (size * 2n) !== 0n || f + size * 2n - 1n > l)
  }), { numRuns: 2000 })
  t.pass()
})

t.test('addPowerOfTwo and compare128 against BigInt (property)', async (t) => {
  fc.assert(fc.property(value, fc.integer({ min: 0, max: 128 }), value, (a, bits, b) => {
    const w = new Uint32Array(a)
    const ok = addPowerOfTwo(w, bits)
    const sum = big(a) + (1n << BigInt(bits))
    if (ok !== sum < 2n ** 128n) return false
    if (ok && big(w) !== sum) return false
    const c = compare128(a, 0, b, 0)
    return c === (big(a) < big(b) ? -1 : big(a) > big(b) ? 1 : 0)
  }), { numRuns: 2000 })
  t.pass()
})
