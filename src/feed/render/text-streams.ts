/**
 * The text every dialect is made of, written as bytes and cut into chunks at content-defined
 * places, so that a rebuild reuses every chunk that did not change — its text and its compressed
 * form (see gzip.ts and render-stream.ts).
 *
 * Where a chunk ends is decided by the network alone — a hash of its address and length — never
 * by its position: adding one IP changes the one chunk that receives it and leaves the cuts of
 * every other chunk where they were (the idea of rsync's and restic's content-defined chunking,
 * at network rather than byte granularity). On average one network in CUT_EVERY ends a chunk
 * (≈ 32 KiB of `plain`, the deflate window, so chunking costs ~1.5 % of compression ratio); a
 * chunk never holds more than MAX_CHUNK networks.
 *
 * A FamilyText knows its chunks before writing any byte: where they end, and a key for each made
 * from its networks (a SHA-256 of their binary words, 8 bytes per IPv4 network, not of the ~20–40
 * bytes of text each). So a rebuild finds its unchanged chunks by key and writes only the others.
 *
 * Order inside each family is the DECISIONS §5 order: by first address, then by prefix length.
 *
 * IPv4 text, nearly all of a feed, is written by the loops here with the octets from a lookup
 * table (measured on the 122,608 IPv4 networks of bench/snapshot.ts, against TextWriter's
 * per-call bounds checks: plain 5.5 → 3.8 ms, nftables 7.5 → 4 ms, dialect_b 15 → 8.5 ms); IPv6
 * goes through TextWriter (RFC 5952 is no place for a second implementation).
 */
import { createHash } from 'node:crypto'
import { lastV4, lastV6 } from '../../net/cidr.js'
import { TextWriter } from '../../net/text-writer.js'
import type { GroupPrefixes } from '../../pool/protocol.js'
import { mix32 } from './mix32.js'

export const CUT_EVERY = 2048
export const MAX_CHUNK = 8 * CUT_EVERY
const CUT_MASK = CUT_EVERY - 1

/** Text and the byte offsets where its chunks end (each strictly inside the text). */
export interface TextStream {
  readonly bytes: Uint8Array
  readonly cuts: readonly number[]
  /** Networks (or rows) written. */
  readonly count: number
}


function isCutV4 (addr: number, len: number): boolean {
  return (mix32(addr ^ Math.imul(len + 1, 0x9e3779b1)) & CUT_MASK) === 0
}

function isCutV6 (w: Uint32Array, k: number): boolean {
  const h = mix32(w[k]! ^ mix32(w[k + 1]! ^ mix32(w[k + 2]! ^ mix32(w[k + 3]! ^ Math.imul(w[k + 4]! + 1, 0x9e3779b1)))))
  return (h & CUT_MASK) === 0
}

/**
 * Where text is written: one buffer reused from build to build (a worker's text would otherwise
 * leave megabytes for the GC, and for glibc to keep, every time). Each write returns a view; a
 * view stays valid until reset(), even when a later write needs a bigger buffer (the view keeps
 * the old one).
 */
export class Scratch {
  #buf = new Uint8Array(0)
  #pos = 0

