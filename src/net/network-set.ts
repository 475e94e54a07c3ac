/**
 * Sets of networks for millions of entries, without an object per network.
 *
 * Measured choice: sorted disjoint intervals in typed arrays, not a radix trie. Building is a
 * radix sort plus one sweep, union and subtract are linear merges, membership is a binary search,
 * and CIDRs exist only at output, by decomposing each interval. On the 1M-prefix IPv4 input of
 * bench/coalesce, a binary trie in typed arrays (two u32 child links per node) needed 9.4M nodes
 * (72 MB) and 1.4 s of CPU to insert and walk; the intervals took 90–170 ms and 16 bytes per
 * input network. The trie pays a cache miss per bit of every prefix; the sort streams.
 *
 *   NetworkSetBuilder ── add*() appends raw [first, last] pairs (any order, overlaps allowed)
 *        │ build(): sort firsts and lasts, sweep
 *        ▼
 *   NetworkSet ── v4: [f, l, f, l, …]   v6: [f0 f1 f2 f3 l0 l1 l2 l3, …]
 *        │ prefixes() / toLines() / toBytes(): greedy aligned-block decomposition
 *        ▼
 *   PackedPrefixes / CIDR text, IPv4 first, then by address (DECISIONS §5)
 */
import { FIRST, INTERVAL_WORDS, LAST, lastV4, lastV6, maskV4, maskV6, scanCidr, scanRange, type Family } from './cidr.js'
import { coalesceV4, decomposeV4, findV4, subtractV4, unionV4 } from './intervals-v4.js'
import { coalesceV6, decomposeV6, findV6, subtractV6, unionV6 } from './intervals-v6.js'
import type { PackedPrefixes } from './packed.js'
import { TextWriter } from './text-writer.js'
import { compare128, reaches128 } from './words.js'

export type FamilyFilter = 'v4' | 'v6' | 'both'

const EMPTY = new Uint32Array(0)

function checkLength (len: number, max: number): void {
  if (!Number.isInteger(len) || len < 0 || len > max) throw new RangeError(`prefix length ${len} is out of range 0..${max}`)
}

/**
 * Collects networks in any order, overlapping or not, then coalesces them in one go.
 *
 * @example
 *   const b = new NetworkSetBuilder()
 *   b.addText('10.0.0.0/25'); b.addText('10.0.0.128-10.0.0.255'); b.addText('::ffff:10.0.1.0/120')
 *   b.build().toLines() // '10.0.0.0/23\n'
 */
export class NetworkSetBuilder {
  #f4: Uint32Array
  #l4: Uint32Array
  #n4: number
  #f6: Uint32Array
  #l6: Uint32Array
  #n6: number
  readonly #scratch: Uint32Array

  constructor (capacityV4 = 1024, capacityV6 = 256) {
    this.#f4 = new Uint32Array(Math.max(16, capacityV4))
    this.#l4 = new Uint32Array(this.#f4.length)
    this.#n4 = 0
    this.#f6 = new Uint32Array(4 * Math.max(16, capacityV6))
    this.#l6 = new Uint32Array(this.#f6.length)
    this.#n6 = 0
    this.#scratch = new Uint32Array(INTERVAL_WORDS)
  }

