/**
 * Feed query parameters (SPEC §4.3, §2.8; DECISIONS §5): values, aliases, repeated parameters,
 * unknown parameters, list defaults under explicit parameters, nftables + both.
 */
import t from 'tap'
import { ThreatfeedError } from '../../src/errors.js'
import { parseFeedQuery, resolveVariant } from '../../src/http/feed-params.js'
import type { ListDefaults } from '../../src/store/types.js'

const FORMATS = ['plain', 'dialect_a', 'dialect_b', 'nftables', 'ipset', 'json', 'txt', 'alias_c', 'alias_d']

function errorOf (f: () => unknown): ThreatfeedError {
  try {
    f()
  } catch (e) {
    if (e instanceof ThreatfeedError) return e
    throw e
  }
  throw new Error('expected a ThreatfeedError')
}

t.test('valid queries resolve to a variant key (no list defaults)', async (t) => {
  const cases: Array<{ description: string, query: string, key: string }> = [
    { description: 'no parameters: plain, both, block', query: '', key: 'plain|both|block|' },
    { description: 'format', query: 'format=dialect_a', key: 'dialect_a|both|block|' },
    { description: 'alias txt is plain', query: 'format=txt', key: 'plain|both|block|' },
    { description: 'alias alias_c is plain', query: 'format=alias_c', key: 'plain|both|block|' },
    { description: 'alias alias_d is plain', query: 'format=alias_d', key: 'plain|both|block|' },
    { description: 'dialect_b', query: 'format=dialect_b&family=v6', key: 'dialect_b|v6|block|' },
    { description: 'nftables with v4', query: 'format=nftables&family=v4', key: 'nftables|v4|block|' },
    { description: 'allow list', query: 'action=allow', key: 'plain|both|allow|' },
    { description: 'checksum', query: 'checksum=md5&format=dialect_a', key: 'dialect_a|both|block|md5' },
    { description: 'unknown parameters are ignored', query: 'utm_source=x&format=plain&foo&=bar&&', key: 'plain|both|block|' },
    { description: 'parameter names are case-sensitive (Format is unknown)', query: 'Format=xml', key: 'plain|both|block|' },
    { description: 'percent-encoded value', query: 'format=dialect%5Fa', key: 'dialect_a|both|block|' },
    { description: 'percent-encoded name', query: 'f%6Frmat=nftables&family=v6', key: 'nftables|v6|block|' },
    { description: 'trailing ampersand', query: 'family=v4&', key: 'plain|v4|block|' },
  ]
  for (const c of cases) t.equal(resolveVariant(parseFeedQuery(c.query), null).key, c.key, `${c.description}: ?${c.query}`)
})

t.test('bad queries: 400 with details.supported', async (t) => {
  const cases: Array<{ description: string, query: string, message: string, details: Record<string, unknown> }> = [
    { description: 'unknown format', query: 'format=xml', message: 'unsupported format: "xml"', details: { parameter: 'format', value: 'xml', supported: FORMATS } },
    { description: 'format in capitals', query: 'format=PLAIN', message: 'unsupported format: "PLAIN"', details: { parameter: 'format', value: 'PLAIN', supported: FORMATS } },
    { description: 'empty format', query: 'format=', message: 'unsupported format: ""', details: { parameter: 'format', value: '', supported: FORMATS } },
    { description: 'format without =', query: 'format', message: 'unsupported format: ""', details: { parameter: 'format', value: '', supported: FORMATS } },
    { description: 'unknown family', query: 'family=v5', message: 'unsupported family: "v5"', details: { parameter: 'family', value: 'v5', supported: ['v4', 'v6', 'both'] } },
    { description: 'unknown action', query: 'action=deny', message: 'unsupported action: "deny"', details: { parameter: 'action', value: 'deny', supported: ['block', 'allow'] } },
    { description: 'unknown checksum', query: 'checksum=sha1', message: 'unsupported checksum: "sha1"', details: { parameter: 'checksum', value: 'sha1', supported: ['md5'] } },
    { description: 'empty checksum', query: 'checksum=', message: 'unsupported checksum: ""', details: { parameter: 'checksum', value: '', supported: ['md5'] } },
    { description: 'repeated format, same value', query: 'format=plain&format=plain', message: 'unsupported repeated parameter: format', details: { parameter: 'format', supported: FORMATS } },
    { description: 'repeated family', query: 'family=v4&x=1&family=v6', message: 'unsupported repeated parameter: family', details: { parameter: 'family', supported: ['v4', 'v6', 'both'] } },
    { description: 'repeated checksum', query: 'checksum=md5&checksum=md5', message: 'unsupported repeated parameter: checksum', details: { parameter: 'checksum', supported: ['md5'] } },
    { description: 'malformed percent-encoding', query: 'format=%E0%A4%A', message: 'unsupported format: "%E0%A4%A"', details: { parameter: 'format', value: '%E0%A4%A', supported: FORMATS } },
    { description: 'nftables with family both (default)', query: 'format=nftables', message: 'unsupported family "both" with format nftables: an nftables set holds one family', details: { parameter: 'family', value: 'both', supported: ['v4', 'v6'] } },
    { description: 'nftables with family both (explicit)', query: 'family=both&format=nftables', message: 'unsupported family "both" with format nftables: an nftables set holds one family', details: { parameter: 'family', value: 'both', supported: ['v4', 'v6'] } },
  ]
  for (const c of cases) {
    const e = errorOf(() => resolveVariant(parseFeedQuery(c.query), null))
    t.equal(e.code, 'TF_ERR_FEED_BAD_PARAM', c.description)
    t.equal(e.status, 400, c.description)
    t.equal(e.message, c.message, c.description)
    t.same(e.details, c.details, c.description)
  }
})

