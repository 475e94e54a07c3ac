/**
 * Content-coding negotiation for feeds: gzip or identity, nothing else (DECISIONS §5).
 *
 * @see rfc9110#section-12.5.3 (Accept-Encoding) and #section-12.4.2 (quality values)
 *
 * Every feed poll runs this, so it scans the header once with char codes and allocates nothing.
 * Weights are kept as integers in thousandths (the qvalue grammar allows at most three decimals),
 * which makes `q=0.001` exactly comparable with `q=0`.
 */

const COMMA = 0x2c
const SEMI = 0x3b
const SPACE = 0x20
const TAB = 0x09
const EQUALS = 0x3d
const DOT = 0x2e
const DIGIT_0 = 0x30
const DIGIT_1 = 0x31
const DIGIT_9 = 0x39
const LOWER_Q = 0x71
const UPPER_Q = 0x51

/** Weight of a coding that is absent from the header. */
const UNSET = -1
/** Weight of an element whose parameters do not parse: the element is ignored. */
const INVALID = -2

const isOws = (c: number): boolean => c === SPACE || c === TAB

/** Case-insensitive comparison of header[start, end) with a lowercase ASCII word. */
function equalsLower (header: string, start: number, end: number, word: string): boolean {
  if (end - start !== word.length) return false
  for (let i = 0; i < word.length; i++) {
    // OR 0x20 folds A-Z onto a-z. The words hold only letters and '-'; the only other character
    // that folds onto one of them is CR (onto '-'), which a parsed header value cannot contain.
    if ((header.charCodeAt(start + i) | 0x20) !== word.charCodeAt(i)) return false
  }
  return true
}

/**
 * Parses `q=<qvalue>` in header[start, end) (OWS already trimmed), returning thousandths, or
 * INVALID when it is not a qvalue: `0(.ddd)?` or `1(.000)?`.
 */
function parseQ (header: string, start: number, end: number): number {
  const q = header.charCodeAt(start)
  if ((q !== LOWER_Q && q !== UPPER_Q) || header.charCodeAt(start + 1) !== EQUALS) return INVALID
  let i = start + 2
  if (i >= end) return INVALID
  const lead = header.charCodeAt(i)
  if (lead !== DIGIT_0 && lead !== DIGIT_1) return INVALID
  let value = lead === DIGIT_1 ? 1000 : 0
  i++
  if (i === end) return value
  if (header.charCodeAt(i) !== DOT) return INVALID
  i++
  let scale = 100
  for (let digits = 0; i < end; i++, digits++) {
    const c = header.charCodeAt(i)
    if (digits === 3 || c < DIGIT_0 || c > DIGIT_9) return INVALID
    if (lead === DIGIT_1 && c !== DIGIT_0) return INVALID
    value += (c - DIGIT_0) * scale
    scale /= 10
  }
  return value
}

/** The last value prefersGzip decided (per thread: each has its own module instance) and its answer. */
let lastHeader = ''
let lastGzip = false

/**
 * Decides whether the gzip representation is sent for an `Accept-Encoding` value ('' when the
 * header is absent, which means identity: SPEC §9 keeps old clients byte-identical).
 *
 * Rules: `gzip` and `x-gzip` in any case name gzip; `*` covers gzip (and identity) when they are
 * not listed; `q=0` excludes. gzip is chosen when its weight is above zero and not below the
 * weight of identity; an unlisted identity is only the fallback, so `gzip;q=0.5` still gets gzip
 * while `gzip;q=0.5, identity` gets identity. An element with a malformed weight is ignored.
 *
 * @example
 *   prefersGzip('gzip, deflate, br') // true
 *   prefersGzip('gzip;q=0, *')       // false
 *   prefersGzip('*')                 // true
 */
export function prefersGzip (header: string): boolean {
  // A fleet sends one value over and over: a compare with the last one instead of a parse. The
  // value is no secret, so an early-exit compare times nothing worth knowing.
  if (header === lastHeader) return lastGzip
  const gzip = decide(header)
  lastHeader = header
  lastGzip = gzip
  return gzip
}

function decide (header: string): boolean {
  const n = header.length
  if (n === 0) return false
  let gzip = UNSET
  let identity = UNSET
  let star = UNSET
  let i = 0
  while (i < n) {
    // One list element: OWS coding OWS [";" OWS "q=" qvalue OWS] up to the next comma.
    while (i < n && (isOws(header.charCodeAt(i)) || header.charCodeAt(i) === COMMA)) i++
    const codingStart = i
    while (i < n) {
      const c = header.charCodeAt(i)
      if (c === COMMA || c === SEMI || isOws(c)) break
      i++
    }
    const codingEnd = i
    while (i < n && isOws(header.charCodeAt(i))) i++
    let weight = 1000
    if (i < n && header.charCodeAt(i) === SEMI) {
      i++
      while (i < n && isOws(header.charCodeAt(i))) i++
      const paramStart = i
      while (i < n && header.charCodeAt(i) !== COMMA) i++
      let paramEnd = i
      while (paramEnd > paramStart && isOws(header.charCodeAt(paramEnd - 1))) paramEnd--
      weight = parseQ(header, paramStart, paramEnd)
    } else if (i < n && header.charCodeAt(i) !== COMMA) {
      // Junk after the coding ("gzip x"): not an element of the grammar.
      weight = INVALID
    }
    while (i < n && header.charCodeAt(i) !== COMMA) i++
    if (weight === INVALID || codingEnd === codingStart) continue
    // The first mention of a coding decides; a repeated one does not override it.
    if (gzip === UNSET && (equalsLower(header, codingStart, codingEnd, 'gzip') || equalsLower(header, codingStart, codingEnd, 'x-gzip'))) gzip = weight
    else if (identity === UNSET && equalsLower(header, codingStart, codingEnd, 'identity')) identity = weight
    else if (star === UNSET && codingEnd - codingStart === 1 && header.charCodeAt(codingStart) === 0x2a) star = weight
  }
  const gzipWeight = gzip !== UNSET ? gzip : star !== UNSET ? star : 0
  const identityWeight = identity !== UNSET ? identity : star !== UNSET ? star : 0
  return gzipWeight > 0 && gzipWeight >= identityWeight
}