  /** Number of networks added since the last build. */
  get size (): number { return this.#n4 + this.#n6 }

  /** Adds an IPv4 prefix; host bits of `addr` are ignored. */
  addV4 (addr: number, len: number): this {
    checkLength(len, 32)
    return this.addRangeV4((addr & maskV4(len)) >>> 0, lastV4(addr, len))
  }

  /** Adds the closed IPv4 interval [start, end] (u32 values, start ≤ end). */
  addRangeV4 (start: number, end: number): this {
    if (!(start >= 0 && start <= end && end <= 0xffffffff)) throw new RangeError(`invalid IPv4 range ${start}-${end}`)
    if (this.#n4 === this.#f4.length) {
      this.#f4 = grow(this.#f4)
      this.#l4 = grow(this.#l4)
    }
    this.#f4[this.#n4] = start
    this.#l4[this.#n4] = end
    this.#n4++
    return this
  }

  /** Adds `n` IPv4 intervals a line scanner produced (valid by construction: not checked again). */
  addScannedV4 (firsts: Uint32Array, lasts: Uint32Array, n: number): void {
    while (this.#n4 + n > this.#f4.length) {
      this.#f4 = grow(this.#f4)
      this.#l4 = grow(this.#l4)
    }
    this.#f4.set(firsts.subarray(0, n), this.#n4)
    this.#l4.set(lasts.subarray(0, n), this.#n4)
    this.#n4 += n
  }

  /**
   * Adds an IPv6 prefix given as four big-endian u32 words; host bits are ignored. Numbers are
   * taken as given: unlike addText, ::ffff:0:0/96 is not turned into IPv4 here (geo data keeps
   * IPv4 in its own tree and skips the aliases, DECISIONS §5).
   */
  addV6 (w0: number, w1: number, w2: number, w3: number, len: number): this {
    checkLength(len, 128)
    const s = this.#scratch
    s[FIRST] = w0; s[FIRST + 1] = w1; s[FIRST + 2] = w2; s[FIRST + 3] = w3
    maskV6(s, FIRST, len)
    lastV6(s, FIRST, len, s, LAST)
    return this.#pushV6(s, FIRST, s, LAST)
  }

  /** Adds the closed IPv6 interval [start, end], each four big-endian u32 words. */
  addRangeV6 (start: ArrayLike<number>, end: ArrayLike<number>, startOffset = 0, endOffset = 0): this {
    if (compare128(start, startOffset, end, endOffset) > 0) throw new RangeError('IPv6 range start is after its end')
    return this.#pushV6(start, startOffset, end, endOffset)
  }

  #pushV6 (start: ArrayLike<number>, so: number, end: ArrayLike<number>, eo: number): this {
    if (4 * this.#n6 === this.#f6.length) {
      this.#f6 = grow(this.#f6)
      this.#l6 = grow(this.#l6)
    }
    const o = 4 * this.#n6
    const f = this.#f6
    const l = this.#l6
    f[o] = start[so]!; f[o + 1] = start[so + 1]!; f[o + 2] = start[so + 2]!; f[o + 3] = start[so + 3]!
    l[o] = end[eo]!; l[o + 1] = end[eo + 1]!; l[o + 2] = end[eo + 2]!; l[o + 3] = end[eo + 3]!
    this.#n6++
    return this
  }

  /** Adds every prefix of a PackedPrefixes. */
  addPacked (p: PackedPrefixes): this {
    const { v4, v6 } = p
    for (let k = 0; k < v4.length; k += 2) this.addV4(v4[k]!, v4[k + 1]!)
    for (let k = 0; k < v6.length; k += 5) this.addV6(v6[k]!, v6[k + 1]!, v6[k + 2]!, v6[k + 3]!, v6[k + 4]!)
    return this
  }

  /**
   * Adds the interval a scanner of cidr.ts left in `interval` (its layout: first at 0..3, last
   * at 4..7). The fast path of line scanners; `family` is what the scanner returned.
   */
  addScanned (family: Family, interval: Uint32Array): void {
    if (family === 4) this.addRangeV4(interval[FIRST]!, interval[LAST]!)
    else this.#pushV6(interval, FIRST, interval, LAST)
  }

  /**
   * Adds an address, CIDR or `first-last` range (strict notation, no blanks).
   * @returns false, adding nothing, when the text is not one of those
   */
  addText (text: string): boolean {
    const s = this.#scratch
    const family = text.includes('-') ? scanRange(text, 0, text.length, s) : scanCidr(text, 0, text.length, s)
    if (family === 0) return false
    this.addScanned(family, s)
    return true
  }

