/**
 * Feed query parameters (SPEC §4.3, DECISIONS §5): `format`, `family`, `action`, `checksum`, and
 * `client` (issue 20), and the shard parameters `shard` and `of` (issue 21, README "Shards").
 *
 * - Unknown parameters are ignored; a repeated known one, or an unsupported value, is a 400 whose
 *   `details.supported` lists what is accepted.
 * - `plain` also answers to `txt`, `alias_c` and `alias_d`.
 * - A list's stored defaults fill the parameters that are absent (SPEC §2.8); an explicit
 *   parameter always wins. nftables with family `both` is a 400 once defaults are applied, since a
 *   set holds one family.
 *
 * - Feed deltas (docs/deltas.md): `since` (an ETag), the answer formats `ipset` and `json`, which
 *   are the plain variant's networks in another syntax, and the names an nftables or ipset answer
 *   writes (`table`, `set`). ipset, like nftables, is one family.
 *
 * Pollers send the same query string every time, so parsed queries are memoised (bounded), and
 * each keeps its resolution without list defaults: the workspace feed then costs one Map lookup.
 */
import { ThreatfeedError } from '../errors.js'
import { resolveShard, shardValues } from '../feed/shards.js'
import { variantKey, type VariantParams } from '../feed/snapshot-types.js'
import { MAX_SHARDS } from '../feed/render/shard-networks.js'
import { FAMILIES, FEED_ACTIONS, FORMATS, type FeedAction, type FeedFormat, type Family, type ListDefaults } from '../store/types.js'

const FORMAT_ALIASES: Readonly<Record<string, FeedFormat>> = { txt: 'plain', alias_c: 'plain', alias_d: 'plain' }
/** Formats that answer the plain variant's networks in another syntax (feed/render/delta-text.ts). */
export const ANSWER_FORMATS = ['ipset', 'json'] as const
export type AnswerFormat = (typeof ANSWER_FORMATS)[number]
const FORMAT_VALUES: readonly string[] = [...FORMATS, ...ANSWER_FORMATS, ...Object.keys(FORMAT_ALIASES)]
const CHECKSUM_VALUES: readonly string[] = ['md5']
const NFTABLES_FAMILIES: readonly string[] = ['v4', 'v6']

const PARAMETERS = ['format', 'family', 'action', 'checksum', 'client', 'shard', 'of', 'since', 'table', 'set'] as const
type Parameter = (typeof PARAMETERS)[number]
type RuleParameter = 'client' | 'since' | 'table' | 'set'

/**
 * `client`: a name for a consumer (issue 20), for appliances that share an address and a
 * User-Agent behind NAT. Letters, digits and `.` `_` `-` `:` `@`, 1 to 64 of them: it shows in
 * `threatfeed consumers ls` and log lines as given.
 */
const CLIENT_NAME = /^[A-Za-z0-9._:@-]{1,64}$/
const CLIENT_RULE = '1 to 64 letters, digits, ".", "_", "-", ":" or "@"'

/**
 * `since`: an entity tag (RFC 9110 §8.8.3), quoted or not — one this server sent, else the answer
 * is the full feed; anything that is not an entity tag at all is a 400.
 */
const ENTITY_TAG = /^(W\/)?("[\x21\x23-\x7e\x80-\xff]{1,256}"|[\x21\x23-\x7e\x80-\xff]{1,256})$/
/**
 * `table` (nftables) and `set` (nftables, ipset): what both tools accept as a name, short enough
 * for ipset's 31 characters with the `-new` of a full ipset body's swap.
 */
const SET_NAME = /^[A-Za-z][A-Za-z0-9_.-]{0,26}$/
const SET_NAME_RULE = 'a letter, then up to 26 letters, digits, "_", "." or "-"'

const RULES: Readonly<Record<RuleParameter, { readonly pattern: RegExp, readonly expected: string }>> = {
  client: { pattern: CLIENT_NAME, expected: CLIENT_RULE },
  since: { pattern: ENTITY_TAG, expected: 'an ETag of this feed, with or without its quotes' },
  table: { pattern: SET_NAME, expected: SET_NAME_RULE },
  set: { pattern: SET_NAME, expected: SET_NAME_RULE },
}

const SHARD_VALUES = shardValues(MAX_SHARDS)

