/**
 * The request-level checks of a signal batch (DECISIONS §3), each a 400 with the SPEC 2.6 error
 * body: Content-Type, UTF-8, JSON, array, 1..1000 entries. The body is parsed exactly once.
 */
import { isUtf8 } from 'node:buffer'
import { ThreatfeedError } from '../errors.js'
import { MAX_BATCH_ENTRIES } from './schemas.js'

export const MESSAGES = {
  contentType: 'Content-Type must be application/json',
  utf8: 'request body is not valid UTF-8',
  json: 'request body is not valid JSON',
  array: 'request body must be a JSON array of signal entries',
  size: (n: number) => `batch must contain 1 to ${MAX_BATCH_ENTRIES} entries (got ${n})`,
} as const

const badRequest = (message: string): ThreatfeedError => new ThreatfeedError('TF_ERR_BAD_REQUEST', [message])

/**
 * Accepts a missing Content-Type (read as JSON) and `application/json` with any parameters and
 * any letter case (RFC 9110 §8.3.1: media types are case-insensitive); refuses everything else.
 *
 * @example
 *   checkContentType('Application/JSON; charset=utf-8') // passes
 *   checkContentType('text/plain')                      // throws TF_ERR_BAD_REQUEST
 */
export function checkContentType (header: string): void {
  if (header === '') return
  const semi = header.indexOf(';')
  const type = (semi < 0 ? header : header.slice(0, semi)).trim().toLowerCase()
  if (type !== 'application/json') throw badRequest(MESSAGES.contentType)
}

export interface ParsedBatch {
  /** The body decoded as UTF-8 (the v1 path slices entries out of it). */
  readonly text: string
  readonly entries: unknown[]
}

/**
 * Decodes and parses a batch body.
 *
 * @example
 *   parseBatch(Buffer.from('[{"type":"access_rules","action":"block","ip":"10.0.0.1"}]')).entries.length // 1
 */
export function parseBatch (body: Buffer): ParsedBatch {
  // isUtf8 is simdutf-backed; Buffer#toString alone would replace bad sequences with U+FFFD
  // and the v1 stream record would no longer be the bytes the client sent.
  if (!isUtf8(body)) throw badRequest(MESSAGES.utf8)
  const text = body.toString('utf8')
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    // V8's text quotes the input and differs between Node versions; clients get a stable one.
    throw badRequest(MESSAGES.json)
  }
  if (!Array.isArray(value)) throw badRequest(MESSAGES.array)
  if (value.length < 1 || value.length > MAX_BATCH_ENTRIES) throw badRequest(MESSAGES.size(value.length))
  return { text, entries: value }
}
