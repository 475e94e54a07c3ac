/**
 * Conditional GET/HEAD for feeds (DECISIONS §5).
 *
 * @see rfc9110#section-13.1.2 (If-None-Match: weak comparison, lists, `*`)
 * @see rfc9110#section-13.1.3 (If-Modified-Since: ignored when invalid or when If-None-Match is sent)
 * @see rfc9110#section-13.2.2 (evaluation order)
 * @see rfc9110#section-5.6.7 (HTTP-date: IMF-fixdate, rfc850-date and asctime-date are all accepted)
 *
 * If-Match and If-Unmodified-Since are not evaluated: they guard state-changing requests, and a
 * feed is read-only. Evaluation happens only after authentication and only for a response that
 * would be 200 (§13.2.1: preconditions are ignored when the response would not be 2xx).
 *
 * A poll that echoes our own tag or date is the common case, so both checks start with an exact
 * string comparison and fall back to parsing only for the rare other forms. Nothing here allocates.
 */

const QUOTE = 0x22
const COMMA = 0x2c
const SPACE = 0x20
const TAB = 0x09
const UPPER_W = 0x57
const SLASH = 0x2f
const STAR = 0x2a
const COLON = 0x3a
const DASH = 0x2d
const DIGIT_0 = 0x30
const DIGIT_9 = 0x39

const isOws = (c: number): boolean => c === SPACE || c === TAB

/**
 * Weak comparison of an If-None-Match value against our (strong, quoted) entity tag: true when any
 * listed tag has the same opaque-tag, with or without `W/`, or when a member is `*`.
 * Malformed members are skipped rather than failing the whole field.
 *
 * @example
 *   matchesIfNoneMatch('W/"a1", "b2"', '"b2"') // true
 *   matchesIfNoneMatch('*', '"b2"')            // true
 */
export function matchesIfNoneMatch (header: string, etag: string): boolean {
  if (header === etag) return true
  const n = header.length
  const tagLength = etag.length
  let i = 0
  while (i < n) {
    while (i < n && (isOws(header.charCodeAt(i)) || header.charCodeAt(i) === COMMA)) i++
    if (i >= n) break
    let c = header.charCodeAt(i)
    if (c === STAR) {
      let j = i + 1
      while (j < n && isOws(header.charCodeAt(j))) j++
      if (j >= n || header.charCodeAt(j) === COMMA) return true
      i = j
    } else {
      if (c === UPPER_W && header.charCodeAt(i + 1) === SLASH) {
        i += 2
        c = header.charCodeAt(i)
      }
      if (c === QUOTE) {
        const close = header.indexOf('"', i + 1)
        // An unterminated tag ends the list: nothing after it can be delimited reliably.
        if (close < 0) return false
        if (close - i + 1 === tagLength && header.startsWith(etag, i)) return true
        i = close + 1
      }
    }
    while (i < n && header.charCodeAt(i) !== COMMA) i++
  }
  return false
}

const MONTHS = 'JanFebMarAprMayJunJulAugSepOctNovDec'
const SHORT_DAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'] as const
const LONG_DAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'] as const

function digit (s: string, i: number): number {
  const c = s.charCodeAt(i)
  return c >= DIGIT_0 && c <= DIGIT_9 ? c - DIGIT_0 : -1
}

/** Two digits at i (or, when `leadingSpace`, a space then one digit), else -1. */
function twoDigits (s: string, i: number, leadingSpace = false): number {
  const b = digit(s, i + 1)
  if (leadingSpace && s.charCodeAt(i) === SPACE) return b
  const a = digit(s, i)
  return a < 0 || b < 0 ? -1 : a * 10 + b
}

function monthAt (s: string, i: number): number {
  if (i + 3 > s.length) return -1
  for (let m = 0; m < 12; m++) {
    if (s.charCodeAt(i) === MONTHS.charCodeAt(m * 3) && s.charCodeAt(i + 1) === MONTHS.charCodeAt(m * 3 + 1) && s.charCodeAt(i + 2) === MONTHS.charCodeAt(m * 3 + 2)) return m
  }
  return -1
}

/** `hh:mm:ss` at i as seconds of the day, else -1. Second 60 is a leap second (§5.6.7). */
function timeAt (s: string, i: number): number {
  if (s.charCodeAt(i + 2) !== COLON || s.charCodeAt(i + 5) !== COLON) return -1
  const h = twoDigits(s, i)
  const m = twoDigits(s, i + 3)
  const sec = twoDigits(s, i + 6)
  if (h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 || sec > 60) return -1
  return h * 3600 + m * 60 + sec
}

function toEpochMs (year: number, month: number, day: number, seconds: number): number {
  // Date.UTC maps years 0-99 onto 1900-1999; no real HTTP-date is that old, so refuse them.
  if (day < 1 || day > 31 || year < 100) return NaN
  const ms = Date.UTC(year, month, day)
  // Date.UTC rolls 31 Feb into March; a date that does not exist is not a valid HTTP-date.
  if (new Date(ms).getUTCDate() !== day) return NaN
  return ms + seconds * 1000
}