  /** Coalesces everything added into a NetworkSet and empties the builder. */
  build (): NetworkSet {
    const v4 = coalesceV4(this.#f4, this.#l4, this.#n4)
    const v6 = coalesceV6(this.#f6, this.#l6, this.#n6)
    this.#n4 = 0
    this.#n6 = 0
    return new NetworkSet(v4, v6)
  }
}

function grow (a: Uint32Array): Uint32Array {
  const next = new Uint32Array(a.length * 2)
  next.set(a)
  return next
}

const probe = new Uint32Array(INTERVAL_WORDS)

/**
 * An immutable, coalesced set of IPv4 and IPv6 networks.
 *
 * @example
 *   const allow = NetworkSet.parse(['10.0.0.128/25'])
 *   NetworkSet.parse(['10.0.0.0/24']).subtract(allow).toLines() // '10.0.0.0/25\n'
 */
export class NetworkSet {
  readonly #v4: Uint32Array
  readonly #v6: Uint32Array
  #prefixes4: number
  #prefixes6: number

  /**
   * Wraps interval arrays that are already sorted, disjoint and non-adjacent (see
   * intervals-v4.ts and intervals-v6.ts). Use NetworkSetBuilder, parse() or fromIntervals()
   * rather than this.
   */
  constructor (v4: Uint32Array, v6: Uint32Array) {
    this.#v4 = v4
    this.#v6 = v6
    this.#prefixes4 = -1
    this.#prefixes6 = -1
  }

  static empty (): NetworkSet {
    return new NetworkSet(EMPTY, EMPTY)
  }

  /**
   * A set from address, CIDR or range texts.
   * @throws RangeError naming the first invalid text
   */
  static parse (texts: Iterable<string>): NetworkSet {
    const b = new NetworkSetBuilder()
    for (const t of texts) if (!b.addText(t)) throw new RangeError(`not an address, CIDR or range: ${JSON.stringify(t)}`)
    return b.build()
  }

  static fromPacked (p: PackedPrefixes): NetworkSet {
    return new NetworkSetBuilder(p.v4.length >> 1, p.v6.length / 5).addPacked(p).build()
  }

  /**
   * A set from interval arrays as returned by intervals() (for instance after crossing a
   * worker boundary). Checks the invariant, so a corrupt buffer cannot make a wrong set.
   * @throws RangeError when the arrays are not sorted, disjoint and non-adjacent
   */
  static fromIntervals (v4: Uint32Array, v6: Uint32Array): NetworkSet {
    if (v4.length % 2 !== 0 || v6.length % 8 !== 0) throw new RangeError('interval arrays have a partial record')
    for (let k = 0; k < v4.length; k += 2) {
      if (v4[k]! > v4[k + 1]! || (k > 0 && v4[k]! <= v4[k - 1]! + 1)) throw new RangeError(`IPv4 interval ${k >> 1} is out of order`)
    }
    for (let k = 0; k < v6.length; k += 8) {
      if (compare128(v6, k, v6, k + 4) > 0 || (k > 0 && reaches128(v6, k - 4, v6, k))) throw new RangeError(`IPv6 interval ${k >> 3} is out of order`)
    }
    return new NetworkSet(v4, v6)
  }

  /** The raw interval arrays (shared, do not modify; copy before transferring). */
  intervals (): { v4: Uint32Array, v6: Uint32Array } {
    return { v4: this.#v4, v6: this.#v6 }
  }

  union (o: NetworkSet): NetworkSet {
    return new NetworkSet(unionV4(this.#v4, o.#v4), unionV6(this.#v6, o.#v6))
  }

  /** Every address of this set that is not in `o` (the allow-list carve of DECISIONS §5). */
  subtract (o: NetworkSet): NetworkSet {
    return new NetworkSet(subtractV4(this.#v4, o.#v4), subtractV6(this.#v6, o.#v6))
  }

  /**
   * True when the address, or every address of the CIDR, is in the set (IPv4-mapped IPv6
   * is looked up as IPv4). False for text that is not an address or CIDR.
   */
  has (ip: string): boolean {
    const family = scanCidr(ip, 0, ip.length, probe)
    if (family === 4) {
      const k = findV4(this.#v4, probe[FIRST]!)
      return k >= 0 && this.#v4[2 * k + 1]! >= probe[LAST]!
    }
    if (family === 6) {
      const k = findV6(this.#v6, probe, FIRST)
      return k >= 0 && compare128(this.#v6, 8 * k + 4, probe, LAST) >= 0
    }
    return false
  }

  isEmpty (family: FamilyFilter = 'both'): boolean {
    return (family === 'v6' || this.#v4.length === 0) && (family === 'v4' || this.#v6.length === 0)
  }

  /** True when both sets cover exactly the same addresses. */
  equals (o: NetworkSet): boolean {
    return sameWords(this.#v4, o.#v4) && sameWords(this.#v6, o.#v6)
  }

  /** Number of CIDR prefixes in the minimal cover (what a feed lists and counts). */
  count (family: FamilyFilter = 'both'): number {
    let n = 0
    if (family !== 'v6') {
      if (this.#prefixes4 < 0) this.#prefixes4 = decomposeV4(this.#v4, null, null)
      n += this.#prefixes4
    }
    if (family !== 'v4') {
      if (this.#prefixes6 < 0) this.#prefixes6 = decomposeV6(this.#v6, null, null)
      n += this.#prefixes6
    }
    return n
  }

  /** Number of addresses covered (a BigInt: IPv6 counts exceed 2^53). */
  addressCount (family: FamilyFilter = 'both'): bigint {
    let n = 0n
    if (family !== 'v6') {
      let v4 = 0
      for (let k = 0; k < this.#v4.length; k += 2) v4 += this.#v4[k + 1]! - this.#v4[k]! + 1
      n += BigInt(v4)
    }
    if (family !== 'v4') {
      const v6 = this.#v6
      for (let k = 0; k < v6.length; k += 8) n += wordsToBigInt(v6, k + 4) - wordsToBigInt(v6, k) + 1n
    }
    return n
  }

  /**
   * The minimal CIDR cover, IPv4 first, each family in address order (DECISIONS §5: coalesced
   * prefixes never share a first address, so address order is the whole order).
   */
  prefixes (family: FamilyFilter = 'both'): PackedPrefixes {
    const v4 = new Uint32Array(family === 'v6' ? 0 : 2 * this.count('v4'))
    const v6 = new Uint32Array(family === 'v4' ? 0 : 5 * this.count('v6'))
    if (v4.length > 0) decomposeV4(this.#v4, v4, null)
    if (v6.length > 0) decomposeV6(this.#v6, v6, null)
    return { v4, v6 }
  }

  /**
   * The `plain` rendering as bytes: one CIDR per line, each ending in `\n`, hosts as /32 and
   * /128, IPv4 first. Decomposes and writes in one walk, without the packed intermediate.
   */
  toBytes (family: FamilyFilter = 'both'): Uint8Array {
    const writer = new TextWriter(16 * (family === 'v6' ? 0 : this.#v4.length) + 5 * (family === 'v4' ? 0 : this.#v6.length))
    if (family !== 'v6') this.#prefixes4 = decomposeV4(this.#v4, null, writer)
    if (family !== 'v4') this.#prefixes6 = decomposeV6(this.#v6, null, writer)
    return writer.finish()
  }

  /**
   * As toBytes, handed to `write` in chunks of about `chunkBytes` written into one reused buffer:
   * the next chunk is written only once `write`'s promise resolves (the bytes are then free).
   * The output of a million networks never exists whole.
   */
  async writeText (family: FamilyFilter, write: (bytes: Uint8Array) => Promise<void>, chunkBytes = 256 * 1024): Promise<void> {
    // Intervals per batch, so a batch's worst case (every interval split into its most prefixes)
    // stays within a chunk: 62 prefixes of ≤ 19 bytes for IPv4, 256 of ≤ 44 for IPv6.
    const writer = new TextWriter(2 * chunkBytes)
    const flush = async (): Promise<void> => {
      if (writer.length === 0) return
      await write(writer.finish())
      writer.reset()
    }
    if (family !== 'v6') {
      const batch = 2 * Math.max(1, Math.floor(chunkBytes / (62 * 19)))
      let count = 0
      for (let k = 0; k < this.#v4.length; k += batch) {
        count += decomposeV4(this.#v4.subarray(k, k + batch), null, writer)
        if (writer.length >= chunkBytes) await flush()
      }
      this.#prefixes4 = count
    }
    if (family !== 'v4') {
      const batch = 8 * Math.max(1, Math.floor(chunkBytes / (256 * 44)))
      let count = 0
      for (let k = 0; k < this.#v6.length; k += batch) {
        count += decomposeV6(this.#v6.subarray(k, k + batch), null, writer)
        if (writer.length >= chunkBytes) await flush()
      }
      this.#prefixes6 = count
    }
    await flush()
  }

  /** As toBytes, as a string. */
  toLines (family: FamilyFilter = 'both'): string {
    const bytes = this.toBytes(family)
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1')
  }
}

function sameWords (a: Uint32Array, b: Uint32Array): boolean {
  if (a.length !== b.length) return false
  for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) return false
  return true
}

function wordsToBigInt (w: Uint32Array, o: number): bigint {
  return (BigInt(w[o]!) << 96n) | (BigInt(w[o + 1]!) << 64n) | (BigInt(w[o + 2]!) << 32n) | BigInt(w[o + 3]!)
}