  /**
   * Starts over, with room for `capacity` bytes: earlier views may be overwritten from now on.
   * Sizing the buffer here, once for all the task's writes, keeps it one allocation made early —
   * a buffer grown late in a task sits at the top of glibc's heap for the thread and keeps the
   * memory freed below it from going back to the system.
   */
  reset (capacity = 0): void {
    this.#pos = 0
    if (this.#buf.length < capacity) this.#buf = new Uint8Array(capacity)
  }

  /** A buffer with room for `n` more bytes from `pos`. */
  room (n: number): Uint8Array {
    if (this.#pos + n > this.#buf.length) {
      this.#buf = new Uint8Array(Math.max(n, this.#buf.length * 2, 1 << 16))
      this.#pos = 0
    }
    return this.#buf
  }

  get pos (): number {
    return this.#pos
  }

  /** The bytes from `pos` to `end` as a view; `pos` moves to `end`. */
  take (end: number): Uint8Array {
    const view = this.#buf.subarray(this.#pos, end)
    this.#pos = end
    return view
  }

  /** Appends bytes written elsewhere. */
  put (bytes: Uint8Array): Uint8Array {
    const buf = this.room(bytes.length)
    buf.set(bytes, this.#pos)
    return this.take(this.#pos + bytes.length)
  }
}

const CH_NL = 0x0a
const CH_DOT = 0x2e
const CH_SLASH = 0x2f
const CH_DASH = 0x2d
const CH_COMMA = 0x2c
const CH_SPACE = 0x20
const COMMA_SPACE = ', '
const LEN_TEXT = Array.from({ length: 129 }, (_, n) => String(n))

/** Decimal text of 0..255 by value: [length, digit, digit, digit]. */
const DEC = new Uint8Array(256 * 4)
for (let v = 0; v < 256; v++) {
  const t = String(v)
  DEC[v * 4] = t.length
  for (let k = 0; k < t.length; k++) DEC[v * 4 + 1 + k] = t.charCodeAt(k)
}

/** Writes 0..255 in decimal at out[o]; returns the offset after it. */
function putDecimal (out: Uint8Array, o: number, v: number): number {
  const i = v * 4
  const n = DEC[i]!
  out[o] = DEC[i + 1]!
  if (n > 1) out[o + 1] = DEC[i + 2]!
  if (n > 2) out[o + 2] = DEC[i + 3]!
  return o + n
}

/** Writes dotted-quad text of a u32 at out[o] (at most 15 bytes); returns the offset after it. */
function putIpv4 (out: Uint8Array, o: number, a: number): number {
  o = putDecimal(out, o, a >>> 24)
  out[o++] = CH_DOT
  o = putDecimal(out, o, (a >>> 16) & 255)
  out[o++] = CH_DOT
  o = putDecimal(out, o, (a >>> 8) & 255)
  out[o++] = CH_DOT
  return putDecimal(out, o, a & 255)
}

function putBytes (out: Uint8Array, o: number, bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; i++) out[o + i] = bytes[i]!
  return o + bytes.length
}

export type TextKind = 'lines' | 'nft' | 'rows'

/**
 * At most how many bytes the text of a kind takes (dialect_b rows add their longest tail, at
 * most 26 bytes).
 *
 * @example
 *   textBound('lines', 2, 0) // 38
 */
export function textBound (kind: TextKind, v4: number, v6: number): number {
  const tail = kind === 'rows' ? 26 : 0
  return v4 * (longestItem(kind, 4) + tail) + v6 * (longestItem(kind, 6) + tail)
}

/** Longest item of a kind and family, in bytes (dialect_b adds its longest tail). */
function longestItem (kind: TextKind, family: 4 | 6): number {
  if (kind === 'lines') return family === 4 ? 19 : 44
  if (kind === 'nft') return family === 4 ? 20 : 45
  return family === 4 ? 31 : 79
}

const last6 = new Uint32Array(4)

/**
 * The text of one kind (plain lines, nftables items, dialect_b rows) for one family: its items,
 * where its chunks end, a key per chunk, and the writing of any chunk on its own.
 *
 * dialect_b rows are the groups merged into one ordered sequence (first address, then prefix
 * length, then group order), each row `value,type,confidence,severity\n`. Networks of different
 * groups are never merged, so overlapping ones each get their row (SPEC 4.5).
 *
 * @example
 *   const t = new FamilyText('lines', 4, [{ confidence: 'high', severity: 'high', v4: prefixes, v6 }])
 *   for (let c = 0; c < t.ends.length; c++) t.write(c, scratch) // the text, chunk by chunk
 */
export class FamilyText {
  readonly kind: TextKind
  readonly family: 4 | 6
  /** Items (networks, or rows) in the text. */
  readonly count: number
  /** Chunk c holds items [ends[c - 1] ?? 0, ends[c]); empty when there are no items. */
  readonly ends: number[]
  readonly #stride: number
  /** lines and nft: the prefixes; rows: one list per group. */
  readonly #lists: readonly Uint32Array[]
  /** Rows of several groups: pairs [group, word offset] in row order; null when there is one list. */
  readonly #order: Uint32Array | null
  readonly #hostText: readonly string[]
  readonly #rangeText: readonly string[]
  readonly #hostTails: readonly Uint8Array[]
  readonly #rangeTails: readonly Uint8Array[]
  /** What a chunk's bytes depend on besides its items, hashed into its key. */
  readonly #tag: string

  constructor (kind: TextKind, family: 4 | 6, groups: readonly GroupPrefixes[]) {
    this.kind = kind
    this.family = family
    this.#stride = family === 4 ? 2 : 5
    this.#lists = groups.map((g) => family === 4 ? g.v4 : g.v6)
    this.#hostText = groups.map((g) => `,IP,${g.confidence},${g.severity}\n`)
    this.#rangeText = groups.map((g) => `,IP Range,${g.confidence},${g.severity}\n`)
    this.#hostTails = this.#hostText.map((t) => Buffer.from(t, 'latin1'))
    this.#rangeTails = this.#rangeText.map((t) => Buffer.from(t, 'latin1'))
    this.#order = this.#lists.length > 1 ? mergeOrder(this.#lists, this.#stride) : null
    this.count = this.#order !== null ? this.#order.length / 2 : (this.#lists[0]?.length ?? 0) / this.#stride
    this.#tag = `${kind}${family}` + (kind === 'rows' ? JSON.stringify(groups.map((g) => [g.confidence, g.severity])) : '')
    this.ends = this.#chunkEnds()
  }

  /** The list of item k (its group's, for rows of several groups). */
  #listOf (k: number): Uint32Array {
    return this.#order === null ? this.#lists[0]! : this.#lists[this.#order[2 * k]!]!
  }

  /** The word offset of item k in its list. */
  #offsetOf (k: number): number {
    return this.#order === null ? k * this.#stride : this.#order[2 * k + 1]!
  }

