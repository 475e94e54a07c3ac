/**
 * Deterministic gzip (RFC 1952) assembled from independently compressed chunks.
 *
 *   gzip body = HEADER ‖ D(chunk 1) ‖ D(chunk 2) ‖ … ‖ FINAL ‖ CRC-32 ‖ ISIZE
 *
 * Each D(chunk) is a raw deflate stream of one chunk, started with an empty dictionary and ended
 * with a sync flush (RFC 1951 §3.2.4: an empty stored block, so it ends byte-aligned and is not
 * final). A chunk never refers back past its own start, so chunks can be laid end to end in any
 * combination; FINAL is an empty fixed-Huffman block with BFINAL set. Two things follow:
 *
 * - the compressed form of a chunk depends only on its bytes, so a rebuild reuses every chunk
 *   that did not change (a one-IP change recompresses one chunk per stream, not the feed), and
 *   `both` and `dialect_a` reuse the chunks of `plain` v4 and v6;
 * - the bytes are deterministic: mtime 0, fixed XFL and OS, one level (GZIP_LEVEL), so every
 *   node and every restart serves the same gzip bytes and the same strong ETag for them.
 *
 * GZIP_LEVEL is measured (bench/snapshot.ts, on a 131,072-entry feed): see the constant.
 */
import { constants, crc32, deflateRawSync } from 'node:zlib'
import type { ChunkCache, PackedChunks } from '../../pool/protocol.js'
import { digestOf } from './content-key.js'

/**
 * Level 6 (zlib's default), by measurement (bench/snapshot.ts, CPU time of a full one-thread build
 * of the 131,072-entry feed, 44 variants, chunked as here): level 9 took 2.6× level 6's time to
 * save 2.0 % of the gzip bytes; level 4 took ~0.7× the time for 4.3 % more bytes, level 1 ~0.6×
 * for 17 % more. A full build at level 6 stays well inside its 1 s budget, and after that only
 * changed chunks are compressed (one or two per stream when an IP is added), so the level costs
 * little time where it would matter while its bytes go out to every poller.
 */
export const GZIP_LEVEL = 6

/** ID1 ID2 CM=deflate FLG=0 MTIME=0 XFL=0 OS=255 (unknown): the same on every platform. */
const HEADER = Uint8Array.of(0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff)
/** BFINAL=1, BTYPE=01 (fixed Huffman), then end-of-block (code 256 = seven zero bits). */
const FINAL = Uint8Array.of(0x03, 0x00)
/** Smaller pieces (headers, checksums) are compressed afresh: not worth a cache entry. */
const MIN_CACHED = 1024

const SYNC = { finishFlush: constants.Z_SYNC_FLUSH }

/** Raw deflate of one chunk, byte-aligned and not final. */
export function deflateChunk (bytes: Uint8Array, level: number): Uint8Array {
  if (bytes.length === 0) return new Uint8Array(0)
  return deflateRawSync(bytes, { ...SYNC, level })
}

/** The cache key of a chunk compressed at `level`: its content key and the level. */
export function chunkKey (bytes: Uint8Array, level: number): string {
  return `${digestOf(bytes)}.${level}`
}

/** One part of a gzip body; `key` names a compressed chunk (null: a small piece, compressed afresh). */
export interface GzipPart {
  readonly key: string | null
  readonly bytes: Uint8Array
}

/**
 * Compresses chunks, reusing compressed chunks the caller already holds (`previous`: the feed's
 * previous build, sent by the main thread) by content. Records which chunks this build used, in
 * order of first use, and which of them it had to compress: only those travel back.
 */
export class ChunkCompressor {
  readonly #level: number
  readonly #previous = new Map<string, Uint8Array>()
  readonly #used = new Map<string, Uint8Array>()
  readonly #fresh: string[] = []
  /** The same piece object is usually part of several bodies (plain, both, dialect_a): look it up once. */
  readonly #byPiece = new WeakMap<Uint8Array, GzipPart>()
  /** Chunks compressed afresh and reused in this build (for tests and the bench). */
  compressed = 0
  reused = 0

