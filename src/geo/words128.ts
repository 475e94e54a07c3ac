/**
 * The little 128-bit arithmetic the MMDB writer needs to cut an inclusive IPv6 range into CIDR
 * blocks, on four big-endian u32 words (w0 most significant) inside typed arrays. Comparison
 * is src/net's compare128.
 */

/**
 * For a range held as `w` = [first w0..w3, last w0..w3] (first ≤ last): the host bits of the
 * largest CIDR block that starts at `first` and ends at or before `last` — its alignment capped
 * by the range's size (the greedy step of range-to-CIDR decomposition).
 *
 * @example
 *   largestBlockBits(new Uint32Array([0x20010db8, 0, 0, 0, 0x20010db8, 0, 0, 0xff])) // 8
 */
export function largestBlockBits (w: Uint32Array): number {
  let bits = 128
  for (let k = 3; k >= 0; k--) {
    const x = w[k]!
    if (x !== 0) { bits = 32 * (3 - k) + 31 - Math.clz32(x & -x); break }
  }
  // Shrink until first + 2^bits - 1 = first | lowmask(bits) fits under last.
  for (; bits > 0; bits--) {
    let cmp = 0
    for (let k = 0; k < 4 && cmp === 0; k++) {
      const low = 32 * (3 - k) // bits below this word
      const m = bits >= low + 32 ? 0xffffffff : bits <= low ? 0 : (2 ** (bits - low)) - 1
      const end = (w[k]! | m) >>> 0
      const last = w[4 + k]!
      if (end !== last) cmp = end < last ? -1 : 1
    }
    if (cmp <= 0) break
  }
  return bits
}

/**
 * Adds 2^bits to w[0..3] in place.
 * @returns false when the sum passes ffff…ffff (w is then wrapped and meaningless)
 */
export function addPowerOfTwo (w: Uint32Array, bits: number): boolean {
  if (bits >= 128) return false
  let k = 3 - (bits >>> 5)
  let add = 2 ** (bits & 31)
  for (; k >= 0; k--) {
    const v = w[k]! + add
    w[k] = v >>> 0
    if (v <= 0xffffffff) return true
    add = 1
  }
  return false
}
