/**
 * A growable scratch buffer for encoding LMDB values, and the matching reader.
 *
 * Values are written into one long-lived buffer and handed to lmdb-js as a view of it. That is
 * safe because every write of the embedded store happens inside a write transaction, where
 * lmdb-js copies the value into the database before `put` returns (write.js: the `writeTxn`
 * path executes the instruction at once); the next encode may then overwrite the scratch. The
 * buffer is allocated outside Node's pool (allocUnsafeSlow): lmdb-js caches the address of a
 * value's ArrayBuffer, and a pooled slab would be shared with unrelated buffers.
 *
 * Numbers are little-endian; strings are UTF-8 with a u32 byte length in front.
 */

const INITIAL_BYTES = 64 * 1024

/**
 * Buffer's own UTF-8 primitives (what `write` and `toString` call after checking arguments).
 * Undocumented but long stable; lmdb-js and msgpackr use them the same way.
 */
export type FastBuffer = Buffer & {
  utf8Write (s: string, offset: number): number
  utf8Slice (start: number, end: number): string
}

export function allocScratch (bytes: number): FastBuffer {
  return Buffer.allocUnsafeSlow(bytes) as FastBuffer
}

/** Strings shorter than this are written a character at a time while they are ASCII: below
 *  that length the call into Buffer's UTF-8 encoder costs more than the loop. */
const SHORT_STRING = 64

export class ByteWriter {
  #buf: FastBuffer
  #view: DataView
  pos = 0

  constructor (initialBytes = INITIAL_BYTES) {
    this.#buf = allocScratch(initialBytes)
    this.#view = new DataView(this.#buf.buffer, this.#buf.byteOffset, this.#buf.length)
  }

  /** Starts a new value; the previous one must have been handed over already. */
  reset (): void {
    this.pos = 0
  }

  /** Makes room for `bytes` more bytes, keeping what is written. */
  reserve (bytes: number): void {
    if (this.pos + bytes <= this.#buf.length) return
    let size = this.#buf.length * 2
    while (size < this.pos + bytes) size *= 2
    const next = allocScratch(size)
    this.#buf.copy(next, 0, 0, this.pos)
    this.#buf = next
    this.#view = new DataView(next.buffer, next.byteOffset, next.length)
  }

  u8 (v: number): void {
    this.reserve(1)
    this.#buf[this.pos++] = v
  }

  u32 (v: number): void {
    this.reserve(4)
    this.#view.setUint32(this.pos, v, true)
    this.pos += 4
  }

  /** Overwrites the u32 written earlier at `at` (a length known only once what follows is written). */
  u32At (at: number, v: number): void {
    if (at + 4 > this.pos) throw new RangeError('u32At past what is written')
    this.#view.setUint32(at, v, true)
  }

  f64 (v: number): void {
    this.reserve(8)
    this.#view.setFloat64(this.pos, v, true)
    this.pos += 8
  }

  /** u32 byte length, then the UTF-8 bytes. */
  str (s: string): void {
    // 3 bytes per UTF-16 unit bounds UTF-8 (a surrogate pair is 2 units, 4 bytes).
    this.reserve(4 + s.length * 3)
    const at = this.pos
    this.pos += 4
    const bytes = this.#utf8(s)
    this.#view.setUint32(at, bytes, true)
  }

  /** The UTF-8 bytes of `s`, without a length (key parts). */
  raw (s: string): void {
    this.reserve(s.length * 3)
    this.#utf8(s)
  }

  /** Bytes as they are. */
  bytes (b: Uint8Array): void {
    this.reserve(b.length)
    this.#buf.set(b, this.pos)
    this.pos += b.length
  }

  /** Writes at pos (room reserved) and moves past; returns the byte count. */
  #utf8 (s: string): number {
    const n = s.length
    const buf = this.#buf
    const start = this.pos
    if (n < SHORT_STRING) {
      let i = 0
      for (; i < n; i++) {
        const c = s.charCodeAt(i)
        if (c >= 0x80) break
        buf[start + i] = c
      }
      if (i === n) {
        this.pos = start + n
        return n
      }
    }
    const bytes = buf.utf8Write(s, start)
    this.pos = start + bytes
    return bytes
  }

  /** The value written since reset(): a view, valid until the next write. */
  view (): Buffer {
    return this.#buf.subarray(0, this.pos)
  }

  /**
   * The value written since reset() as lmdb-js's put takes a value it may read in place: the
   * whole buffer, marked with `start` and `end` (write.js reads those before the length, as
   * msgpackr's reused buffers use it). No view object per value: with this and UUIDs copied
   * without a view, v1 ingest + apply took 0.93x the CPU per batch (old and new builds alternating
   * in one process). Valid until the next write, like view(); only for puts inside a write
   * transaction.
   */
  lmdbValue (): Buffer {
    const buf: FastBuffer & { start?: number, end?: number } = this.#buf
    buf.start = 0
    buf.end = this.pos
    return buf
  }

  /** Copies `length` bytes of `src` from `at` (a handful: a loop beats a view and a copy). */
  copy (src: Uint8Array, at: number, length: number): void {
    this.reserve(length)
    const buf = this.#buf
    const pos = this.pos
    for (let i = 0; i < length; i++) buf[pos + i] = src[at + i]!
    this.pos = pos + length
  }
}

/** Reads what ByteWriter wrote; a truncated or foreign value throws RangeError. */
export class ByteReader {
  readonly buf: FastBuffer
  readonly #view: DataView
  pos: number

  constructor (buf: Buffer, pos = 0) {
    this.buf = buf as FastBuffer
    this.#view = new DataView(buf.buffer, buf.byteOffset, buf.length)
    this.pos = pos
  }

  u8 (): number {
    if (this.pos >= this.buf.length) throw new RangeError('value ends early')
    return this.buf[this.pos++]!
  }

  u32 (): number {
    const v = this.#view.getUint32(this.pos, true)
    this.pos += 4
    return v
  }

  f64 (): number {
    const v = this.#view.getFloat64(this.pos, true)
    this.pos += 8
    return v
  }

  str (): string {
    const end = this.#lengthEnd()
    const s = this.buf.utf8Slice(this.pos, end)
    this.pos = end
    return s
  }

  /** A u32 byte length, then that many bytes: a view of them. */
  bytes (): Buffer {
    const end = this.#lengthEnd()
    const b = this.buf.subarray(this.pos, end)
    this.pos = end
    return b
  }

  /** Reads a u32 length; where that many bytes from here end. */
  #lengthEnd (): number {
    const end = this.u32() + this.pos
    if (end > this.buf.length) throw new RangeError('value ends early')
    return end
  }
}
