/**
 * The body of a variant over its entry cap: SPEC 2.9 with details {entries, limit, hint}, never a
 * truncated list (SPEC 7.2). Built with the rest of the snapshot so a 413 costs a lookup too.
 */
import { ThreatfeedError } from '../../errors.js'
import type { WireFamily } from '../../pool/protocol.js'

export function tooLargeHint (family: WireFamily, listFeed: boolean): string {
  const raise = listFeed ? "raise the list's max_entries" : 'publish it through a list with a higher max_entries'
  return family === 'both' ? `ask for family=v4 or family=v6, or ${raise}` : raise
}

/**
 * @example
 *   JSON.parse(renderTooLarge(200000, 131072, 'v4', true).toString())
 *   // { success: false, error: 'feed exceeds its entry limit', details: { entries: 200000, limit: 131072, hint: "raise the list's max_entries" } }
 */
export function renderTooLarge (entries: number, limit: number, family: WireFamily, listFeed: boolean): Uint8Array {
  const error = new ThreatfeedError('TF_ERR_FEED_TOO_LARGE')
  return Buffer.from(JSON.stringify({ success: false, error: error.message, details: { entries, limit, hint: tooLargeHint(family, listFeed) } }))
}
