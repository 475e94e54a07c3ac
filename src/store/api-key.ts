/**
 * API key material (DECISIONS §2): 256 random bits, shown once, stored only as a SHA-256 hash.
 * A fast unsalted hash is right here: the key is uniformly random and 256 bits long, so there is
 * nothing to brute-force, and the hash is on the hot path of every authenticated request.
 */
import { createHash, randomBytes } from 'node:crypto'

export const API_KEY_PREFIX = 'tf_'

/** A new key: `tf_` + 43 base64url characters (32 random bytes). */
export function generateApiKey (): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url')
}

/** Lowercase hex SHA-256 of the key text, the only form ever stored. */
export function hashApiKey (key: string): string {
  return createHash('sha256').update(key).digest('hex')
}
