/**
 * UUIDs as 16 bytes in stored values: written from a pool of random bytes (a new rule's id
 * never exists as a string until it is read), parsed from and formatted to the canonical
 * lowercase text form (RFC 9562 §4: 8-4-4-4-12 hex digits).
 */
import { randomFillSync } from 'node:crypto'
import type { ByteReader, ByteWriter } from './byte-writer.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
/** Offsets of the 16 bytes' hex pairs in the text form. */
const HEX_AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34]
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'))

/** 4 KiB of randomness: 256 ids per refill, as crypto.randomUUID buffers its own. */
const pool = Buffer.alloc(4096)
let poolAt = pool.length

export function isUuid (s: string): boolean {
  return s.length === 36 && UUID.test(s)
}

/** A random version-4 UUID (RFC 9562 §5.4), as bytes. */
export function writeRandomUuid (w: ByteWriter): void {
  if (poolAt === pool.length) {
    randomFillSync(pool)
    poolAt = 0
  }
  const at = poolAt
  poolAt += 16
  pool[at + 6] = (pool[at + 6]! & 0x0f) | 0x40
  pool[at + 8] = (pool[at + 8]! & 0x3f) | 0x80
  w.copy(pool, at, 16)
}

/** A canonical UUID string (isUuid) as its 16 bytes. */
export function writeUuid (w: ByteWriter, id: string): void {
  w.reserve(16)
  for (const at of HEX_AT) w.u8(parseInt(id.slice(at, at + 2), 16))
}

export function readUuid (r: ByteReader): string {
  const b = r.buf
  const p = r.pos
  if (p + 16 > b.length) throw new RangeError('value ends early')
  r.pos = p + 16
  return HEX[b[p]!]! + HEX[b[p + 1]!]! + HEX[b[p + 2]!]! + HEX[b[p + 3]!]! + '-' +
    HEX[b[p + 4]!]! + HEX[b[p + 5]!]! + '-' + HEX[b[p + 6]!]! + HEX[b[p + 7]!]! + '-' +
    HEX[b[p + 8]!]! + HEX[b[p + 9]!]! + '-' + HEX[b[p + 10]!]! + HEX[b[p + 11]!]! +
    HEX[b[p + 12]!]! + HEX[b[p + 13]!]! + HEX[b[p + 14]!]! + HEX[b[p + 15]!]!
}
