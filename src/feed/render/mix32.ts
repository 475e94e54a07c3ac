/**
 * MurmurHash3's 32-bit finaliser: every input bit reaches every output bit. The one hash the
 * renderers use on network numbers (chunk cut points in text-streams.ts, shard choice in
 * shard-networks.ts).
 *
 * @example
 *   mix32(1) // 1364076727
 */
export function mix32 (h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}
