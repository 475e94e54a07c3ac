/**
 * Encodes values into a MaxMind DB data section (MaxMind DB format 2.0, "Output Data Section").
 *
 * JavaScript values map to format types by shape: string → utf8, boolean → boolean,
 * Uint8Array → bytes, array → array, plain object → map, number → uint32 when a 32-bit unsigned
 * integer, int32 when a negative 32-bit integer, uint64 for larger safe integers, double
 * otherwise; bigint → uint64 or uint128. Where a schema fixes a type (metadata's uint16 fields),
 * wrap the number: `mmdbUint16(6)`.
 *
 * Repeated map keys and strings are written once and pointed to afterwards, as MaxMind's writers
 * do; the owner of the encoder also dedupes whole records (see MmdbWriter.record).
 */
import { MmdbType } from './mmdb-data.js'

const TYPED = Symbol('mmdb-typed')

/** A number with an explicit format type. */
export interface MmdbTypedNumber {
  readonly [TYPED]: true
  readonly type: 'uint16' | 'uint32' | 'uint64' | 'uint128' | 'int32' | 'double' | 'float'
  readonly value: number | bigint
}

export type MmdbValue =
  | string
  | number
  | bigint
  | boolean
  | Uint8Array
  | MmdbTypedNumber
  | readonly MmdbValue[]
  | { readonly [key: string]: MmdbValue }

const typed = (type: MmdbTypedNumber['type'], value: number | bigint): MmdbTypedNumber => ({ [TYPED]: true, type, value })
/** @example mmdbUint16(28) // record_size in metadata */
export const mmdbUint16 = (v: number): MmdbTypedNumber => typed('uint16', v)
export const mmdbUint32 = (v: number): MmdbTypedNumber => typed('uint32', v)
export const mmdbUint64 = (v: number | bigint): MmdbTypedNumber => typed('uint64', v)
export const mmdbDouble = (v: number): MmdbTypedNumber => typed('double', v)

function isTyped (v: unknown): v is MmdbTypedNumber {
  return typeof v === 'object' && v !== null && TYPED in v
}

/** Strings shorter than this are written inline: a pointer would not be smaller. */
const MIN_INTERNED_BYTES = 4

/**
 * An append-only data section. `write` returns the offset of the value, which is what a search
 * tree record (offset + node_count + 16) or a pointer refers to.
 */
export class DataSectionEncoder {
  #buf: Buffer
  #length = 0
  readonly #interned: Map<string, number> | undefined

  /** `intern: false` for the metadata section, which readers decode without pointers. */
  constructor (opts: { intern?: boolean, capacity?: number } = {}) {
    this.#buf = Buffer.allocUnsafe(Math.max(256, opts.capacity ?? 64 * 1024))
    this.#interned = opts.intern === false ? undefined : new Map()
  }

  get length (): number { return this.#length }

  /** The bytes written so far (a view; copy before writing more). */
  bytes (): Buffer { return this.#buf.subarray(0, this.#length) }

  /** Drops everything written after `length` (used to undo a duplicate record). */
  truncate (length: number): void { this.#length = length }

  write (v: MmdbValue): number {
    const at = this.#length
    this.#value(v)
    return at
  }

  #value (v: MmdbValue): void {
    if (typeof v === 'string') return this.#string(v)
    if (typeof v === 'number') return this.#number(v)
    if (typeof v === 'bigint') return this.#uint(v < 2n ** 64n ? MmdbType.uint64 : MmdbType.uint128, v)
    if (typeof v === 'boolean') return this.#control(MmdbType.boolean, v ? 1 : 0)
    if (v instanceof Uint8Array) {
      this.#control(MmdbType.bytes, v.length)
      this.#reserve(v.length).set(v, this.#length)
      this.#length += v.length
      return
    }
    if (isTyped(v)) return this.#typed(v)
    if (Array.isArray(v)) {
      const items = v as readonly MmdbValue[]
      this.#control(MmdbType.array, items.length)
      for (const x of items) this.#value(x)
      return
    }
    const entries = Object.entries(v as Record<string, MmdbValue>)
    this.#control(MmdbType.map, entries.length)
    for (const [k, x] of entries) {
      this.#string(k)
      this.#value(x)
    }
  }

  #number (n: number): void {
    if (Number.isInteger(n)) {
      if (n >= 0 && n <= 0xffffffff) return this.#uint(MmdbType.uint32, n)
      if (n < 0 && n >= -0x80000000) return this.#int32(n)
      if (n > 0 && Number.isSafeInteger(n)) return this.#uint(MmdbType.uint64, n)
    }
    this.#double(n)
  }

  #typed (t: MmdbTypedNumber): void {
    const v = t.value
    switch (t.type) {
      case 'uint16': return this.#uint(MmdbType.uint16, Number(checkUint(v, 16)))
      case 'uint32': return this.#uint(MmdbType.uint32, Number(checkUint(v, 32)))
      case 'uint64': return this.#uint(MmdbType.uint64, checkUint(v, 64))
      case 'uint128': return this.#uint(MmdbType.uint128, checkUint(v, 128))
      case 'int32': return this.#int32(Number(v))
      case 'double': return this.#double(Number(v))
      case 'float': {
        this.#control(MmdbType.float, 4)
        this.#reserve(4).writeFloatBE(Number(v), this.#length)
        this.#length += 4
      }
    }
  }

