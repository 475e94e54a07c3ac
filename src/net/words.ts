/**
 * 128-bit arithmetic on IPv6 values stored as four big-endian u32 words inside typed arrays.
 * BigInt would be shorter but allocates per operation; these run per interval of a million-entry
 * merge. Each function takes (array, offset) pairs so values never leave their arrays.
 */

/**
 * Lexicographic comparison: -1, 0 or 1.
 *
 * @example
 *   compare128([0, 0, 0, 1], 0, [0, 0, 1, 0], 0) // -1
 */
export function compare128 (a: ArrayLike<number>, ao: number, b: ArrayLike<number>, bo: number): number {
  for (let k = 0; k < 4; k++) {
    const x = a[ao + k]!
    const y = b[bo + k]!
    if (x !== y) return x < y ? -1 : 1
  }
  return 0
}

/**
 * True when `b` ≤ `a` + 1, that is when an interval starting at `b` touches one ending at `a`.
 *
 * @example
 *   reaches128([0, 0, 0, 0xffffffff], 0, [0, 0, 1, 0], 0) // true: ::1:0:0 follows ::ffff:ffff
 */
export function reaches128 (a: ArrayLike<number>, ao: number, b: ArrayLike<number>, bo: number): boolean {
  const c = compare128(b, bo, a, ao)
  return c <= 0 || isSuccessor128(a, ao, b, bo)
}

/**
 * True when `b` = `a` + 1 (false when `a` is the largest value).
 *
 * @example
 *   isSuccessor128([0, 0, 0, 0xffffffff], 0, [0, 0, 1, 0], 0) // true
 */
export function isSuccessor128 (a: ArrayLike<number>, ao: number, b: ArrayLike<number>, bo: number): boolean {
  // a + 1 flips a's trailing one bits (whole 0xffffffff words become 0) and adds 1 to the next.
  let k = 3
  while (k >= 0 && a[ao + k] === 0xffffffff) {
    if (b[bo + k] !== 0) return false
    k--
  }
  if (k < 0) return false
  if (b[bo + k] !== a[ao + k]! + 1) return false
  for (let h = k - 1; h >= 0; h--) if (b[bo + h] !== a[ao + h]) return false
  return true
}

/**
 * Copies `src` + 1 into `dst`.
 * @returns false on overflow (src was the largest value; dst is then all zero)
 *
 * @example
 *   increment128([0, 0, 0, 0xffffffff], 0, out, 0) // true; out = [0, 0, 1, 0]
 */
export function increment128 (src: ArrayLike<number>, so: number, dst: Uint32Array, doff: number): boolean {
  let carry = 1
  for (let k = 3; k >= 0; k--) {
    const v = src[so + k]! + carry
    dst[doff + k] = v >>> 0
    carry = v > 0xffffffff ? 1 : 0
  }
  return carry === 0
}

/**
 * Copies `src` - 1 into `dst` (`src` must not be zero).
 *
 * @example
 *   decrement128([0, 0, 1, 0], 0, out, 0) // out = [0, 0, 0, 0xffffffff]
 */
export function decrement128 (src: ArrayLike<number>, so: number, dst: Uint32Array, doff: number): void {
  let borrow = 1
  for (let k = 3; k >= 0; k--) {
    const v = src[so + k]! - borrow
    dst[doff + k] = v >>> 0
    borrow = v < 0 ? 1 : 0
  }
}

/**
 * Copies four words.
 *
 * @example
 *   copy128(src, 8, dst, 0) // dst[0..3] = src[8..11]
 */
export function copy128 (src: ArrayLike<number>, so: number, dst: Uint32Array, doff: number): void {
  dst[doff] = src[so]!
  dst[doff + 1] = src[so + 1]!
  dst[doff + 2] = src[so + 2]!
  dst[doff + 3] = src[so + 3]!
}
