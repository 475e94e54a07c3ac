/**
 * Reader for the ip-location-db ASN CSV (`@ip-location-db/asn`: asn-ipv4.csv, asn-ipv6.csv):
 *
 *   first,last,asn,org            first/last an inclusive address range
 *   1.0.0.0,1.0.0.255,13335,"Cloudflare, Inc."
 *
 * RFC 4180 quoting: a quoted field may hold commas, doubled quotes and line breaks. The files are
 * 30 MB together, so the scan works on char codes over one latin1 string (one char per byte, so
 * string and buffer offsets agree) and decodes only the organization, as UTF-8, from the bytes.
 */
import { ThreatfeedError } from '../errors.js'
import { parseIpv4, parseIpv6 } from '../net/ip.js'
import { compare128 } from '../net/words.js'

/** One data row. The object is reused from row to row: copy what you keep. */
export interface AsnCsvRow {
  family: 4 | 6
  /** IPv4 range (family 4). */
  first4: number
  last4: number
  /** IPv6 range (family 6): words 0..3 first, 4..7 last. */
  readonly words: Uint32Array
  asn: number
  /** Organization name, "" when the field is empty. */
  org: string
  /** 1-based line number, for messages. */
  line: number
}

const CH_LF = 0x0a
const CH_CR = 0x0d
const CH_COMMA = 0x2c
const CH_QUOTE = 0x22
const CH_COLON = 0x3a
const CH_DOT = 0x2e
const CH_0 = 0x30

/**
 * Calls `onRow` for every data row of a CSV file's bytes. A first line that is not data (a
 * header) is skipped. Throws TF_ERR_GEO_LOAD [file, "line N: …"] on a malformed row.
 *
 * @example
 *   forEachAsnCsvRow(readFileSync('asn-ipv4.csv'), 'asn-ipv4.csv', (r) => console.log(r.asn, r.org))
 */
export function forEachAsnCsvRow (buf: Buffer, file: string, onRow: (row: AsnCsvRow) => void, onProgress?: (bytesDone: number) => void): number {
  const text = buf.toString('latin1')
  const end = text.length
  const row: AsnCsvRow = { family: 4, first4: 0, last4: 0, words: new Uint32Array(8), asn: 0, org: '', line: 0 }
  const fail = (reason: string): never => { throw new ThreatfeedError('TF_ERR_GEO_LOAD', [file, `line ${row.line}: ${reason}`]) }
  let pos = 0
  let rows = 0
  while (pos < end) {
    row.line++
    if (text.charCodeAt(pos) === CH_LF || (text.charCodeAt(pos) === CH_CR && text.charCodeAt(pos + 1) === CH_LF)) {
      pos = text.indexOf('\n', pos) + 1 // blank line
      continue
    }
    // Three unquoted fields: first, last, asn.
    const c1 = text.indexOf(',', pos)
    const c2 = c1 < 0 ? -1 : text.indexOf(',', c1 + 1)
    const c3 = c2 < 0 ? -1 : text.indexOf(',', c2 + 1)
    const nl = text.indexOf('\n', pos)
    const lineEnd = nl < 0 ? end : nl
    if (c3 < 0 || c3 > lineEnd) {
      if (rows === 0 && row.line === 1) { pos = lineEnd + 1; continue } // header or junk first line
      fail('expected 4 fields: first,last,asn,organization')
    }
    const family = scanRange(text, pos, c1, c1 + 1, c2, row)
    const asn = scanAsn(text, c2 + 1, c3)
    if (family === 0 || asn < 0) {
      if (rows === 0 && row.line === 1) { pos = lineEnd + 1; continue }
      if (family === 0) fail(describeBadRange(text, pos, c1, c2))
      fail(`invalid ASN "${text.slice(c2 + 1, c3)}"`)
    }
    row.family = family as 4 | 6
    row.asn = asn
    // The organization: quoted (may span lines) or plain, then the end of the line.
    let after: number
    if (text.charCodeAt(c3 + 1) === CH_QUOTE) {
      let i = c3 + 2
      let escaped = false
      for (;;) {
        const q = text.indexOf('"', i)
        if (q < 0) fail('unterminated quoted field')
        if (text.charCodeAt(q + 1) === CH_QUOTE) { escaped = true; i = q + 2; continue }
        row.org = buf.toString('utf8', c3 + 2, q)
        if (escaped) row.org = row.org.replaceAll('""', '"')
        after = q + 1
        break
      }
    } else {
      const stop = lineEnd > c3 && text.charCodeAt(lineEnd - 1) === CH_CR ? lineEnd - 1 : lineEnd
      for (let i = c3 + 1; i < stop; i++) {
        const c = text.charCodeAt(i)
        if (c === CH_COMMA) fail('expected 4 fields, found more (quote organizations that hold commas)')
        if (c === CH_QUOTE) fail('stray quote in an unquoted field')
      }
      row.org = buf.toString('utf8', c3 + 1, stop)
      after = stop
    }
    if (text.charCodeAt(after) === CH_CR) after++
    if (after < end && text.charCodeAt(after) !== CH_LF) fail('unexpected text after the organization field')
    pos = after + 1
    rows++
    onRow(row)
    if (onProgress !== undefined && (rows & 0xffff) === 0) onProgress(pos)
  }
  onProgress?.(end)
  return rows
}

/** Parses both range ends into `row`; returns the family, or 0 when invalid or reversed. */
function scanRange (text: string, s1: number, e1: number, s2: number, e2: number, row: AsnCsvRow): number {
  if (contains(text, s1, e1, CH_COLON)) {
    if (!parseIpv6(text.slice(s1, e1), row.words, 0) || !parseIpv6(text.slice(s2, e2), row.words, 4)) return 0
    return compare128(row.words, 0, row.words, 4) <= 0 ? 6 : 0
  }
  const a = parseIpv4(text.slice(s1, e1))
  const b = parseIpv4(text.slice(s2, e2))
  if (a < 0 || b < 0 || a > b) return 0
  row.first4 = a
  row.last4 = b
  return 4
}

function contains (text: string, s: number, e: number, ch: number): boolean {
  for (let i = s; i < e; i++) if (text.charCodeAt(i) === ch) return true
  return false
}

/** Decimal 0..4294967295 without leading zeros (0 itself allowed); -1 otherwise. */
function scanAsn (text: string, s: number, e: number): number {
  if (e <= s || e - s > 10 || (e - s > 1 && text.charCodeAt(s) === CH_0)) return -1
  let v = 0
  for (let i = s; i < e; i++) {
    const d = text.charCodeAt(i) - CH_0
    if (d < 0 || d > 9) return -1
    v = v * 10 + d
  }
  return v <= 0xffffffff ? v : -1
}

/** Why a range was refused; only runs on the error path. */
function describeBadRange (text: string, s1: number, c1: number, c2: number): string {
  const first = text.slice(s1, c1)
  const last = text.slice(c1 + 1, c2)
  let digitsOnly = first.length > 0
  for (let i = 0; i < first.length; i++) {
    const c = first.charCodeAt(i)
    if (c === CH_DOT || c === CH_COLON || c < CH_0 || c > CH_0 + 9) digitsOnly = false
  }
  if (digitsOnly) return `numeric addresses ("${first}") are not supported; use the dotted/colon CSV (asn-ipv4.csv, asn-ipv6.csv), not the -num variant`
  return `invalid or reversed address range "${first}" - "${last}"`
}
