/**
 * Radix sorts for the interval builder: u32 keys (IPv4) and 4-word keys (IPv6, most significant
 * word first). A comparison sort of a million keys is ~20 million compares through a callback
 * (V8's native sort of a Uint32Array took 160 ms here for 1M keys); these are a few linear passes
 * over typed arrays.
 *
 * The limit is memory, not arithmetic (measured on the 2-core bench machine, 1M keys): scattering
 * into 65536 buckets misses the cache on nearly every write, so wide digits lose even though they
 * need fewer passes. u32 keys use LSD with 11-bit digits (3 passes, 2048 buckets; 20–45 ms vs
 * 26–100 ms for 8-bit and 47–53 ms for 16-bit). 128-bit keys use MSD with 8-bit digits: one pass
 * splits a million records into buckets that fit the cache and the rest of the work happens
 * there; LSD on 16 bytes of key moved every record 8–16 times (300–600 ms).
 */

const SMALL = 32
const LSD_BITS = 11
const LSD_RADIX = 1 << LSD_BITS
const LSD_MASK = LSD_RADIX - 1
const LSD_PASSES = 3 // ⌈32 / 11⌉

/**
 * Sorts `a[0, n)` ascending in place.
 *
 * @example
 *   sortU32(new Uint32Array([3, 1, 2]), 3) // [1, 2, 3]
 */
export function sortU32 (a: Uint32Array, n: number): void {
  const sorted = sortU32Into(a, n, n <= SMALL ? a : new Uint32Array(n))
  if (sorted !== a) a.set(sorted.subarray(0, n))
}

/**
 * Sorts `a[0, n)` ascending using `scratch` (at least n long) and returns the array that holds
 * the result, `a` or `scratch`: the passes ping-pong between the two, and not copying back
 * saves touching n more words. The other array's content is garbage afterwards.
 *
 * @example
 *   sortU32Into(Uint32Array.of(3, 1, 2), 3, new Uint32Array(3)) // [1, 2, 3], one of the two arrays
 */
export function sortU32Into (a: Uint32Array, n: number, scratch: Uint32Array): Uint32Array {
  if (n <= SMALL) {
    insertionSortU32(a, n)
    return a
  }
  const counts = new Uint32Array(LSD_PASSES * LSD_RADIX)
  for (let i = 0; i < n; i++) {
    const v = a[i]!
    counts[v & LSD_MASK]!++
    counts[LSD_RADIX + ((v >>> LSD_BITS) & LSD_MASK)]!++
    counts[2 * LSD_RADIX + (v >>> (2 * LSD_BITS))]!++
  }
  let src: Uint32Array = a
  let dst: Uint32Array = scratch
  for (let d = 0; d < LSD_PASSES; d++) {
    const base = d * LSD_RADIX
    // A pass whose digit is the same for every key would not move anything.
    if (!prefixSums(counts, base, LSD_RADIX, n)) continue
    const shift = d * LSD_BITS
    for (let i = 0; i < n; i++) {
      const v = src[i]!
      dst[counts[base + ((v >>> shift) & LSD_MASK)]!++] = v
    }
    const t = src; src = dst; dst = t
  }
  return src
}

/**
 * Turns the histogram at `counts[base, base + radix)` into start offsets.
 * @returns false when one bucket holds all `n` keys
 */
function prefixSums (counts: Uint32Array, base: number, radix: number, n: number): boolean {
  let sum = 0
  for (let k = base; k < base + radix; k++) {
    const c = counts[k]!
    if (c === n) return false
    counts[k] = sum
    sum += c
  }
  return true
}

const DIGITS = 16 // bytes of a 128-bit key
/** Below this many records a bucket is insertion-sorted: cheaper than three 256-entry loops. */
const LEAF = 48
/** Bucket bounds per digit level: 257 entries each, so a recursion never clobbers its parent's. */
const bounds = new Uint32Array(DIGITS * 257)
const cursor = new Uint32Array(256)

/**
 * Sorts `n` records of four u32 words, `a[4i .. 4i+3]`, lexicographically (word 0 first).
 *
 * @example
 *   sortWords4(new Uint32Array([0, 0, 0, 2, 0, 0, 0, 1]), 2) // [0, 0, 0, 1, 0, 0, 0, 2]
 */
