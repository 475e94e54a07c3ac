/**
 * A request target must be ASCII: anything else is percent-encoded (RFC 3986 §2.1, RFC 9112 §3.2).
 * uWS hands a raw byte above 0x7E over as the UTF-8 it decodes (U+FFFD where it is not UTF-8), so
 * such a target is refused with 400 on every route rather than matched, logged or forwarded as a
 * string the rest of the server never expects (issue 35: 500 on forwarded routes).
 */
import type { HttpRequest } from 'uWebSockets.js'
import { ThreatfeedError } from '../errors.js'

const FIRST_PRINTABLE = 0x21
const LAST_PRINTABLE = 0x7e

/** True when `s` holds a character outside printable ASCII (uWS refuses controls and spaces itself). */
export function hasRawByte (s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c > LAST_PRINTABLE || c < FIRST_PRINTABLE) return true
  }
  return false
}

/** Whether the target of `req` (path and query) is not ASCII: read it before any await. */
export function isRawTarget (req: HttpRequest): boolean {
  return hasRawByte(req.getUrl()) || hasRawByte(req.getQuery() ?? '')
}

export function rawTargetError (): ThreatfeedError {
  return new ThreatfeedError('TF_ERR_BAD_REQUEST', ['the request target holds a byte that is not ASCII; percent-encode it (RFC 3986, section 2.1)'])
}

/**
 * A string as its UTF-8 bytes, one character per byte: what node:http writes byte for byte
 * (latin1) where it refuses characters above U+00FF. A front-end thread forwards the path and
 * header values so, and the main thread's uWS decodes exactly what the thread's decoded.
 */
export function asLatin1Bytes (s: string): string {
  for (let i = 0; i < s.length; i++) {
    if (s.charCodeAt(i) > 0x7f) return Buffer.from(s, 'utf8').toString('latin1')
  }
  return s
}
