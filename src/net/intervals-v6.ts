/**
 * IPv6 interval sets: the IPv6 twin of intervals-v4.ts. A set is a Uint32Array of 8-word records
 *
 *   [f0 f1 f2 f3 | l0 l1 l2 l3]   first and last address, big-endian u32 words
 *
 * sorted, disjoint and never adjacent. Four u32 words per bound rather than BigUint64 pairs:
 * BigInt arithmetic allocates, and a u64 does not fit a double, so the merge would box every
 * comparison.
 */
import { sortWords4 } from './radix-sort.js'
import type { TextWriter } from './text-writer.js'
import { compare128, copy128, decrement128, increment128, reaches128 } from './words.js'

const RECORD = 8

/**
 * Coalesces `n` intervals given as separate 4-word arrays of firsts and lasts, which it sorts in
 * place. See coalesceV4 for why sorting the two ends independently is enough.
 *
 * @example
 *   coalesceV6(Uint32Array.of(0, 0, 0, 2), Uint32Array.of(0, 0, 0, 3), 1) // [0, 0, 0, 2, 0, 0, 0, 3]
 */
export function coalesceV6 (firsts: Uint32Array, lasts: Uint32Array, n: number): Uint32Array {
  if (n === 0) return new Uint32Array(0)
  sortWords4(firsts, n)
  sortWords4(lasts, n)
  const out = new Uint32Array(RECORD * n)
  let m = 0
  let depth = 0
  let i = 0
  let j = 0
  while (i < n) {
    if (depth === 0 || reaches128(lasts, 4 * j, firsts, 4 * i)) {
      if (depth === 0) copy128(firsts, 4 * i, out, m)
      depth++
      i++
    } else {
      depth--
      if (depth === 0) {
        copy128(lasts, 4 * j, out, m + 4)
        m += RECORD
      }
      j++
    }
  }
  copy128(lasts, 4 * (n - 1), out, m + 4)
  m += RECORD
  return out.slice(0, m)
}

/**
 * The union of two interval sets.
 *
 * @example
 *   unionV6(NetworkSet.parse(['::1']).intervals().v6, NetworkSet.parse(['::2']).intervals().v6) // ::1–::2
 */
export function unionV6 (a: Uint32Array, b: Uint32Array): Uint32Array {
  if (a.length === 0) return b
  if (b.length === 0) return a
  const out = new Uint32Array(a.length + b.length)
  let m = -RECORD // offset of the open record in out
  let i = 0
  let j = 0
  while (i < a.length || j < b.length) {
    let src: Uint32Array
    let o: number
    if (j >= b.length || (i < a.length && compare128(a, i, b, j) <= 0)) {
      src = a; o = i; i += RECORD
    } else {
      src = b; o = j; j += RECORD
    }
    if (m >= 0 && reaches128(out, m + 4, src, o)) {
      if (compare128(src, o + 4, out, m + 4) > 0) copy128(src, o + 4, out, m + 4)
    } else {
      m += RECORD
      out.set(src.subarray(o, o + RECORD), m)
    }
  }
  return out.slice(0, m + RECORD)
}

const cur = new Uint32Array(4)

/**
 * `a` minus `b`: every address of `a` not in `b`.
 *
 * @example
 *   subtractV6(NetworkSet.parse(['::/126']).intervals().v6, NetworkSet.parse(['::1']).intervals().v6) // ::0 and ::2–::3
 */
export function subtractV6 (a: Uint32Array, b: Uint32Array): Uint32Array {
  if (a.length === 0 || b.length === 0) return a
  const out = new Uint32Array(a.length + b.length)
  let m = 0
  let j = 0
  for (let i = 0; i < a.length; i += RECORD) {
    const lastAt = i + 4
    copy128(a, i, cur, 0)
    let done = false
    while (j < b.length && compare128(b, j + 4, cur, 0) < 0) j += RECORD
    let k = j
    while (k < b.length && compare128(b, k, a, lastAt) <= 0) {
      if (compare128(b, k, cur, 0) > 0) {
        copy128(cur, 0, out, m)
        decrement128(b, k, out, m + 4)
        m += RECORD
      }
      // cur = b.last + 1; past a.last (or past the top of the space) means nothing is left.
      if (!increment128(b, k + 4, cur, 0) || compare128(cur, 0, a, lastAt) > 0) { done = true; break }
      k += RECORD
    }
    if (!done) {
      copy128(cur, 0, out, m)
      copy128(a, lastAt, out, m + 4)
      m += RECORD
    }
    j = k
  }
  return out.slice(0, m)
}