function startsWithDay (s: string, days: readonly string[]): number {
  for (const d of days) if (s.startsWith(d)) return d.length
  return -1
}

/**
 * Parses an HTTP-date in any of the three forms a recipient must accept; returns epoch ms, or
 * NaN when the value is not a valid date. `now` resolves rfc850's two-digit year: a year more
 * than 50 years in the future means the most recent past year with those digits.
 *
 * @example
 *   parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')  // 784111777000
 *   parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT') // 784111777000
 *   parseHttpDate('Sun Nov  6 08:49:37 1994')       // 784111777000
 */
export function parseHttpDate (value: string, now: number = Date.now()): number {
  let s = value
  if (s.length > 0 && (isOws(s.charCodeAt(0)) || isOws(s.charCodeAt(s.length - 1)))) s = s.trim()
  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
  if (s.length === 29 && s.charCodeAt(3) === COMMA) {
    if (startsWithDay(s, SHORT_DAYS) !== 3 || s.charCodeAt(4) !== SPACE || s.charCodeAt(7) !== SPACE || s.charCodeAt(11) !== SPACE || s.charCodeAt(16) !== SPACE || s.charCodeAt(25) !== SPACE || !s.endsWith('GMT')) return NaN
    const day = twoDigits(s, 5)
    const month = monthAt(s, 8)
    const y1 = twoDigits(s, 12)
    const y2 = twoDigits(s, 14)
    const t = timeAt(s, 17)
    if (day < 0 || month < 0 || y1 < 0 || y2 < 0 || t < 0) return NaN
    return toEpochMs(y1 * 100 + y2, month, day, t)
  }
  // asctime-date: "Sun Nov  6 08:49:37 1994"
  if (s.length === 24 && s.charCodeAt(3) === SPACE) {
    if (startsWithDay(s, SHORT_DAYS) !== 3 || s.charCodeAt(7) !== SPACE || s.charCodeAt(10) !== SPACE || s.charCodeAt(19) !== SPACE) return NaN
    const month = monthAt(s, 4)
    const day = twoDigits(s, 8, true)
    const t = timeAt(s, 11)
    const y1 = twoDigits(s, 20)
    const y2 = twoDigits(s, 22)
    if (day < 0 || month < 0 || y1 < 0 || y2 < 0 || t < 0) return NaN
    return toEpochMs(y1 * 100 + y2, month, day, t)
  }
  // rfc850-date: "Sunday, 06-Nov-94 08:49:37 GMT"
  const dayLength = startsWithDay(s, LONG_DAYS)
  if (dayLength > 0 && s.length === dayLength + 24) {
    const p = dayLength
    if (s.charCodeAt(p) !== COMMA || s.charCodeAt(p + 1) !== SPACE || s.charCodeAt(p + 4) !== DASH || s.charCodeAt(p + 8) !== DASH || s.charCodeAt(p + 11) !== SPACE || s.charCodeAt(p + 20) !== SPACE || !s.endsWith('GMT')) return NaN
    const day = twoDigits(s, p + 2)
    const month = monthAt(s, p + 5)
    const yy = twoDigits(s, p + 9)
    const t = timeAt(s, p + 12)
    if (day < 0 || month < 0 || yy < 0 || t < 0) return NaN
    const thisYear = new Date(now).getUTCFullYear()
    let year = thisYear - (thisYear % 100) + yy
    if (year > thisYear + 50) year -= 100
    return toEpochMs(year, month, day, t)
  }
  return NaN
}

/**
 * The whole §13.2.2 decision for a GET or HEAD whose answer would be 200: true means 304.
 *
 * - If-None-Match present (even empty of valid members): it alone decides (weak comparison).
 * - Else If-Modified-Since: 304 when Last-Modified is not later than it; an invalid date is ignored.
 *
 * `lastModifiedHttp` is the representation's Last-Modified header text and `lastModified` the same
 * instant in epoch ms. Absent headers are passed as '' (what uWS getHeader returns).
 *
 * @example
 *   isNotModified('"x"', '', '"x"', 'Sun, 06 Nov 1994 08:49:37 GMT', 784111777000) // true
 */
export function isNotModified (ifNoneMatch: string, ifModifiedSince: string, etag: string, lastModifiedHttp: string, lastModified: number): boolean {
  if (ifNoneMatch !== '') return matchesIfNoneMatch(ifNoneMatch, etag)
  if (ifModifiedSince === '') return false
  if (ifModifiedSince === lastModifiedHttp) return true
  const since = parseHttpDate(ifModifiedSince)
  // HTTP dates have one-second resolution; compare whole seconds so a sub-second
  // Last-Modified never looks later than the date it was sent as.
  return !Number.isNaN(since) && Math.floor(lastModified / 1000) * 1000 <= since
}