  #groupOf (k: number): number {
    return this.#order === null ? 0 : this.#order[2 * k]!
  }

  #isCut (k: number): boolean {
    const list = this.#listOf(k)
    const offset = this.#offsetOf(k)
    return this.family === 4 ? isCutV4(list[offset]!, list[offset + 1]!) : isCutV6(list, offset)
  }

  /** A cut after item k when its network says so or the chunk is full, never after the last. */
  #chunkEnds (): number[] {
    const ends: number[] = []
    let run = 0
    for (let k = 0; k < this.count; k++) {
      run++
      if (k + 1 < this.count && (this.#isCut(k) || run >= MAX_CHUNK)) {
        ends.push(k + 1)
        run = 0
      }
    }
    if (this.count > 0) ends.push(this.count)
    return ends
  }

  /**
   * Chunk c's key: a digest of everything its bytes depend on — kind, family, the dialect_b
   * labels, whether it is the first nftables chunk (the others start with `, `) and its items.
   */
  key (c: number): string {
    const from = c === 0 ? 0 : this.ends[c - 1]!
    const to = this.ends[c]!
    const h = createHash('sha256').update(this.#tag).update(this.kind === 'nft' && c === 0 ? '^' : '+')
    if (this.#order === null) {
      const list = this.#lists[0]!
      h.update(new Uint8Array(list.buffer, list.byteOffset + from * this.#stride * 4, (to - from) * this.#stride * 4))
    } else {
      const words = new Uint32Array((to - from) * (this.#stride + 1))
      for (let k = from, w = 0; k < to; k++) {
        const list = this.#listOf(k)
        const offset = this.#offsetOf(k)
        for (let i = 0; i < this.#stride; i++) words[w++] = list[offset + i]!
        words[w++] = this.#groupOf(k)
      }
      h.update(new Uint8Array(words.buffer))
    }
    return 'n' + h.digest('base64url')
  }

  /** Writes chunk c into `out` and returns its bytes (a view into `out`). */
  write (c: number, out: Scratch): Uint8Array {
    const from = c === 0 ? 0 : this.ends[c - 1]!
    const to = this.ends[c]!
    if (this.family === 6) return out.put(this.#writeV6(from, to))
    const buf = out.room((to - from) * this.#longestItem())
    let o = out.pos
    if (this.kind === 'lines') {
      const list = this.#lists[0]!
      for (let k = 2 * from; k < 2 * to; k += 2) {
        o = putIpv4(buf, o, list[k]!)
        buf[o++] = CH_SLASH
        o = putDecimal(buf, o, list[k + 1]!)
        buf[o++] = CH_NL
      }
    } else if (this.kind === 'nft') {
      const list = this.#lists[0]!
      for (let k = 2 * from; k < 2 * to; k += 2) {
        if (k > 0) {
          buf[o++] = CH_COMMA
          buf[o++] = CH_SPACE
        }
        o = putIpv4(buf, o, list[k]!)
        buf[o++] = CH_SLASH
        o = putDecimal(buf, o, list[k + 1]!)
      }
    } else if (this.#order === null) {
      // Rows of one group (the common case): nothing to merge.
      const list = this.#lists[0]!
      const host = this.#hostTails[0]!
      const range = this.#rangeTails[0]!
      for (let k = 2 * from; k < 2 * to; k += 2) o = putRow4(buf, o, list[k]!, list[k + 1]!, host, range)
    } else {
      for (let k = from; k < to; k++) {
        const g = this.#groupOf(k)
        const list = this.#lists[g]!
        const offset = this.#offsetOf(k)
        o = putRow4(buf, o, list[offset]!, list[offset + 1]!, this.#hostTails[g]!, this.#rangeTails[g]!)
      }
    }
    return out.take(o)
  }

  /** Bytes an item takes at most. */
  #longestItem (): number {
    let tail = 0
    if (this.kind === 'rows') for (const t of this.#rangeTails) tail = Math.max(tail, t.length)
    return longestItem(this.kind, this.family) + tail
  }

  #writeV6 (from: number, to: number): Uint8Array {
    const w = new TextWriter((to - from) * this.#longestItem())
    for (let k = from; k < to; k++) {
      const list = this.#listOf(k)
      const offset = this.#offsetOf(k)
      const len = list[offset + 4]!
      if (this.kind === 'lines') {
        w.writeCidr6(list, offset, len)
      } else if (this.kind === 'nft') {
        if (k > 0) w.writeAscii(COMMA_SPACE)
        w.writeIpv6(list, offset)
        w.writeByte(CH_SLASH)
        w.writeAscii(LEN_TEXT[len]!)
      } else {
        w.writeIpv6(list, offset)
        if (len !== 128) {
          w.writeByte(CH_DASH)
          lastV6(list, offset, len, last6, 0)
          w.writeIpv6(last6, 0)
        }
        w.writeAscii(len === 128 ? this.#hostText[this.#groupOf(k)]! : this.#rangeText[this.#groupOf(k)]!)
      }
    }
    return w.finish()
  }

  /** The whole text, its chunks laid end to end. */
  writeAll (out: Scratch = new Scratch()): TextStream {
    // Room for all of it first, so that the chunks land contiguously.
    const buf = out.room(this.count * this.#longestItem())
    const start = out.pos
    const cuts: number[] = []
    let end = start
    for (let c = 0; c < this.ends.length; c++) {
      end += this.write(c, out).length
      if (c + 1 < this.ends.length) cuts.push(end - start)
    }
    return { bytes: buf.subarray(start, end), cuts, count: this.count }
  }
}

/** One dialect_b row of an IPv4 prefix at out[o]; returns the offset after it. */
function putRow4 (out: Uint8Array, o: number, addr: number, len: number, hostTail: Uint8Array, rangeTail: Uint8Array): number {
  o = putIpv4(out, o, addr)
  if (len === 32) return putBytes(out, o, hostTail)
  out[o++] = CH_DASH
  o = putIpv4(out, o, lastV4(addr, len))
  return putBytes(out, o, rangeTail)
}

/** Row order of several groups: pairs [group, word offset], by address words, then length, then group. */
function mergeOrder (lists: readonly Uint32Array[], stride: number): Uint32Array {
  let total = 0
  for (const l of lists) total += l.length / stride
  const order = new Uint32Array(total * 2)
  const heads = new Array<number>(lists.length).fill(0)
  for (let written = 0; written < total; written++) {
    // Few groups (at most 3 × 4), so a linear scan for the smallest head beats a heap.
    let best = -1
    for (let g = 0; g < lists.length; g++) {
      if (heads[g]! < lists[g]!.length && (best < 0 || isBefore(lists[g]!, heads[g]!, lists[best]!, heads[best]!, stride))) best = g
    }
    order[2 * written] = best
    order[2 * written + 1] = heads[best]!
    heads[best] = heads[best]! + stride
  }
  return order
}

/** True when the prefix at a[i] sorts before the one at b[j]: by address words, then by length. */
function isBefore (a: Uint32Array, i: number, b: Uint32Array, j: number, stride: number): boolean {
  for (let k = 0; k < stride; k++) {
    const x = a[i + k]!
    const y = b[j + k]!
    if (x !== y) return x < y
  }
  return false
}

const NO_LABELS = { confidence: '', severity: '' }

/**
 * `plain` text of one family: `addr/len\n` per prefix.
 *
 * @example
 *   renderLines(new Uint32Array([0x0a000000, 8]), 4).bytes // '10.0.0.0/8\n' as bytes
 */
export function renderLines (prefixes: Uint32Array, family: 4 | 6): TextStream {
  return new FamilyText('lines', family, [{ ...NO_LABELS, v4: prefixes, v6: prefixes }]).writeAll()
}

/**
 * nftables element text of one family: `a, b, c` (no braces). Every chunk but the first starts
 * with its `, `, so a chunk's bytes do not depend on whether a chunk follows it.
 */
export function renderNftItems (prefixes: Uint32Array, family: 4 | 6): TextStream {
  return new FamilyText('nft', family, [{ ...NO_LABELS, v4: prefixes, v6: prefixes }]).writeAll()
}

/**
 * dialect_b rows of one family (see FamilyText).
 *
 * @example
 *   renderRows([{ confidence: 'high', severity: 'low', v4: new Uint32Array([0xc0000200, 24, 0xc0000201, 32]), v6: new Uint32Array(0) }], 4)
 *   // '192.0.2.0-192.0.2.255,IP Range,high,low\n192.0.2.1,IP,high,low\n'
 */
export function renderRows (groups: readonly GroupPrefixes[], family: 4 | 6): TextStream {
  return new FamilyText('rows', family, groups).writeAll()
}

/** The chunks of a stream as views (no copy). */
export function chunksOf (s: TextStream): Uint8Array[] {
  const out: Uint8Array[] = []
  let start = 0
  for (const c of s.cuts) {
    out.push(s.bytes.subarray(start, c))
    start = c
  }
  if (start < s.bytes.length) out.push(s.bytes.subarray(start))
  return out
}