/**
 * Record index of the interval holding the address `x[xo..xo+3]`, or -1.
 *
 * @example
 *   findV6(Uint32Array.of(0, 0, 0, 0, 0, 0, 0, 9), [0, 0, 0, 5], 0) // 0
 */
export function findV6 (iv: Uint32Array, x: ArrayLike<number>, xo: number): number {
  let lo = 0
  let hi = iv.length / RECORD - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    if (compare128(iv, mid * RECORD, x, xo) > 0) hi = mid - 1
    else if (compare128(iv, mid * RECORD + 4, x, xo) < 0) lo = mid + 1
    else return mid
  }
  return -1
}

const TWO32 = 4294967296
const emitWords = new Uint32Array(4)

/**
 * Decomposes every interval into its minimal CIDR cover (greedy largest aligned block, as
 * prefixesV4). Writes 5-word tuples `[w0, w1, w2, w3, len]` to `out` and/or `addr/len\n` lines to
 * `writer` when given; returns the number of prefixes either way. The 128-bit walk runs on
 * eight locals rather than array slots: it is the whole cost of rendering an IPv6 feed.
 *
 * @example
 *   decomposeV6(Uint32Array.of(0, 0, 0, 1, 0, 0, 0, 2), null, null) // 2 (::1/128, ::2/128)
 */
export function decomposeV6 (iv: Uint32Array, out: Uint32Array | null, writer: TextWriter | null): number {
  let count = 0
  let m = 0
  for (let k = 0; k < iv.length; k += RECORD) {
    let c0 = iv[k]!; let c1 = iv[k + 1]!; let c2 = iv[k + 2]!; let c3 = iv[k + 3]!
    const e0 = iv[k + 4]!; const e1 = iv[k + 5]!; const e2 = iv[k + 6]!; const e3 = iv[k + 7]!
    for (;;) {
      const tz = c3 !== 0
        ? 31 - Math.clz32(c3 & -c3)
        : c2 !== 0 ? 63 - Math.clz32(c2 & -c2) : c1 !== 0 ? 95 - Math.clz32(c1 & -c1) : c0 !== 0 ? 127 - Math.clz32(c0 & -c0) : 128
      // d = e - c + 1, the number of addresses left; its top bit is the largest block that fits.
      let d3 = e3 - c3; let d2 = e2 - c2; let d1 = e1 - c1; let d0 = e0 - c0
      if (d3 < 0) { d3 += TWO32; d2-- }
      if (d2 < 0) { d2 += TWO32; d1-- }
      if (d1 < 0) { d1 += TWO32; d0-- }
      if (++d3 === TWO32) {
        d3 = 0
        if (++d2 === TWO32) {
          d2 = 0
          if (++d1 === TWO32) { d1 = 0; d0++ }
        }
      }
      const fit = d0 === TWO32
        ? 128
        : d0 !== 0 ? 127 - Math.clz32(d0) : d1 !== 0 ? 95 - Math.clz32(d1) : d2 !== 0 ? 63 - Math.clz32(d2) : 31 - Math.clz32(d3)
      const bits = tz < fit ? tz : fit
      if (out !== null) {
        out[m] = c0; out[m + 1] = c1; out[m + 2] = c2; out[m + 3] = c3; out[m + 4] = 128 - bits
        m += 5
      }
      if (writer !== null) {
        emitWords[0] = c0; emitWords[1] = c1; emitWords[2] = c2; emitWords[3] = c3
        writer.writeCidr6(emitWords, 0, 128 - bits)
      }
      count++
      if (bits === 128) break
      // c += 2^bits; past e, or past the top of the space, ends the interval.
      const add = 2 ** (bits & 31)
      const at = bits >>> 5
      let v = c3 + (at === 0 ? add : 0)
      c3 = v >>> 0
      v = c2 + (at === 1 ? add : 0) + (v > 0xffffffff ? 1 : 0)
      c2 = v >>> 0
      v = c1 + (at === 2 ? add : 0) + (v > 0xffffffff ? 1 : 0)
      c1 = v >>> 0
      v = c0 + (at === 3 ? add : 0) + (v > 0xffffffff ? 1 : 0)
      c0 = v >>> 0
      if (v > 0xffffffff) break
      if (c0 !== e0 ? c0 > e0 : c1 !== e1 ? c1 > e1 : c2 !== e2 ? c2 > e2 : c3 > e3) break
    }
  }
  return count
}
