/**
 * The `Idempotency-Key` request header of signal posts (docs/signals.md, "Idempotency-Key"): a
 * batch posted again with the key of one already stored is answered as it was then, and is not
 * stored twice. Syntax after draft-ietf-httpapi-idempotency-key-header §2.1 (a Structured Field
 * string; the quotes are optional here, since most clients send the bare value).
 */
import { createHash } from 'node:crypto'
import { ThreatfeedError } from '../errors.js'

/** Longest key accepted: a UUID is 36, a client's own composite key rarely more than 100. */
export const IDEMPOTENCY_KEY_MAX = 255
const VISIBLE_FIRST = 0x21
const VISIBLE_LAST = 0x7e
const QUOTE = 0x22
const BACKSLASH = 0x5c

/**
 * The key of a header value, or null when the header is absent (uWS reads an absent header as
 * ''). A bad value is the caller's fault: TF_ERR_BAD_REQUEST.
 *
 * @example
 *   parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"') // '8e03978e-40d5-43e8-bc93-6894a57f9324'
 */
export function parseIdempotencyKey (header: string | undefined): string | null {
  if (header === undefined || header === '') return null
  let key = header
  if (key.length >= 2 && key.charCodeAt(0) === QUOTE && key.charCodeAt(key.length - 1) === QUOTE) key = key.slice(1, -1)
  let ok = key.length >= 1 && key.length <= IDEMPOTENCY_KEY_MAX
  for (let i = 0; ok && i < key.length; i++) {
    const c = key.charCodeAt(i)
    ok = c >= VISIBLE_FIRST && c <= VISIBLE_LAST && c !== QUOTE && c !== BACKSLASH
  }
  if (!ok) throw new ThreatfeedError('TF_ERR_BAD_REQUEST', [`Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_MAX} visible ASCII characters, without quotes or backslashes inside`])
  return key
}

/** What a key is bound to: the API version and the body, byte for byte. */
export function requestDigest (api: string, body: Buffer): string {
  return createHash('sha256').update(api).update('\0').update(body).digest('hex')
}