const SUPPORTED: Readonly<Record<Exclude<Parameter, RuleParameter>, readonly string[]>> = {
  format: FORMAT_VALUES,
  family: FAMILIES,
  action: FEED_ACTIONS,
  checksum: CHECKSUM_VALUES,
  shard: SHARD_VALUES,
  of: SHARD_VALUES,
}

/** A resolved variant: its parameters and its key in FeedSnapshot.variants. */
export interface ResolvedVariant {
  readonly params: VariantParams
  readonly key: string
}

/** The explicit parameters of one request; null where absent. */
export interface FeedQuery {
  readonly format: FeedFormat | null
  readonly family: Family | null
  readonly action: FeedAction | null
  readonly checksum: boolean
  /** The `client` name; '' when absent. */
  readonly client: string
  /** `shard` (1-based) and `of`, as sent; null where absent. */
  readonly shard: number | null
  readonly of: number | null
  /** `since`, without its quotes; null when absent (W/ tags are kept whole: they never match). */
  readonly since: string | null
  /** `format=ipset` or `format=json` (then `format` is plain); null otherwise. */
  readonly answer: AnswerFormat | null
  /** `table` and `set` as given; null where absent. */
  readonly table: string | null
  readonly set: string | null
  /** The feed-delta module answers (since or an answer format): the feed route's one branch. */
  readonly delta: boolean
  /** Resolution with no list defaults, computed on first use. */
  base: ResolvedVariant | null
  /** Why that resolution failed, kept and rethrown (a poll then skips an instanceof). */
  baseError: ThreatfeedError | null
}

const AMP = 0x26
const EQUALS = 0x3d
const PERCENT = 0x25
const PLUS = 0x2b

/** Longest echo of a bad value in an error message; a query string can be long. */
const MAX_ECHO = 64
const MEMO_LIMIT = 1024
const memo = new Map<string, FeedQuery>()
/** The empty query's parse, kept apart from the memo (which a junk-cycling client may clear). */
let emptyQuery: FeedQuery | null = null

/** What details say is accepted: the values, or for `client` the rule. */
function accepted (parameter: Parameter): { supported: readonly string[] } | { expected: string } {
  return parameter in RULES ? { expected: RULES[parameter as RuleParameter].expected } : { supported: SUPPORTED[parameter as Exclude<Parameter, RuleParameter>] }
}

function badValue (parameter: Parameter, value: string): ThreatfeedError {
  const shown = value.length > MAX_ECHO ? value.slice(0, MAX_ECHO) + '…' : value
  return new ThreatfeedError('TF_ERR_FEED_BAD_PARAM', [`${parameter}: ${JSON.stringify(shown)}`], {
    details: { parameter, value: shown, ...accepted(parameter) },
  })
}

function repeated (parameter: Parameter): ThreatfeedError {
  return new ThreatfeedError('TF_ERR_FEED_BAD_PARAM', [`repeated parameter: ${parameter}`], {
    details: { parameter, ...accepted(parameter) },
  })
}

function isValid (parameter: Parameter, value: string): boolean {
  return parameter in RULES ? RULES[parameter as RuleParameter].pattern.test(value) : SUPPORTED[parameter as Exclude<Parameter, RuleParameter>].includes(value)
}

/** application/x-www-form-urlencoded decoding of one name or value; null when malformed. */
function decodeComponent (raw: string, start: number, end: number): string | null {
  const s = raw.slice(start, end)
  let plain = true
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === PERCENT || c === PLUS) { plain = false; break }
  }
  if (plain) return s
  try {
    return decodeURIComponent(s.replaceAll('+', ' '))
  } catch {
    return null
  }
}

function asParameter (name: string): Parameter | null {
  return (PARAMETERS as readonly string[]).includes(name) ? name as Parameter : null
}

