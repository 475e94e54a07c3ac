/**
 * The text every dialect is made of, written as bytes (src/net/text-writer.ts) and cut into
 * chunks at content-defined places, so that gzip can reuse the compressed form of every chunk
 * that did not change since the previous build (see gzip.ts).
 *
 * Where a chunk ends is decided by the network alone — a hash of its address and length — never
 * by its position: adding one IP changes the one chunk that receives it and leaves the cuts of
 * every other chunk where they were (the idea of rsync's and restic's content-defined chunking,
 * at network rather than byte granularity). On average one network in CUT_EVERY ends a chunk
 * (≈ 32 KiB of `plain`, the deflate window, so chunking costs ~1.5 % of compression ratio); a
 * chunk never holds more than MAX_CHUNK networks.
 *
 * Order inside each family is the DECISIONS §5 order: by first address, then by prefix length.
 */
import { lastV4, lastV6 } from '../../net/cidr.js'
import { TextWriter } from '../../net/text-writer.js'
import type { GroupPrefixes } from '../../pool/protocol.js'

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

/** murmur3's 32-bit finaliser: every input bit reaches every output bit. */
function mix32 (h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

function isCutV4 (addr: number, len: number): boolean {
  return (mix32(addr ^ Math.imul(len + 1, 0x9e3779b1)) & CUT_MASK) === 0
}

function isCutV6 (w: Uint32Array, k: number): boolean {
  const h = mix32(w[k]! ^ mix32(w[k + 1]! ^ mix32(w[k + 2]! ^ mix32(w[k + 3]! ^ Math.imul(w[k + 4]! + 1, 0x9e3779b1)))))
  return (h & CUT_MASK) === 0
}

/** Records a cut after the current item when its network says so, or when the chunk is full. */
class Cutter {
  readonly cuts: number[] = []
  #run = 0

  after (cut: boolean, writer: TextWriter, last: boolean): void {
    this.#run++
    if (last) return
    if (cut || this.#run >= MAX_CHUNK) {
      this.cuts.push(writer.length)
      this.#run = 0
    }
  }
}

const LEN_TEXT = Array.from({ length: 129 }, (_, n) => String(n))

/** Bytes to reserve: a little over the typical line, so the writer rarely grows (and copies). */
function capacity (n: number, family: 4 | 6, perLine: number): number {
  return n * (family === 4 ? perLine : perLine + 26) + 64
}

/**
 * `plain` text of one family: `addr/len\n` per prefix.
 *
 * @example
 *   renderLines(new Uint32Array([0x0a000000, 8]), 4).bytes // '10.0.0.0/8\n' as bytes
 */
export function renderLines (prefixes: Uint32Array, family: 4 | 6): TextStream {
  const stride = family === 4 ? 2 : 5
  const n = prefixes.length / stride
  const w = new TextWriter(capacity(n, family, 19))
  const cutter = new Cutter()
  if (family === 4) {
    for (let k = 0; k < prefixes.length; k += 2) {
      const addr = prefixes[k]!
      const len = prefixes[k + 1]!
      w.writeCidr4(addr, len)
      cutter.after(isCutV4(addr, len), w, k + 2 === prefixes.length)
    }
  } else {
    for (let k = 0; k < prefixes.length; k += 5) {
      w.writeCidr6(prefixes, k, prefixes[k + 4]!)
      cutter.after(isCutV6(prefixes, k), w, k + 5 === prefixes.length)
    }
  }
  return { bytes: w.finish(), cuts: cutter.cuts, count: n }
}

const COMMA_SPACE = ', '

/**
 * nftables element text of one family: `a, b, c` (no braces). Every chunk but the first starts
 * with its `, `, so a chunk's bytes do not depend on whether a chunk follows it.
 */
export function renderNftItems (prefixes: Uint32Array, family: 4 | 6): TextStream {
  const stride = family === 4 ? 2 : 5
  const n = prefixes.length / stride
  const w = new TextWriter(capacity(n, family, 17))
  const cutter = new Cutter()
  for (let k = 0; k < prefixes.length; k += stride) {
    if (k > 0) w.writeAscii(COMMA_SPACE)
    const len = prefixes[k + stride - 1]!
    if (family === 4) w.writeIpv4(prefixes[k]!)
    else w.writeIpv6(prefixes, k)
    w.writeByte(0x2f)
    w.writeAscii(LEN_TEXT[len]!)
    cutter.after(family === 4 ? isCutV4(prefixes[k]!, len) : isCutV6(prefixes, k), w, k + stride === prefixes.length)
  }
  return { bytes: w.finish(), cuts: cutter.cuts, count: n }
}

const last6 = new Uint32Array(4)

/**
 * dialect_b rows of one family: the groups merged into one ordered sequence (first address,
 * then prefix length, then group order), each row `value,type,confidence,severity\n`. Networks
 * of different groups are never merged, so overlapping ones each get their row (SPEC 4.5).
 *
 * @example
 *   renderRows([{ confidence: 'high', severity: 'low', v4: new Uint32Array([0xc0000200, 24, 0xc0000201, 32]), v6: new Uint32Array(0) }], 4)
 *   // '192.0.2.0-192.0.2.255,IP Range,high,low\n192.0.2.1,IP,high,low\n'
 */
export function renderRows (groups: readonly GroupPrefixes[], family: 4 | 6): TextStream {
  const stride = family === 4 ? 2 : 5
  const hostLen = family === 4 ? 32 : 128
  const lists = groups.map((g) => family === 4 ? g.v4 : g.v6)
  const hostTail = groups.map((g) => `,IP,${g.confidence},${g.severity}\n`)
  const rangeTail = groups.map((g) => `,IP Range,${g.confidence},${g.severity}\n`)
  let total = 0
  for (const l of lists) total += l.length / stride
  const w = new TextWriter(capacity(total, family, 34))
  const cutter = new Cutter()
  const row = (list: Uint32Array, k: number, g: number, last: boolean): void => {
    const len = list[k + stride - 1]!
    if (family === 4) {
      const addr = list[k]!
      w.writeIpv4(addr)
      if (len !== hostLen) {
        w.writeByte(0x2d)
        w.writeIpv4(lastV4(addr, len))
      }
    } else {
      w.writeIpv6(list, k)
      if (len !== hostLen) {
        w.writeByte(0x2d)
        lastV6(list, k, len, last6, 0)
        w.writeIpv6(last6, 0)
      }
    }
    w.writeAscii(len === hostLen ? hostTail[g]! : rangeTail[g]!)
    cutter.after(family === 4 ? isCutV4(list[k]!, len) : isCutV6(list, k), w, last)
  }
  if (lists.length === 1) {
    // One group (the common case): nothing to merge.
    const list = lists[0]!
    for (let k = 0; k < list.length; k += stride) row(list, k, 0, k + stride === list.length)
    return { bytes: w.finish(), cuts: cutter.cuts, count: total }
  }
  const heads = new Array<number>(groups.length).fill(0)
  for (let written = 0; written < total; written++) {
    // Few groups (at most 3 × 4), so a linear scan for the smallest head beats a heap.
    let best = -1
    for (let g = 0; g < lists.length; g++) {
      if (heads[g]! < lists[g]!.length && (best < 0 || isBefore(lists[g]!, heads[g]!, lists[best]!, heads[best]!, stride))) best = g
    }
    const k = heads[best]!
    heads[best] = k + stride
    row(lists[best]!, k, best, written + 1 === total)
  }
  return { bytes: w.finish(), cuts: cutter.cuts, count: total }
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
