/**
 * A MaxMind DB writer (MaxMind DB format 2.0): an IPv6 search tree with IPv4 at ::/96, records of
 * 24, 28 or 32 bits (the smallest that fits), a data section with records deduplicated by content
 * and repeated strings as pointers, and the metadata map. Any MaxMind reader can read the result,
 * libmaxminddb's `mmdblookup` included.
 *
 * The tree is built as a binary trie in two Int32Arrays (one slot per child):
 *
 *   child > 0         another trie node
 *   child = 0         no data (the root, node 0, is never a child)
 *   child < 0         data: the record at data offset -child - 1
 *   child = ALIAS     ::ffff:0:0/96, resolved to the ::/96 subtree when the file is written
 *
 * Writing collapses nodes whose two halves hold the same record, then numbers the live nodes in
 * pre-order, so overwritten and collapsed nodes never reach the file.
 */
import { DataSectionEncoder, mmdbUint16, mmdbUint32, mmdbUint64, type MmdbValue } from './mmdb-encoder.js'
import { METADATA_MARKER, SEPARATOR_BYTES, type RecordSize } from './mmdb-file.js'
import { compare128 } from '../net/words.js'
import { addPowerOfTwo, largestBlockBits } from './words128.js'

export interface MmdbWriterOptions {
  /** metadata database_type, e.g. "GeoLite2-ASN". */
  databaseType: string
  /** metadata description by language, e.g. `{ en: '…' }`. */
  description?: Record<string, string>
  languages?: string[]
  /** Seconds since the epoch; defaults to now. Fix it for reproducible files. */
  buildEpoch?: number
  /** Point ::ffff:0:0/96 at the IPv4 subtree so IPv4-mapped lookups find IPv4 data (default true). */
  aliasIpv4Mapped?: boolean
  /** Smallest record size to use (default 24); a larger one is used when the file needs it. */
  minRecordSize?: RecordSize
}

const ALIAS = -0x80000000
const V4_DEPTH = 96

/**
 * @example
 *   const w = new MmdbWriter({ databaseType: 'GeoLite2-ASN' })
 *   const r = w.record({ autonomous_system_number: 13335, autonomous_system_organization: 'Cloudflare, Inc.' })
 *   w.insertRangeV4(0x01000000, 0x010000ff, r)   // 1.0.0.0-1.0.0.255
 *   writeFileSync('asn.mmdb', w.toBuffer())
 */
export class MmdbWriter {
  readonly #opts: MmdbWriterOptions
  readonly #data = new DataSectionEncoder({ capacity: 1 << 20 })
  readonly #scratch = new DataSectionEncoder({ intern: false })
  readonly #records = new Map<string, number>()
  #left: Int32Array = new Int32Array(1 << 16)
  #right: Int32Array = new Int32Array(1 << 16)
  #nodes = 1 // node 0 is the root
  /** The node at ::/96, where every IPv4 insert starts instead of walking 96 levels. */
  readonly #v4Root: number
  #networks = 0
  #v4Networks = 0
  readonly #w = new Uint32Array(8)

  constructor (opts: MmdbWriterOptions) {
    this.#opts = opts
    let node = 0
    for (let d = 0; d < V4_DEPTH; d++) {
      const child = this.#newNode()
      this.#left[node] = child
      node = child
    }
    this.#v4Root = node
  }

