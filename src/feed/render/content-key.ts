/**
 * Content keys: SHA-256 digests of bytes, under which the main thread shares what several feeds
 * (or several builds of one feed) hold alike — a stream's text, compressed chunks, assembled
 * bodies (src/feed/shared-content.ts). Sharing is sound only if a key names one content, so the
 * digest is a collision-resistant one: feed bodies of different workspaces meet in one process.
 *
 * A piece object is usually part of several bodies (plain, `both` and dialect_a share their
 * lines), so its digest is kept against the object and computed once; and most pieces are
 * chunks of text whose key comes from their networks (text-streams.ts), not from their bytes.
 * The two kinds never meet: a key made from networks is `n` and 43 characters, one longer
 * than a base64url SHA-256 of bytes.
 */
import { createHash } from 'node:crypto'

const digests = new WeakMap<Uint8Array, string>()

/**
 * The content key of some bytes (base64url SHA-256), memoised per Uint8Array object.
 *
 * @example
 *   digestOf(Buffer.from('10.0.0.0/8\n')) // 'mQp…' (43 characters)
 */
export function digestOf (piece: Uint8Array): string {
  let d = digests.get(piece)
  if (d === undefined) {
    d = createHash('sha256').update(piece).digest('base64url')
    digests.set(piece, d)
  }
  return d
}

/**
 * Records the content key of a piece whose key is known without hashing its bytes: a chunk of a
 * FamilyText (keyed by its networks) or a piece of the previous build's text.
 */
export function rememberDigest (piece: Uint8Array, key: string): void {
  digests.set(piece, key)
}

/**
 * The key of a sequence of pieces: one digest over their digests, so it costs a hash of the
 * digests, not of the bytes again. Two sequences with the same key have the same concatenation.
 *
 * @example
 *   keyOfPieces([header, ...chunks]) // the content key of the body they make
 */
export function keyOfPieces (pieces: readonly Uint8Array[]): string {
  const h = createHash('sha256')
  for (const p of pieces) if (p.length > 0) h.update(digestOf(p))
  return h.digest('base64url')
}