  constructor (level: number, previous: ChunkCache | null) {
    this.#level = level
    if (previous !== null) previous.keys.forEach((k, i) => this.#previous.set(k, previous.chunks[i]!))
  }

  compress (piece: Uint8Array): Uint8Array {
    return this.compressPart(piece).bytes
  }

  /** The compressed piece, with its cache key (null for a piece too small to be cached). */
  compressPart (piece: Uint8Array): GzipPart {
    if (piece.length < MIN_CACHED) return { key: null, bytes: deflateChunk(piece, this.#level) }
    let part = this.#byPiece.get(piece)
    if (part !== undefined) return part
    const key = chunkKey(piece, this.#level)
    let out = this.#used.get(key)
    if (out === undefined) {
      out = this.#previous.get(key)
      if (out !== undefined) {
        this.reused++
      } else {
        out = deflateChunk(piece, this.#level)
        this.compressed++
        this.#fresh.push(key)
      }
      this.#used.set(key, out)
    }
    part = { key, bytes: out }
    this.#byPiece.set(piece, part)
    return part
  }

  /** Keys of every chunk used in this build, in order of first use. */
  usedKeys (): string[] {
    return [...this.#used.keys()]
  }

  /** The chunks compressed in this build, packed in one buffer (to be moved, not cloned, to the caller). */
  exportFresh (): PackedChunks {
    const keys = this.#fresh
    const offsets = new Uint32Array(keys.length + 1)
    let total = 0
    keys.forEach((k, i) => { offsets[i] = total; total += this.#used.get(k)!.length })
    offsets[keys.length] = total
    const bytes = new Uint8Array(total)
    keys.forEach((k, i) => bytes.set(this.#used.get(k)!, offsets[i]!))
    return { keys: [...keys], offsets, bytes }
  }

  /** Every chunk used in this build, as the next build's `previous`. */
  exportCache (): ChunkCache {
    const keys = this.usedKeys()
    return { keys, chunks: keys.map((k) => this.#used.get(k)!), text: null }
  }
}

/** The CRC-32 polynomial, reflected. */
const POLY = 0xedb88320

/** a(x)·b(x) modulo the CRC polynomial, in the reflected bit order of CRC-32 (zlib's multmodp). */
function multModP (a: number, b: number): number {
  let m = 0x80000000
  let p = 0
  for (;;) {
    if ((a & m) !== 0) {
      p ^= b
      if ((a & (m - 1)) === 0) break
    }
    m >>>= 1
    b = (b & 1) !== 0 ? (b >>> 1) ^ POLY : b >>> 1
  }
  return p >>> 0
}

/** x^(2^n) modulo the polynomial, for n = 0..31. */
const X2N = new Uint32Array(32)
X2N[0] = 0x40000000 // x^1
for (let n = 1; n < 32; n++) X2N[n] = multModP(X2N[n - 1]!, X2N[n - 1]!)

/** x^(n·2^k) modulo the polynomial. */
function x2nModP (n: number, k: number): number {
  let p = 0x80000000 // x^0
  while (n > 0) {
    if (n % 2 === 1) p = multModP(X2N[k & 31]!, p)
    n = Math.floor(n / 2)
    k++
  }
  return p
}

/**
 * CRC-32 of A‖B from CRC(A), CRC(B) and the length of B, without reading the bytes again
 * (zlib 1.3's crc32_combine, @see https://github.com/madler/zlib/blob/v1.3.1/crc32.c). Bodies
 * share their pieces (`both` is v4‖v6, dialect_a is a header and the plain lines), so each piece's
 * CRC is computed once per build and combined per body.
 */
export function crc32Combine (crc1: number, crc2: number, len2: number): number {
  return (multModP(x2nModP(len2, 3), crc1 >>> 0) ^ crc2) >>> 0
}

const pieceCrcs = new WeakMap<Uint8Array, number>()

/** Records the CRC-32 of a piece known from an earlier build (a reused chunk of text). */
export function rememberCrc (p: Uint8Array, crc: number): void {
  pieceCrcs.set(p, crc)
}

/** The CRC-32 of a piece, computed once per piece object. */
export function crcOf (p: Uint8Array): number {
  let c = pieceCrcs.get(p)
  if (c === undefined) {
    c = crc32(p)
    pieceCrcs.set(p, c)
  }
  return c
}

/** The parts of one gzip body, in order: header, compressed pieces, final block, trailer. */
export function gzipParts (pieces: readonly Uint8Array[], compressor: ChunkCompressor): GzipPart[] {
  let crc = 0
  let size = 0
  const parts: GzipPart[] = [{ key: null, bytes: HEADER }]
  for (const p of pieces) {
    if (p.length === 0) continue
    crc = crc32Combine(crc, crcOf(p), p.length)
    size += p.length
    parts.push(compressor.compressPart(p))
  }
  parts.push({ key: null, bytes: FINAL })
  const trailer = new Uint8Array(8)
  const view = new DataView(trailer.buffer)
  view.setUint32(0, crc >>> 0, true)
  // ISIZE is the length modulo 2^32 (RFC 1952 §2.3.1).
  view.setUint32(4, size % 0x100000000, true)
  parts.push({ key: null, bytes: trailer })
  return parts
}

/**
 * Gzip of some bytes, by the same construction as every feed body (one chunk).
 *
 * @example
 *   gunzipSync(gzipBytes(Buffer.from('10.0.0.0/8\n'))).toString() // '10.0.0.0/8\n'
 */
export function gzipBytes (bytes: Uint8Array, level = GZIP_LEVEL): Uint8Array {
  return Buffer.concat(gzipParts([bytes], new ChunkCompressor(level, null)).map((p) => p.bytes))
}