  /** Number of prefixes inserted (before collapsing). */
  get networkCount (): number { return this.#networks }

  /** Number of distinct records in the data section. */
  get recordCount (): number { return this.#records.size }

  /**
   * Adds a record to the data section, or finds the identical one already there, and returns its
   * reference for the insert methods.
   */
  record (value: MmdbValue): number {
    const scratch = this.#scratch
    scratch.truncate(0)
    scratch.write(value)
    const key = scratch.bytes().toString('latin1')
    let ref = this.#records.get(key)
    if (ref === undefined) {
      ref = this.#data.write(value)
      this.#records.set(key, ref)
    }
    return ref
  }

  /** Sets IPv4 `addr/len` (addr an unsigned 32-bit number) to record `ref`; later inserts win. */
  insertV4 (addr: number, len: number, ref: number): void {
    if (!Number.isInteger(len) || len < 0 || len > 32) throw new RangeError(`IPv4 prefix length ${len} out of range`)
    this.#networks++
    this.#v4Networks++
    if (len === 0) { this.#left[this.#v4Root] = this.#right[this.#v4Root] = -ref - 1; return }
    let node = this.#v4Root
    for (let d = 0; d < len - 1; d++) node = this.#descend(node, (addr >>> (31 - d)) & 1)
    this.#set(node, (addr >>> (32 - len)) & 1, -ref - 1)
  }

  /**
   * Sets IPv6 `words[offset..offset+3]/len` to record `ref`. IPv4 space inside IPv6 (::/96 and,
   * when aliased, ::ffff:0:0/96) is refused: insert it as IPv4.
   */
  insertV6 (words: ArrayLike<number>, offset: number, len: number, ref: number): void {
    if (!Number.isInteger(len) || len < 1 || len > 128) throw new RangeError(`IPv6 prefix length ${len} out of range`)
    if (this.overlapsIpv4Space(words, offset, len)) {
      throw new RangeError('IPv6 prefix overlaps the IPv4 space of the tree (::/96 or ::ffff:0:0/96); insert IPv4 networks as IPv4')
    }
    this.#insert6(words, offset, len, -ref - 1)
    this.#networks++
  }

  /** True when an IPv6 prefix overlaps ::/96 or (when aliasing) ::ffff:0:0/96. */
  overlapsIpv4Space (words: ArrayLike<number>, offset: number, len: number): boolean {
    const w0 = words[offset]!
    const w1 = words[offset + 1]!
    const w2 = words[offset + 2]!
    if (len <= 64) return hiBitsZero(w0, w1, len)
    if (w0 !== 0 || w1 !== 0) return false
    const n = Math.min(len, V4_DEPTH) - 64 // bits of w2 that count
    const mask = n === 32 ? 0xffffffff : (0xffffffff << (32 - n)) >>> 0
    if ((w2 & mask) === 0) return true
    return this.#opts.aliasIpv4Mapped !== false && ((w2 ^ 0xffff) & mask) === 0
  }

  /** True when the IPv6 range [first, last] overlaps ::/96 or (when aliasing) ::ffff:0:0/96. */
  rangeOverlapsIpv4Space (first: ArrayLike<number>, firstOffset: number, last: ArrayLike<number>, lastOffset: number): boolean {
    const overlaps = (lo: readonly number[], hi: readonly number[]): boolean =>
      compare128(first, firstOffset, hi, 0) <= 0 && compare128(lo, 0, last, lastOffset) <= 0
    if (overlaps([0, 0, 0, 0], [0, 0, 0, 0xffffffff])) return true
    return this.#opts.aliasIpv4Mapped !== false && overlaps([0, 0, 0xffff, 0], [0, 0, 0xffff, 0xffffffff])
  }

  /** Sets every address in [first, last] (inclusive) to `ref`, as the fewest CIDR prefixes. */
  insertRangeV4 (first: number, last: number, ref: number): void {
    let cur = first
    while (cur <= last) {
      const align = cur === 0 ? 32 : 31 - Math.clz32(cur & -cur)
      const span = 31 - Math.clz32(last - cur + 1) // ⌊log2(size)⌋; size 2^32 shows as 0 → 32
      const bits = Math.min(align, last - cur + 1 === 2 ** 32 ? 32 : span)
      this.insertV4(cur, 32 - bits, ref)
      cur += 2 ** bits
    }
  }

  /** IPv6 counterpart of insertRangeV4, on four-word big-endian values. */
  insertRangeV6 (first: ArrayLike<number>, firstOffset: number, last: ArrayLike<number>, lastOffset: number, ref: number): void {
    const cur = this.#w
    for (let k = 0; k < 4; k++) { cur[k] = first[firstOffset + k]!; cur[4 + k] = last[lastOffset + k]! }
    while (compare128(cur, 0, cur, 4) <= 0) {
      const bits = largestBlockBits(cur)
      this.insertV6(cur, 0, 128 - bits, ref)
      if (!addPowerOfTwo(cur, bits)) break // wrapped past ffff…ffff: done
    }
  }

  /** The complete database file. */
  toBuffer (): Buffer {
    this.#resolveAlias()
    const left = this.#left
    const right = this.#right
    left[0] = this.#collapse(left[0]!)
    right[0] = this.#collapse(right[0]!)
    const { order, count } = this.#number()
    const data = this.#data.bytes()
    const maxRecord = count + SEPARATOR_BYTES + data.length
    const min = this.#opts.minRecordSize ?? 24
    const recordSize: RecordSize = maxRecord < 2 ** 24 && min <= 24 ? 24 : maxRecord < 2 ** 28 && min <= 28 ? 28 : 32
    if (maxRecord >= 2 ** 32) throw new RangeError('database too large for 32-bit records')
    const meta = this.#metadata(count, recordSize)
    const nodeBytes = recordSize / 4
    const treeSize = count * nodeBytes
    const out = Buffer.alloc(treeSize + SEPARATOR_BYTES + data.length + METADATA_MARKER.length + meta.length)
    const num = this.#numbers(order, count)
    const value = (child: number): number => {
      if (child > 0) return num[child]!
      if (child === 0) return count
      return count + SEPARATOR_BYTES + (-child - 1)
    }
    for (let i = 0; i < count; i++) {
      const node = order[i]!
      const l = value(left[node]!)
      const r = value(right[node]!)
      const o = i * nodeBytes
      if (recordSize === 24) {
        out.writeUIntBE(l, o, 3); out.writeUIntBE(r, o + 3, 3)
      } else if (recordSize === 28) {
        out.writeUIntBE(l & 0xffffff, o, 3)
        out[o + 3] = ((Math.floor(l / 2 ** 24) & 0x0f) << 4) | (Math.floor(r / 2 ** 24) & 0x0f)
        out.writeUIntBE(r & 0xffffff, o + 4, 3)
      } else {
        out.writeUInt32BE(l, o); out.writeUInt32BE(r, o + 4)
      }
    }
    let at = treeSize + SEPARATOR_BYTES // the separator is already zero
    data.copy(out, at); at += data.length
    METADATA_MARKER.copy(out, at); at += METADATA_MARKER.length
    meta.copy(out, at)
    return out
  }

  #metadata (nodeCount: number, recordSize: RecordSize): Buffer {
    const o = this.#opts
    const enc = new DataSectionEncoder({ intern: false, capacity: 1024 })
    // build_epoch last: libmaxminddb 1.13 rejects metadata whose last value is an empty map.
    enc.write({
      binary_format_major_version: mmdbUint16(2),
      binary_format_minor_version: mmdbUint16(0),
      database_type: o.databaseType,
      description: o.description ?? {},
      ip_version: mmdbUint16(6),
      languages: o.languages ?? [],
      node_count: mmdbUint32(nodeCount),
      record_size: mmdbUint16(recordSize),
      build_epoch: mmdbUint64(o.buildEpoch ?? Math.floor(Date.now() / 1000)),
    })
    return Buffer.from(enc.bytes())
  }

  /** ::ffff:0:0/96 → the ::/96 subtree (ALIAS is replaced by its final value when numbering). */
  #resolveAlias (): void {
    if (this.#opts.aliasIpv4Mapped === false || this.#v4Networks === 0) return
    const w = new Uint32Array([0, 0, 0xffff, 0])
    this.#insert6(w, 0, V4_DEPTH, ALIAS)
  }

  /** Collapses the subtree at `child` bottom-up; returns what its parent's slot should hold. */
  #collapse (child: number): number {
    if (child <= 0) return child
    const l = this.#left[child] = this.#collapse(this.#left[child]!)
    const r = this.#right[child] = this.#collapse(this.#right[child]!)
    if (l === r && l !== ALIAS && l <= 0) return l
    return child
  }

  /** Pre-order numbering of the live nodes (root first): `order[i]` is the trie node numbered i. */
  #number (): { order: Int32Array, count: number } {
    const order = new Int32Array(this.#nodes)
    const stack = new Int32Array(256)
    let sp = 0
    let count = 0
    stack[sp++] = 0
    while (sp > 0) {
      const node = stack[--sp]!
      order[count++] = node
      const l = this.#left[node]!
      const r = this.#right[node]!
      if (r > 0) stack[sp++] = r
      if (l > 0) stack[sp++] = l
    }
    return { order, count }
  }

  /** Trie node → file node number, with ALIAS slots rewritten to the ::/96 subtree's value. */
  #numbers (order: Int32Array, count: number): Int32Array {
    const num = new Int32Array(this.#nodes).fill(-1)
    for (let i = 0; i < count; i++) num[order[i]!] = i
    // The ::/96 slot after collapsing: a node, a record, or nothing.
    let slot = 0
    for (let d = 0; d < V4_DEPTH && (d === 0 || slot > 0); d++) slot = this.#left[slot]!
    for (let i = 0; i < count; i++) {
      const node = order[i]!
      if (this.#left[node] === ALIAS) this.#left[node] = slot
      if (this.#right[node] === ALIAS) this.#right[node] = slot
    }
    return num
  }

  #insert6 (words: ArrayLike<number>, offset: number, len: number, value: number): void {
    let node = 0
    for (let d = 0; d < len - 1; d++) node = this.#descend(node, bitAt(words, offset, d))
    this.#set(node, bitAt(words, offset, len - 1), value)
  }

  /** The child of `node` on `side`, created — or split from a covering record — if needed. */
  #descend (node: number, side: number): number {
    const child = side === 0 ? this.#left[node]! : this.#right[node]!
    if (child > 0) return child
    const next = this.#newNode()
    // A record covering this whole half keeps covering both quarters below it.
    this.#left[next] = child
    this.#right[next] = child
    this.#set(node, side, next)
    return next
  }

  #set (node: number, side: number, value: number): void {
    if (side === 0) this.#left[node] = value
    else this.#right[node] = value
  }

  #newNode (): number {
    if (this.#nodes === this.#left.length) {
      const grow = (a: Int32Array): Int32Array => { const b = new Int32Array(a.length * 2); b.set(a); return b }
      this.#left = grow(this.#left)
      this.#right = grow(this.#right)
    }
    const n = this.#nodes++
    this.#left[n] = 0
    this.#right[n] = 0
    return n
  }
}

function bitAt (words: ArrayLike<number>, offset: number, d: number): number {
  return (words[offset + (d >>> 5)]! >>> (31 - (d & 31))) & 1
}

/** True when the top `len` (≤ 64) bits of w0:w1 are zero. */
function hiBitsZero (w0: number, w1: number, len: number): boolean {
  if (len <= 32) return len === 0 || (w0 >>> (32 - len)) === 0
  return w0 === 0 && (len === 64 ? w1 === 0 : (w1 >>> (64 - len)) === 0)
}