  #string (s: string): void {
    const n = Buffer.byteLength(s)
    const interned = this.#interned
    if (interned !== undefined && n >= MIN_INTERNED_BYTES) {
      const at = interned.get(s)
      if (at !== undefined) return this.#pointer(at)
      interned.set(s, this.#length)
    }
    this.#control(MmdbType.utf8, n)
    this.#reserve(n).write(s, this.#length, 'utf8')
    this.#length += n
  }

  /** Unsigned integers in the fewest big-endian bytes (0 takes none). */
  #uint (type: number, v: number | bigint): void {
    if (typeof v === 'number' && v <= 0xffffffff) {
      const n = v === 0 ? 0 : v < 0x100 ? 1 : v < 0x10000 ? 2 : v < 0x1000000 ? 3 : 4
      this.#control(type, n)
      const b = this.#reserve(n)
      for (let k = n - 1; k >= 0; k--) b[this.#length++] = Math.floor(v / 2 ** (8 * k)) & 0xff
      return
    }
    let big = BigInt(v)
    const bytes: number[] = []
    while (big > 0n) { bytes.unshift(Number(big & 0xffn)); big >>= 8n }
    this.#control(type, bytes.length)
    const b = this.#reserve(bytes.length)
    for (const x of bytes) b[this.#length++] = x
  }

  #int32 (v: number): void {
    this.#control(MmdbType.int32, 4)
    this.#reserve(4).writeInt32BE(v, this.#length)
    this.#length += 4
  }

  #double (v: number): void {
    this.#control(MmdbType.double, 8)
    this.#reserve(8).writeDoubleBE(v, this.#length)
    this.#length += 8
  }

  /** Pointer to a section offset, in the smallest of the four sizes (spec "Pointer - 1"). */
  #pointer (to: number): void {
    const b = this.#reserve(5)
    let i = this.#length
    if (to < 2048) {
      b[i++] = 0x20 | (to >>> 8); b[i++] = to & 0xff
    } else if (to < 2048 + 524288) {
      const v = to - 2048
      b[i++] = 0x28 | (v >>> 16); b[i++] = (v >>> 8) & 0xff; b[i++] = v & 0xff
    } else if (to < 526336 + 134217728) {
      const v = to - 526336
      b[i++] = 0x30 | (v >>> 24); b[i++] = (v >>> 16) & 0xff; b[i++] = (v >>> 8) & 0xff; b[i++] = v & 0xff
    } else {
      b[i++] = 0x38
      b.writeUInt32BE(to, i); i += 4
    }
    this.#length = i
  }

  /** Control byte, extended-type byte and size bytes (spec: sizes 29, 30, 31 take 1–3 more bytes). */
  #control (type: number, size: number): void {
    const b = this.#reserve(6)
    let i = this.#length
    const ext = type > 7
    const first = (ext ? 0 : type << 5)
    if (size < 29) {
      b[i++] = first | size
    } else if (size < 285) {
      b[i++] = first | 29
    } else if (size < 65821) {
      b[i++] = first | 30
    } else {
      if (size >= 65821 + 0x1000000) throw new RangeError(`value of ${size} bytes is too large for a MaxMind DB`)
      b[i++] = first | 31
    }
    if (ext) b[i++] = type - 7
    if (size >= 65821) {
      const v = size - 65821
      b[i++] = v >>> 16; b[i++] = (v >>> 8) & 0xff; b[i++] = v & 0xff
    } else if (size >= 285) {
      const v = size - 285
      b[i++] = v >>> 8; b[i++] = v & 0xff
    } else if (size >= 29) {
      b[i++] = size - 29
    }
    this.#length = i
  }

  #reserve (n: number): Buffer {
    if (this.#length + n > this.#buf.length) {
      const next = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#length + n))
      this.#buf.copy(next, 0, 0, this.#length)
      this.#buf = next
    }
    return this.#buf
  }
}

function checkUint (v: number | bigint, bits: number): bigint {
  const b = BigInt(v)
  if (b < 0n || b >= 2n ** BigInt(bits)) throw new RangeError(`${v} does not fit uint${bits}`)
  return b
}