t.test('a long bad value is cut in the message', async (t) => {
  const e = errorOf(() => parseFeedQuery(`format=${'x'.repeat(500)}`))
  t.ok(e.message.length < 100, e.message)
  t.equal((e.details as { value: string }).value, 'x'.repeat(64) + '…')
})

t.test('list defaults apply where a parameter is absent; explicit parameters win', async (t) => {
  const defaults: ListDefaults = { format: 'dialect_b', family: 'v4', action: 'allow', maxEntries: 10, confidence: 'low', severity: 'critical' }
  const cases: Array<{ description: string, query: string, defaults: ListDefaults, key: string }> = [
    { description: 'all stored defaults', query: '', defaults, key: 'dialect_b|v4|allow|' },
    { description: 'explicit format', query: 'format=plain', defaults, key: 'plain|v4|allow|' },
    { description: 'explicit alias', query: 'format=txt', defaults, key: 'plain|v4|allow|' },
    { description: 'explicit family', query: 'family=both', defaults, key: 'dialect_b|both|allow|' },
    { description: 'explicit action', query: 'action=block', defaults, key: 'dialect_b|v4|block|' },
    { description: 'checksum keeps the defaults', query: 'checksum=md5', defaults, key: 'dialect_b|v4|allow|md5' },
    { description: 'empty defaults: service defaults', query: '', defaults: {}, key: 'plain|both|block|' },
    { description: 'only a family default', query: 'format=nftables', defaults: { family: 'v6' }, key: 'nftables|v6|block|' },
    { description: 'nftables default with a family default', query: '', defaults: { format: 'nftables', family: 'v4' }, key: 'nftables|v4|block|' },
    { description: 'nftables default, explicit v6', query: 'family=v6', defaults: { format: 'nftables', family: 'v4' }, key: 'nftables|v6|block|' },
  ]
  for (const c of cases) t.equal(resolveVariant(parseFeedQuery(c.query), c.defaults).key, c.key, c.description)
})

t.test('nftables + both after defaults is a 400', async (t) => {
  const cases: Array<{ description: string, query: string, defaults: ListDefaults }> = [
    { description: 'stored nftables, no family anywhere', query: '', defaults: { format: 'nftables' } },
    { description: 'stored nftables, explicit both', query: 'family=both', defaults: { format: 'nftables', family: 'v4' } },
    { description: 'explicit nftables over a stored both', query: 'format=nftables', defaults: { family: 'both' } },
  ]
  for (const c of cases) {
    const e = errorOf(() => resolveVariant(parseFeedQuery(c.query), c.defaults))
    t.equal(e.status, 400, c.description)
    t.same((e.details as { supported: string[] }).supported, ['v4', 'v6'], c.description)
  }
})

t.test('parsed queries are memoised; bad ones are not', async (t) => {
  t.equal(parseFeedQuery('family=v6&format=plain'), parseFeedQuery('family=v6&format=plain'))
  const a = errorOf(() => parseFeedQuery('format=bad'))
  const b = errorOf(() => parseFeedQuery('format=bad'))
  t.not(a, b)
  // The memo is bounded: thousands of distinct queries leave it answering correctly.
  for (let i = 0; i < 3000; i++) parseFeedQuery(`format=plain&n=${i}`)
  t.equal(resolveVariant(parseFeedQuery('format=dialect_a&n=1'), null).key, 'dialect_a|both|block|')
})