export function sortWords4 (a: Uint32Array, n: number): void {
  if (n <= SMALL) {
    insertionSortWords4(a, 0, n)
    return
  }
  msd(a, new Uint32Array(4 * n), 0, n, 0, true)
}

/**
 * Sorts records [lo, hi) of `data` by key bytes `digit..15`. Scatters ping-pong between the two
 * arrays; `wantInData` says in which one the caller needs the sorted records.
 */
function msd (data: Uint32Array, other: Uint32Array, lo: number, hi: number, digit: number, wantInData: boolean): void {
  const n = hi - lo
  if (n <= LEAF) {
    insertionSortWords4(data, lo, hi)
    if (!wantInData) copyRecords(data, other, lo, hi)
    return
  }
  // Skip digits every record shares (common prefixes: a feed's networks cluster in a few /32s).
  let base = 0
  let word = 0
  let shift = 0
  for (;; digit++) {
    if (digit === DIGITS) {
      if (!wantInData) copyRecords(data, other, lo, hi)
      return
    }
    base = digit * 257
    word = digit >>> 2
    shift = 24 - ((digit & 3) << 3)
    bounds.fill(0, base, base + 257)
    for (let i = lo; i < hi; i++) bounds[base + 1 + ((data[4 * i + word]! >>> shift) & 255)]!++
    let trivial = false
    for (let b = 1; b <= 256; b++) {
      if (bounds[base + b] === n) { trivial = true; break }
    }
    if (!trivial) break
  }
  for (let b = 1; b <= 256; b++) bounds[base + b]! += bounds[base + b - 1]!
  for (let b = 0; b < 256; b++) cursor[b] = lo + bounds[base + b]!
  for (let i = lo; i < hi; i++) {
    const r = 4 * i
    const o = 4 * cursor[(data[r + word]! >>> shift) & 255]!++
    other[o] = data[r]!
    other[o + 1] = data[r + 1]!
    other[o + 2] = data[r + 2]!
    other[o + 3] = data[r + 3]!
  }
  for (let b = 0; b < 256; b++) {
    const s = lo + bounds[base + b]!
    const e = lo + bounds[base + b + 1]!
    if (e > s) msd(other, data, s, e, digit + 1, !wantInData)
  }
}

/** A plain loop: most leaves hold one or two records, where a subarray() view would cost more than the copy. */
function copyRecords (from: Uint32Array, to: Uint32Array, lo: number, hi: number): void {
  for (let k = 4 * lo; k < 4 * hi; k++) to[k] = from[k]!
}

function insertionSortU32 (a: Uint32Array, n: number): void {
  for (let i = 1; i < n; i++) {
    const v = a[i]!
    let j = i - 1
    while (j >= 0 && a[j]! > v) { a[j + 1] = a[j]!; j-- }
    a[j + 1] = v
  }
}

function insertionSortWords4 (a: Uint32Array, lo: number, hi: number): void {
  for (let i = lo + 1; i < hi; i++) {
    const w0 = a[4 * i]!; const w1 = a[4 * i + 1]!; const w2 = a[4 * i + 2]!; const w3 = a[4 * i + 3]!
    let j = i - 1
    while (j >= lo && greater(a, 4 * j, w0, w1, w2, w3)) {
      const o = 4 * j
      a[o + 4] = a[o]!; a[o + 5] = a[o + 1]!; a[o + 6] = a[o + 2]!; a[o + 7] = a[o + 3]!
      j--
    }
    const o = 4 * j + 4
    a[o] = w0; a[o + 1] = w1; a[o + 2] = w2; a[o + 3] = w3
  }
}

function greater (a: Uint32Array, o: number, w0: number, w1: number, w2: number, w3: number): boolean {
  if (a[o] !== w0) return a[o]! > w0
  if (a[o + 1] !== w1) return a[o + 1]! > w1
  if (a[o + 2] !== w2) return a[o + 2]! > w2
  return a[o + 3]! > w3
}
