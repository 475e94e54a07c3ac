/**
 * The interchange format for lists of CIDR prefixes between net, geo and feed, and across worker
 * threads (both arrays are transferable): no object per network.
 *
 *   v4: [addr, len,  addr, len, …]                 2 words per prefix
 *   v6: [w0, w1, w2, w3, len,  w0, …]              5 words per prefix, w0 most significant
 */
import type { TextWriter } from './text-writer.js'

export interface PackedPrefixes {
  /** Pairs `[addr, len]`. */
  v4: Uint32Array
  /** 5-tuples `[w0, w1, w2, w3, len]`, big-endian words. */
  v6: Uint32Array
}

/**
 * A new empty PackedPrefixes.
 *
 * @example
 *   countPrefixes(emptyPrefixes()) // 0
 */
export function emptyPrefixes (): PackedPrefixes {
  return { v4: new Uint32Array(0), v6: new Uint32Array(0) }
}

/**
 * Number of prefixes held.
 *
 * @example
 *   countPrefixes({ v4: new Uint32Array([0x0a000000, 8]), v6: new Uint32Array(0) }) // 1
 */
export function countPrefixes (p: PackedPrefixes): number {
  return (p.v4.length >> 1) + p.v6.length / 5
}

/**
 * Appends `addr/len\n` for every prefix (IPv4 first, in array order) to a TextWriter.
 *
 * @example
 *   const w = new TextWriter()
 *   writePrefixLines({ v4: new Uint32Array([0x0a000000, 8]), v6: new Uint32Array(0) }, w)
 *   // w.finish() holds '10.0.0.0/8\n'
 */
export function writePrefixLines (p: PackedPrefixes, writer: TextWriter): void {
  const { v4, v6 } = p
  for (let k = 0; k < v4.length; k += 2) writer.writeCidr4(v4[k]!, v4[k + 1]!)
  for (let k = 0; k < v6.length; k += 5) writer.writeCidr6(v6, k, v6[k + 4]!)
}
