/**
 * A bounded decoder for the MaxMind DB data section (MaxMind DB format 2.0, "Output Data
 * Section"). mmdb-lib's decoder is not exported and trusts the file: a pointer cycle recurses
 * until the stack overflows and an out-of-range pointer reads past the buffer. This one checks
 * every offset against its section, refuses pointers to pointers, and caps nesting, so a corrupt
 * file is a clear error and never a crash or a hang.
 *
 * Two ways in: `find` walks a key path through maps without decoding anything else (what the
 * index needs: `country.iso_code`, `autonomous_system_number`, …), and `decode` turns a value into
 * plain JavaScript (metadata).
 */
import { check, MmdbFormatError } from './mmdb-format-error.js'

/** Data types of the format (spec "Output Data Section"); 0 means "extended: type in the next byte". */
export const MmdbType = {
  extended: 0,
  pointer: 1,
  utf8: 2,
  double: 3,
  bytes: 4,
  uint16: 5,
  uint32: 6,
  map: 7,
  int32: 8,
  uint64: 9,
  uint128: 10,
  array: 11,
  container: 12,
  endMarker: 13,
  boolean: 14,
  float: 15,
} as const

/**
 * Deepest nesting of maps and arrays we follow. libmaxminddb allows 512; the records we read
 * need 2 (`country` → `iso_code`), and metadata 2. A pointer cycle deepens on every turn, so the
 * cap is also what ends one.
 */
const MAX_DEPTH = 64

/** Pointer value bias by pointer size (spec "Pointer - 1"). */
const POINTER_BIAS = [0, 2048, 526336, 0] as const

export class DataDecoder {
  readonly #buf: Buffer
  /** Absolute offset of the section start: pointers are relative to it. */
  readonly #base: number
  /** Section length in bytes. */
  readonly #size: number
  // Results of #control(), kept in fields so the hot path allocates nothing.
  #type = 0
  #len = 0
  /** Section-relative offset of the payload after the control byte(s). */
  #payload = 0

  constructor (buf: Buffer, base: number, size: number) {
    check(base >= 0 && size >= 0 && base + size <= buf.length, 'data section lies outside the file')
    this.#buf = buf
    this.#base = base
    this.#size = size
  }

