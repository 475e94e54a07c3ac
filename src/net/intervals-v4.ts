/**
 * IPv4 interval sets. A set is a Uint32Array of closed intervals `[first0, last0, first1, last1, …]`,
 * sorted, disjoint and never adjacent (`first(k+1) > last(k) + 1`), so that each set has exactly
 * one representation and set operations are linear merges. Arithmetic runs in doubles, where
 * `last + 1` for 255.255.255.255 is 2^32 and does not wrap.
 *
 * CIDR prefixes appear only at the edges: the builder turns them into intervals, and
 * `decomposeV4` decomposes each interval into its minimal list of aligned blocks (the greedy
 * largest-aligned-block walk; the result is the unique minimal CIDR cover of the interval).
 */
import { sortU32Into } from './radix-sort.js'
import type { TextWriter } from './text-writer.js'

/**
 * Coalesces `n` intervals given as separate arrays of firsts and lasts, which are scratch to
 * the caller (their content is garbage afterwards).
 *
 * Sorting the two ends independently is enough for a union: at any address x, the number of
 * firsts ≤ x minus the number of lasts < x is the number of intervals holding x, whichever first
 * goes with whichever last. So this is two key-only radix sorts and one sweep, with no
 * permutation array to carry.
 *
 * @example
 *   coalesceV4(Uint32Array.of(5, 1), Uint32Array.of(9, 4), 2) // [1, 9]: [1,4] and [5,9] touch
 */
export function coalesceV4 (firsts: Uint32Array, lasts: Uint32Array, n: number): Uint32Array {
  if (n === 0) return new Uint32Array(0)
  // One scratch array for both sorts: firsts end up in the scratch or in place, and whichever
  // of the two is free then serves the sort of the lasts.
  const f = sortU32Into(firsts, n, new Uint32Array(n))
  const l = sortU32Into(lasts, n, f === firsts ? new Uint32Array(n) : firsts)
  // The k-th merged interval is written to f[k] and l[k]: both were read already (k ≤ i, k ≤ j).
  let m = 0
  let depth = 0
  let open = 0
  let i = 0
  let j = 0
  while (i < n) {
    // A first that is at most last + 1 continues the run: overlapping and adjacent both merge.
    if (depth === 0 || f[i]! <= l[j]! + 1) {
      if (depth === 0) open = f[i]!
      depth++
      i++
    } else {
      depth--
      if (depth === 0) { const last = l[j]!; f[m] = open; l[m] = last; m++ }
      j++
    }
  }
  const last = l[n - 1]!
  f[m] = open
  l[m] = last
  m++
  const out = new Uint32Array(2 * m)
  for (let k = 0; k < m; k++) { out[2 * k] = f[k]!; out[2 * k + 1] = l[k]! }
  return out
}

/**
 * The union of two interval sets.
 *
 * @example
 *   unionV4(Uint32Array.of(0, 4), Uint32Array.of(5, 9, 20, 20)) // [0, 9, 20, 20]
 */
export function unionV4 (a: Uint32Array, b: Uint32Array): Uint32Array {
  if (a.length === 0) return b
  if (b.length === 0) return a
  const out = new Uint32Array(a.length + b.length)
  let m = 0
  let i = 0
  let j = 0
  let first = -1
  let last = -1
  while (i < a.length || j < b.length) {
    let f: number
    let l: number
    if (j >= b.length || (i < a.length && a[i]! <= b[j]!)) {
      f = a[i]!; l = a[i + 1]!; i += 2
    } else {
      f = b[j]!; l = b[j + 1]!; j += 2
    }
    if (first >= 0 && f <= last + 1) {
      if (l > last) last = l
    } else {
      if (first >= 0) { out[m++] = first; out[m++] = last }
      first = f
      last = l
    }
  }
  out[m++] = first
  out[m++] = last
  return out.slice(0, m)
}

/**
 * `a` minus `b`: every address of `a` not in `b`.
 *
 * @example
 *   subtractV4(Uint32Array.of(0, 9), Uint32Array.of(3, 4)) // [0, 2, 5, 9]
 */
export function subtractV4 (a: Uint32Array, b: Uint32Array): Uint32Array {
  if (a.length === 0 || b.length === 0) return a
  // Each interval of b splits at most one interval of a in two, hence the bound.
  const out = new Uint32Array(a.length + b.length)
  let m = 0
  let j = 0
  for (let i = 0; i < a.length; i += 2) {
    let cur = a[i]!
    const last = a[i + 1]!
    while (j < b.length && b[j + 1]! < cur) j += 2
    let k = j
    while (k < b.length && b[k]! <= last) {
      if (b[k]! > cur) { out[m++] = cur; out[m++] = b[k]! - 1 }
      cur = b[k + 1]! + 1
      if (cur > last) break
      k += 2
    }
    if (cur <= last) { out[m++] = cur; out[m++] = last }
    // b[k] may reach into the next interval of a: resume there, not after it.
    j = k
  }
  return out.slice(0, m)
}

/**
 * Index (in intervals) of the interval holding `x`, or -1.
 *
 * @example
 *   findV4(Uint32Array.of(0, 2, 10, 20), 15) // 1
 */
export function findV4 (iv: Uint32Array, x: number): number {
  let lo = 0
  let hi = (iv.length >> 1) - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    if (iv[2 * mid]! > x) hi = mid - 1
    else if (iv[2 * mid + 1]! < x) lo = mid + 1
    else return mid
  }
  return -1
}

/** Size of the largest aligned block starting at `a` that ends at or before `b`, as log2. */
function blockBits (a: number, b: number): number {
  const tz = a === 0 ? 32 : 31 - Math.clz32(a & -a)
  const span = b - a + 1
  const fit = span >= 4294967296 ? 32 : 31 - Math.clz32(span)
  return tz < fit ? tz : fit
}

/**
 * Decomposes every interval into its minimal CIDR cover: `[addr, len]` pairs to `out` and/or
 * `addr/len\n` lines to `writer` when given. Returns the number of prefixes either way.
 *
 * @example
 *   const out = new Uint32Array(4)
 *   decomposeV4(new Uint32Array([0x0a000000, 0x0a000002]), out, null) // 2; out = [0x0a000000, 31, 0x0a000002, 32]
 */
export function decomposeV4 (iv: Uint32Array, out: Uint32Array | null, writer: TextWriter | null): number {
  let count = 0
  for (let k = 0; k < iv.length; k += 2) {
    let a = iv[k]!
    const b = iv[k + 1]!
    while (a <= b) {
      const bits = blockBits(a, b)
      if (out !== null) { out[2 * count] = a; out[2 * count + 1] = 32 - bits }
      if (writer !== null) writer.writeCidr4(a, 32 - bits)
      count++
      a += 2 ** bits
    }
  }
  return count
}
