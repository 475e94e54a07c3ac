/**
 * Conditional requests (RFC 9110 §13.1.2, §13.1.3, §13.2.2; DECISIONS §5): weak If-None-Match with
 * lists and `*`, If-None-Match before If-Modified-Since, the three HTTP-date forms.
 */
import t from 'tap'
import fc from 'fast-check'
import { isNotModified, matchesIfNoneMatch, parseHttpDate } from '../../src/http/conditional.js'

const TAG = '"p-v4-b-i-5d41402abc4b2a76"'

t.test('If-None-Match: weak comparison, lists and *', async (t) => {
  const cases: Array<{ description: string, header: string, expected: boolean }> = [
    { description: 'exact tag', header: TAG, expected: true },
    { description: 'weak form of the tag', header: `W/${TAG}`, expected: true },
    { description: 'in a list, last', header: `"a", "b", ${TAG}`, expected: true },
    { description: 'in a list, first, no spaces', header: `${TAG},"a"`, expected: true },
    { description: 'weak in a list', header: `"a", W/${TAG}`, expected: true },
    { description: 'star', header: '*', expected: true },
    { description: 'star with spaces', header: '  *  ', expected: true },
    { description: 'star as a member', header: '"a", *', expected: true },
    { description: 'other tag', header: '"p-v4-b-g-5d41402abc4b2a76"', expected: false },
    { description: 'the gzip tag does not match identity', header: '"p-v4-b-g-5d41402abc4b2a76", "x"', expected: false },
    { description: 'prefix of the tag', header: '"p-v4-b-i-5d41402abc4b2a7"', expected: false },
    { description: 'tag with a suffix', header: '"p-v4-b-i-5d41402abc4b2a766"', expected: false },
    { description: 'unquoted tag is not a tag', header: 'p-v4-b-i-5d41402abc4b2a76', expected: false },
    { description: 'lowercase w/ is not the weak prefix', header: `w/${TAG}`, expected: false },
    { description: 'unquoted junk then the tag', header: `junk, ${TAG}`, expected: true },
    { description: 'unterminated tag', header: '"p-v4-b-i-5d41', expected: false },
    { description: 'unterminated after a miss', header: `"a", "p-v4-b-i`, expected: false },
    { description: 'star followed by junk is not *', header: '*x', expected: false },
    { description: 'empty quoted tag', header: '""', expected: false },
    { description: 'only commas', header: ', ,', expected: false },
  ]
  for (const c of cases) t.equal(matchesIfNoneMatch(c.header, TAG), c.expected, `${c.description}: ${c.header}`)
})

t.test('If-None-Match: a list holding the tag matches, one without it does not', async (t) => {
  const other = fc.stringMatching(/^[a-z0-9-]{0,20}$/).map((s) => `"${s}"`).filter((s) => s !== TAG)
  const member = fc.oneof(other, other.map((s) => `W/${s}`))
  t.doesNotThrow(() => fc.assert(fc.property(fc.array(member, { maxLength: 5 }), fc.array(member, { maxLength: 5 }), fc.boolean(), fc.constantFrom(',', ', ', ' ,\t'),
    (before, after, weak, sep) => {
      const withTag = [...before, weak ? `W/${TAG}` : TAG, ...after].join(sep)
      const withoutTag = [...before, ...after].join(sep)
      return matchesIfNoneMatch(withTag, TAG) && !matchesIfNoneMatch(withoutTag, TAG)
    })))
})

// Sun, 06 Nov 1994 08:49:37 GMT, the example of RFC 9110 §5.6.7.
const RFC_EXAMPLE = 784111777000
const NOW = Date.UTC(2026, 0, 1)