  get size (): number { return this.#size }

  /**
   * Section-relative offset of the value at `path` inside the map at `offset` (pointers
   * followed), or -1 when some key is absent or a step is not a map. Siblings are skipped with
   * bounds checks but never decoded.
   */
  find (offset: number, path: readonly Uint8Array[]): number {
    let at = this.#resolve(offset)
    for (const key of path) {
      this.#control(at)
      if (this.#type !== MmdbType.map) return -1
      let pos = this.#payload
      let found = -1
      for (let i = this.#len; i > 0; i--) {
        const keyAt = this.#resolve(pos)
        const matches = this.#isString(keyAt, key)
        pos = this.#skip(pos, 0)
        if (matches) { found = this.#resolve(pos); break }
        pos = this.#skip(pos, 0)
      }
      if (found < 0) return -1
      at = found
    }
    return at
  }

  /** The UTF-8 string at `offset` (pointers followed), or undefined if the value is not a string. */
  readString (offset: number): string | undefined {
    this.#control(this.#resolve(offset))
    if (this.#type !== MmdbType.utf8) return undefined
    const start = this.#base + this.#payload
    return this.#buf.toString('utf8', start, start + this.#len)
  }

  /** The unsigned integer at `offset` if it is one that fits a double exactly, else undefined. */
  readUint (offset: number): number | undefined {
    this.#control(this.#resolve(offset))
    const t = this.#type
    if (t !== MmdbType.uint16 && t !== MmdbType.uint32 && t !== MmdbType.uint64 && t !== MmdbType.uint128) return undefined
    let v = 0
    for (let i = 0; i < this.#len; i++) v = v * 256 + this.#buf[this.#base + this.#payload + i]!
    return Number.isSafeInteger(v) ? v : undefined
  }

  /**
   * Decodes the value at `offset` into plain JavaScript: maps become null-prototype objects,
   * uint64/uint128 become numbers when exact and bigints otherwise, bytes become a Buffer view.
   */
  decode (offset: number, depth = 0): unknown {
    if (depth > MAX_DEPTH) throw new MmdbFormatError(`data nested deeper than ${MAX_DEPTH} levels (a pointer cycle?)`)
    const at = this.#resolve(offset)
    this.#control(at)
    const type = this.#type
    const len = this.#len
    const p = this.#payload
    const abs = this.#base + p
    switch (type) {
      case MmdbType.utf8: return this.#buf.toString('utf8', abs, abs + len)
      case MmdbType.double: return this.#buf.readDoubleBE(abs)
      case MmdbType.float: return this.#buf.readFloatBE(abs)
      case MmdbType.bytes: return this.#buf.subarray(abs, abs + len)
      case MmdbType.boolean: return len === 1
      case MmdbType.int32: return len === 0 ? 0 : this.#buf.readIntBE(abs, len)
      case MmdbType.uint16:
      case MmdbType.uint32:
      case MmdbType.uint64:
      case MmdbType.uint128: {
        let v = 0n
        for (let i = 0; i < len; i++) v = (v << 8n) | BigInt(this.#buf[abs + i]!)
        return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v
      }
      case MmdbType.map: {
        const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>
        let pos = p
        for (let i = 0; i < len; i++) {
          const key = this.decode(pos, depth + 1)
          if (typeof key !== 'string') throw new MmdbFormatError(`map key at data offset ${pos} is not a string`)
          pos = this.#skip(pos, depth + 1)
          out[key] = this.decode(pos, depth + 1)
          pos = this.#skip(pos, depth + 1)
        }
        return out
      }
      case MmdbType.array: {
        const out: unknown[] = []
        let pos = p
        for (let i = 0; i < len; i++) {
          out.push(this.decode(pos, depth + 1))
          pos = this.#skip(pos, depth + 1)
        }
        return out
      }
    }
    throw new MmdbFormatError(`unsupported data type ${type} at data offset ${at}`)
  }

  /** Offset just past the value at `offset`, without following pointers (their size is fixed). */
  #skip (offset: number, depth: number): number {
    if (depth > MAX_DEPTH) throw new MmdbFormatError(`data nested deeper than ${MAX_DEPTH} levels`)
    this.#control(offset)
    const type = this.#type
    if (type === MmdbType.pointer) return this.#payload // #control put the pointer's end there
    if (type === MmdbType.map || type === MmdbType.array) {
      let pos = this.#payload
      const n = type === MmdbType.map ? this.#len * 2 : this.#len
      for (let i = 0; i < n; i++) pos = this.#skip(pos, depth + 1)
      return pos
    }
    if (type === MmdbType.boolean) return this.#payload
    return this.#payload + this.#len
  }

  /** Follows one pointer if `offset` holds one; pointers to pointers are invalid (spec). */
  #resolve (offset: number): number {
    this.#control(offset)
    if (this.#type !== MmdbType.pointer) return offset
    const target = this.#len
    this.#control(target)
    if (this.#type === MmdbType.pointer) throw new MmdbFormatError(`pointer at data offset ${offset} points to another pointer`)
    return target
  }

  #isString (offset: number, key: Uint8Array): boolean {
    this.#control(offset)
    if (this.#type !== MmdbType.utf8 || this.#len !== key.length) return false
    const abs = this.#base + this.#payload
    for (let i = 0; i < key.length; i++) if (this.#buf[abs + i] !== key[i]) return false
    return true
  }

  /**
   * Reads the control byte(s) at section offset `offset` into #type, #len, #payload, checking
   * that the whole value lies inside the section. For a pointer, #len is the target offset and
   * #payload the offset just past the pointer.
   */
  #control (offset: number): void {
    const buf = this.#buf
    const base = this.#base
    const size = this.#size
    if (offset < 0 || offset >= size) throw new MmdbFormatError(`data offset ${offset} outside the data section (${size} bytes)`)
    const ctrl = buf[base + offset]!
    let pos = offset + 1
    let type = ctrl >> 5
    if (type === MmdbType.pointer) {
      const ss = (ctrl >> 3) & 3
      if (pos + ss + 1 > size) throw new MmdbFormatError(`pointer at data offset ${offset} runs past the data section`)
      let v: number
      const a = base + pos
      if (ss === 0) v = ((ctrl & 7) << 8) | buf[a]!
      else if (ss === 1) v = ((ctrl & 7) << 16) | (buf[a]! << 8) | buf[a + 1]!
      else if (ss === 2) v = (ctrl & 7) * 0x1000000 + ((buf[a]! << 16) | (buf[a + 1]! << 8) | buf[a + 2]!)
      else v = buf.readUInt32BE(a)
      v += POINTER_BIAS[ss]!
      if (v >= size) throw new MmdbFormatError(`pointer at data offset ${offset} points to ${v}, outside the data section (${size} bytes)`)
      this.#type = MmdbType.pointer
      this.#len = v
      this.#payload = pos + ss + 1
      return
    }
    if (type === MmdbType.extended) {
      if (pos >= size) throw new MmdbFormatError(`truncated extended type at data offset ${offset}`)
      type = buf[base + pos]! + 7
      pos++
      if (type < 8 || type > 15 || type === MmdbType.container || type === MmdbType.endMarker) {
        throw new MmdbFormatError(`invalid extended type ${type} at data offset ${offset}`)
      }
    }
    let len = ctrl & 0x1f
    if (len >= 29) {
      const extra = len - 28
      if (pos + extra > size) throw new MmdbFormatError(`truncated size at data offset ${offset}`)
      const a = base + pos
      if (len === 29) len = 29 + buf[a]!
      else if (len === 30) len = 285 + ((buf[a]! << 8) | buf[a + 1]!)
      else len = 65821 + ((buf[a]! << 16) | (buf[a + 1]! << 8) | buf[a + 2]!)
      pos += extra
    }
    checkSize(type, len, offset)
    // Maps and arrays count entries, booleans carry their value in the size: no payload bytes.
    if (type !== MmdbType.map && type !== MmdbType.array && type !== MmdbType.boolean) {
      if (pos + len > size) throw new MmdbFormatError(`value at data offset ${offset} (${len} bytes) runs past the data section`)
    }
    this.#type = type
    this.#len = len
    this.#payload = pos
  }
}

/** The fixed or bounded payload sizes of the numeric types (spec "Output Data Section"). */
function checkSize (type: number, len: number, offset: number): void {
  let ok = true
  switch (type) {
    case MmdbType.double: ok = len === 8; break
    case MmdbType.float: ok = len === 4; break
    case MmdbType.uint16: ok = len <= 2; break
    case MmdbType.uint32:
    case MmdbType.int32: ok = len <= 4; break
    case MmdbType.uint64: ok = len <= 8; break
    case MmdbType.uint128: ok = len <= 16; break
    case MmdbType.boolean: ok = len <= 1; break
  }
  if (!ok) throw new MmdbFormatError(`invalid size ${len} for data type ${type} at data offset ${offset}`)
}