function parse (raw: string): FeedQuery {
  let format: FeedFormat | null = null
  let family: Family | null = null
  let action: FeedAction | null = null
  let checksum = false
  let client = ''
  let shard: number | null = null
  let of: number | null = null
  let since: string | null = null
  let answer: AnswerFormat | null = null
  let table: string | null = null
  let set: string | null = null
  const seen = new Set<Parameter>()
  let i = 0
  while (i <= raw.length) {
    let end = raw.indexOf('&', i)
    if (end < 0) end = raw.length
    if (end > i) {
      let eq = i
      while (eq < end && raw.charCodeAt(eq) !== EQUALS) eq++
      const parameter = asParameter(decodeComponent(raw, i, eq) ?? '')
      if (parameter !== null) {
        if (seen.has(parameter)) throw repeated(parameter)
        seen.add(parameter)
        const value = eq < end ? decodeComponent(raw, eq + 1, end) : ''
        if (value === null || !isValid(parameter, value)) throw badValue(parameter, value ?? raw.slice(eq + 1, end))
        if (parameter === 'client') client = value
        else if (parameter === 'format') {
          if ((ANSWER_FORMATS as readonly string[]).includes(value)) answer = value as AnswerFormat
          format = answer !== null ? 'plain' : FORMAT_ALIASES[value] ?? value as FeedFormat
        } else if (parameter === 'since') since = value.startsWith('"') ? value.slice(1, -1) : value
        else if (parameter === 'table') table = value
        else if (parameter === 'set') set = value
        else if (parameter === 'family') family = value as Family
        else if (parameter === 'action') action = value as FeedAction
        else if (parameter === 'shard') shard = Number(value)
        else if (parameter === 'of') of = Number(value)
        else checksum = true
      }
    }
    i = end + 1
    if (raw.charCodeAt(end) !== AMP) break
  }
  return { format, family, action, checksum, client, shard, of, since, answer, table, set, delta: since !== null || answer !== null, base: null, baseError: null }
}

/**
 * Parses a raw query string (without `?`, as uWS getQuery() returns it). Throws
 * TF_ERR_FEED_BAD_PARAM (400) with `details.supported` on a repeated known parameter or an
 * unsupported value. The result is shared between requests: treat it as read-only.
 *
 * @example
 *   parseFeedQuery('format=txt&family=v4&utm=x') // { format: 'plain', family: 'v4', action: null, checksum: false, … }
 */
export function parseFeedQuery (raw: string): FeedQuery {
  // Most polls carry no query: no lookup for them.
  if (raw.length === 0) return (emptyQuery ??= parse(raw))
  const hit = memo.get(raw)
  if (hit !== undefined) return hit
  const query = parse(raw)
  // Only well-formed queries are kept, and only so many: a client cycling through junk query
  // strings must not grow the memo (clearing it is cheap and it refills from the real pollers).
  if (memo.size >= MEMO_LIMIT) memo.clear()
  memo.set(raw, query)
  return query
}

function resolve (query: FeedQuery, defaults: ListDefaults | null): ResolvedVariant {
  const params: VariantParams = {
    format: query.format ?? defaults?.format ?? 'plain',
    family: query.family ?? defaults?.family ?? 'both',
    action: query.action ?? defaults?.action ?? 'block',
    checksum: query.checksum,
    shard: resolveShard(query.shard, query.of, defaults?.shards),
  }
  if (params.format === 'nftables' && params.family === 'both') {
    throw new ThreatfeedError('TF_ERR_FEED_BAD_PARAM', ['family "both" with format nftables: an nftables set holds one family'], {
      details: { parameter: 'family', value: 'both', supported: NFTABLES_FAMILIES },
    })
  }
  if (query.answer !== null && query.checksum) {
    throw new ThreatfeedError('TF_ERR_FEED_BAD_PARAM', [`checksum with format ${query.answer}: a checksum is of a plain, dialect or nftables body`], {
      details: { parameter: 'checksum', value: 'md5', supported: [] },
    })
  }
  if (query.answer === 'ipset' && params.family === 'both') {
    throw new ThreatfeedError('TF_ERR_FEED_BAD_PARAM', ['family "both" with format ipset: an ipset set holds one family'], {
      details: { parameter: 'family', value: 'both', supported: NFTABLES_FAMILIES },
    })
  }
  return { params, key: variantKey(params) }
}

/**
 * Applies a list's stored defaults under the explicit parameters and picks the variant.
 * `defaults` is null for the workspace feed. Throws TF_ERR_FEED_BAD_PARAM for nftables + both.
 *
 * @example
 *   resolveVariant(parseFeedQuery('family=v6'), { format: 'nftables', family: 'v4' }).key // 'nftables|v6|block|'
 */
export function resolveVariant (query: FeedQuery, defaults: ListDefaults | null): ResolvedVariant {
  if (defaults === null || (defaults.format === undefined && defaults.family === undefined && defaults.action === undefined && defaults.shards === undefined)) {
    if (query.base !== null) return query.base
    if (query.baseError !== null) throw query.baseError
    try {
      query.base = resolve(query, null)
    } catch (e) {
      query.baseError = e as ThreatfeedError
      throw e
    }
    return query.base
  }
  return resolve(query, defaults)
}
