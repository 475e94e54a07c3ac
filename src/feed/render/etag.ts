/**
 * Strong entity tags (DECISIONS §5): the variant (format, family, action, checksum, encoding)
 * followed by a digest of the exact body bytes, so the same bytes get the same tag on every node
 * and after every restart, and two representations never share one.
 */
import type { WireAction, WireFamily, WireFormat } from '../../pool/protocol.js'

export type Encoding = 'identity' | 'gzip'

/**
 * @example
 *   formatEtag('plain', 'v4', 'block', false, 'gzip', 'q1w2e3') // '"plain.v4.block.gzip.q1w2e3"'
 */
export function formatEtag (format: WireFormat, family: WireFamily, action: WireAction, checksum: boolean, encoding: Encoding, digest: string, shard?: { index: number, of: number } | null): string {
  const part = shard === undefined || shard === null ? '' : `.s${shard.index}of${shard.of}`
  return `"${format}.${family}.${action}${checksum ? '.md5' : ''}${part}.${encoding}.${digest}"`
}

/** base64url of a digest: ETag-safe (RFC 9110 §8.8.3 etagc) and shorter than hex. */
export function toTagDigest (digest: Buffer): string {
  return digest.toString('base64url')
}
