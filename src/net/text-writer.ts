/**
 * Writes network text straight into a byte buffer. Rendering a million CIDRs through template
 * strings and a join costs a string per line plus the rope flattening; writing ASCII bytes into
 * one growing Uint8Array (pino's approach to its hot path, in miniature) costs neither, and the
 * result goes to a socket or stdout as is.
 */

const CH_DOT = 0x2e
const CH_COLON = 0x3a
const CH_SLASH = 0x2f
const CH_NL = 0x0a
const HEX_DIGITS = new Uint8Array([...'0123456789abcdef'].map((c) => c.charCodeAt(0)))

/** Decimal digits of 0..255: length and up to three ASCII bytes. */
const DEC_LENGTH = new Uint8Array(256)
const DEC_BYTES = new Uint8Array(256 * 3)
for (let v = 0; v < 256; v++) {
  const text = String(v)
  DEC_LENGTH[v] = text.length
  for (let k = 0; k < text.length; k++) DEC_BYTES[v * 3 + k] = text.charCodeAt(k)
}

const groups = new Uint16Array(8)

/**
 * @example
 *   const w = new TextWriter()
 *   w.writeCidr4(0x0a000000, 8)
 *   Buffer.from(w.finish()).toString() // '10.0.0.0/8\n'
 */
export class TextWriter {
  #buf: Uint8Array
  #pos: number

  constructor (capacity = 4096) {
    this.#buf = new Uint8Array(Math.max(64, capacity))
    this.#pos = 0
  }

  get length (): number { return this.#pos }

  /** Makes room for `n` more bytes. */
  #reserve (n: number): void {
    if (this.#pos + n <= this.#buf.length) return
    const next = new Uint8Array(Math.max(this.#buf.length * 2, this.#pos + n))
    next.set(this.#buf.subarray(0, this.#pos))
    this.#buf = next
  }

  writeByte (c: number): void {
    this.#reserve(1)
    this.#buf[this.#pos++] = c
  }

  /** Writes ASCII text (callers only pass 7-bit text). */
  writeAscii (text: string): void {
    this.#reserve(text.length)
    for (let i = 0; i < text.length; i++) this.#buf[this.#pos++] = text.charCodeAt(i)
  }

  #decimal (v: number): void {
    const n = DEC_LENGTH[v]!
    const b = this.#buf
    let p = this.#pos
    b[p++] = DEC_BYTES[v * 3]!
    if (n > 1) b[p++] = DEC_BYTES[v * 3 + 1]!
    if (n > 2) b[p++] = DEC_BYTES[v * 3 + 2]!
    this.#pos = p
  }

  writeIpv4 (u32: number): void {
    this.#reserve(15)
    this.#decimal(u32 >>> 24)
    this.#buf[this.#pos++] = CH_DOT
    this.#decimal((u32 >>> 16) & 255)
    this.#buf[this.#pos++] = CH_DOT
    this.#decimal((u32 >>> 8) & 255)
    this.#buf[this.#pos++] = CH_DOT
    this.#decimal(u32 & 255)
  }

  /** RFC 5952 text, as formatIpv6 in ip.ts (the two are tested against each other). */
  writeIpv6 (w: ArrayLike<number>, offset: number): void {
    this.#reserve(39)
    for (let k = 0; k < 4; k++) {
      const word = w[offset + k]!
      groups[2 * k] = word >>> 16
      groups[2 * k + 1] = word & 0xffff
    }
    // Longest run of ≥ 2 zero groups, first of equals (RFC 5952 §4.2.2–4.2.3).
    let runStart = -1
    let runLength = 1
    for (let k = 0; k < 8;) {
      if (groups[k] !== 0) { k++; continue }
      const s = k
      while (k < 8 && groups[k] === 0) k++
      if (k - s > runLength) { runStart = s; runLength = k - s }
    }
    const b = this.#buf
    let p = this.#pos
    for (let k = 0; k < 8; k++) {
      if (k === runStart) {
        b[p++] = CH_COLON
        b[p++] = CH_COLON
        k += runLength - 1
        continue
      }
      if (k > 0 && k !== runStart + runLength) b[p++] = CH_COLON
      const g = groups[k]!
      if (g >= 0x1000) b[p++] = HEX_DIGITS[g >>> 12]!
      if (g >= 0x100) b[p++] = HEX_DIGITS[(g >>> 8) & 15]!
      if (g >= 0x10) b[p++] = HEX_DIGITS[(g >>> 4) & 15]!
      b[p++] = HEX_DIGITS[g & 15]!
    }
    this.#pos = p
  }

  /** `addr/len\n` */
  writeCidr4 (addr: number, len: number): void {
    this.writeIpv4(addr)
    this.#reserve(5)
    this.#buf[this.#pos++] = CH_SLASH
    this.#decimal(len)
    this.#buf[this.#pos++] = CH_NL
  }

  /** `addr/len\n` */
  writeCidr6 (w: ArrayLike<number>, offset: number, len: number): void {
    this.writeIpv6(w, offset)
    this.#reserve(5)
    this.#buf[this.#pos++] = CH_SLASH
    this.#decimal(len)
    this.#buf[this.#pos++] = CH_NL
  }

  /** The bytes written so far (a view; the writer must not be used afterwards). */
  finish (): Uint8Array {
    return this.#buf.subarray(0, this.#pos)
  }

  /** Starts over in the same buffer: what finish() returned is overwritten by the next writes. */
  reset (): void {
    this.#pos = 0
  }
}