t.test('HTTP-date: the three forms and what is not a date', async (t) => {
  const cases: Array<{ description: string, input: string, expected: number }> = [
    { description: 'IMF-fixdate', input: 'Sun, 06 Nov 1994 08:49:37 GMT', expected: RFC_EXAMPLE },
    { description: 'rfc850-date', input: 'Sunday, 06-Nov-94 08:49:37 GMT', expected: RFC_EXAMPLE },
    { description: 'asctime-date, one-digit day', input: 'Sun Nov  6 08:49:37 1994', expected: RFC_EXAMPLE },
    { description: 'asctime-date, two-digit day', input: 'Sun Nov 06 08:49:37 1994', expected: RFC_EXAMPLE },
    { description: 'surrounding spaces', input: '  Sun, 06 Nov 1994 08:49:37 GMT ', expected: RFC_EXAMPLE },
    { description: 'rfc850 year 30 is 2030 (not > 50 years ahead)', input: 'Wednesday, 09-Jan-30 00:00:00 GMT', expected: Date.UTC(2030, 0, 9) },
    { description: 'rfc850 year 80 is 1980 (2080 is > 50 years ahead)', input: 'Tuesday, 01-Jan-80 00:00:00 GMT', expected: Date.UTC(1980, 0, 1) },
    { description: 'leap second', input: 'Wed, 31 Dec 2016 23:59:60 GMT', expected: Date.UTC(2017, 0, 1) },
    { description: '29 February of a leap year', input: 'Thu, 29 Feb 2024 12:00:00 GMT', expected: Date.UTC(2024, 1, 29, 12) },
    { description: '29 February of another year', input: 'Fri, 29 Feb 2023 12:00:00 GMT', expected: NaN },
    { description: '31 April', input: 'Thu, 31 Apr 2024 12:00:00 GMT', expected: NaN },
    { description: 'hour 24', input: 'Sun, 06 Nov 1994 24:00:00 GMT', expected: NaN },
    { description: 'minute 60', input: 'Sun, 06 Nov 1994 08:60:00 GMT', expected: NaN },
    { description: 'not GMT', input: 'Sun, 06 Nov 1994 08:49:37 UTC', expected: NaN },
    { description: 'lowercase month', input: 'Sun, 06 nov 1994 08:49:37 GMT', expected: NaN },
    { description: 'unknown day name', input: 'Sux, 06 Nov 1994 08:49:37 GMT', expected: NaN },
    { description: 'one-digit day in IMF-fixdate', input: 'Sun, 6 Nov 1994 08:49:37 GMT', expected: NaN },
    { description: 'ISO 8601 is not an HTTP-date', input: '1994-11-06T08:49:37Z', expected: NaN },
    { description: 'epoch number', input: '784111777', expected: NaN },
    { description: 'empty', input: '', expected: NaN },
    { description: 'two dates', input: 'Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT', expected: NaN },
    { description: 'year 0094', input: 'Sun, 06 Nov 0094 08:49:37 GMT', expected: NaN },
    { description: 'rfc850 with short day name', input: 'Sun, 06-Nov-94 08:49:37 GMT', expected: NaN },
  ]
  for (const c of cases) t.same(parseHttpDate(c.input, NOW), c.expected, `${c.description}: ${c.input}`)
})

t.test('HTTP-date: every instant round-trips through IMF-fixdate, rfc850 and asctime', async (t) => {
  const days = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday']
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
  const p2 = (n: number): string => String(n).padStart(2, '0')
  t.doesNotThrow(() => fc.assert(fc.property(fc.integer({ min: Date.UTC(1980, 0, 1) / 1000, max: Date.UTC(2075, 11, 31) / 1000 }), (sec) => {
    const ms = sec * 1000
    const d = new Date(ms)
    const time = `${p2(d.getUTCHours())}:${p2(d.getUTCMinutes())}:${p2(d.getUTCSeconds())}`
    const rfc850 = `${days[d.getUTCDay()]}, ${p2(d.getUTCDate())}-${months[d.getUTCMonth()]}-${p2(d.getUTCFullYear() % 100)} ${time} GMT`
    const asctime = `${days[d.getUTCDay()]!.slice(0, 3)} ${months[d.getUTCMonth()]} ${String(d.getUTCDate()).padStart(2, ' ')} ${time} ${d.getUTCFullYear()}`
    return parseHttpDate(d.toUTCString(), NOW) === ms && parseHttpDate(rfc850, NOW) === ms && parseHttpDate(asctime, NOW) === ms
  })))
})

t.test('isNotModified: the §13.2.2 decision', async (t) => {
  const lm = 'Sun, 06 Nov 1994 08:49:37 GMT'
  const cases: Array<{ description: string, inm: string, ims: string, lastModified?: number, expected: boolean }> = [
    { description: 'no conditional headers', inm: '', ims: '', expected: false },
    { description: 'matching tag', inm: TAG, ims: '', expected: true },
    { description: 'other tag', inm: '"x"', ims: '', expected: false },
    { description: 'If-None-Match wins over a matching If-Modified-Since', inm: '"x"', ims: lm, expected: false },
    { description: 'If-None-Match wins over an old If-Modified-Since', inm: TAG, ims: 'Sat, 01 Jan 1994 00:00:00 GMT', expected: true },
    { description: 'If-Modified-Since equal to Last-Modified', inm: '', ims: lm, expected: true },
    { description: 'If-Modified-Since later than Last-Modified', inm: '', ims: 'Mon, 07 Nov 1994 00:00:00 GMT', expected: true },
    { description: 'If-Modified-Since one second earlier', inm: '', ims: 'Sun, 06 Nov 1994 08:49:36 GMT', expected: false },
    { description: 'If-Modified-Since in rfc850 form, equal', inm: '', ims: 'Sunday, 06-Nov-94 08:49:37 GMT', expected: true },
    { description: 'invalid If-Modified-Since is ignored', inm: '', ims: 'yesterday', expected: false },
    { description: 'sub-second Last-Modified is compared in whole seconds', inm: '', ims: 'Sunday, 06-Nov-94 08:49:37 GMT', lastModified: RFC_EXAMPLE + 999, expected: true },
  ]
  for (const c of cases) {
    t.equal(isNotModified(c.inm, c.ims, TAG, lm, c.lastModified ?? RFC_EXAMPLE), c.expected, c.description)
  }
})
