/**
 * The WAF field scheme: HTTP layer-7 fields plus the client's IP, TLS and fingerprint fields.
 * Types follow Cloudflare's field reference (developers.cloudflare.com/ruleset-engine/
 * rules-language/fields/reference): its String is our Bytes, Number/Integer our Int.
 *
 * To add a field, add one line here; the checker, the CLI and the tests read this table.
 */
import { defineScheme, type FieldDef, type Scheme } from '../types.js'

const BYTES = { type: 'Bytes' } as const
const INT = { type: 'Int' } as const
const BOOL = { type: 'Bool' } as const
const IP = { type: 'Ip' } as const
const STRINGS = { type: 'Array<Bytes>' } as const
const STRING_LISTS_BY_NAME = { type: 'Map<Array<Bytes>>' } as const

/** Response-phase fields: they exist only after the origin answered. */
function response (def: FieldDef): FieldDef {
  return { type: def.type, phase: 'response' }
}

const fields: Record<string, FieldDef> = {
  // --- request (Cloudflare "request fields") ---
  'http.host': BYTES,
  'http.cookie': BYTES,
  'http.referer': BYTES,
  'http.user_agent': BYTES,
  'http.x_forwarded_for': BYTES,
  'http.request.method': BYTES,
  'http.request.version': BYTES,
  'http.request.full_uri': BYTES,
  'http.request.uri': BYTES,
  'http.request.uri.path': BYTES,
  'http.request.uri.path.extension': BYTES,
  'http.request.uri.query': BYTES,
  'http.request.uri.args': STRING_LISTS_BY_NAME,
  'http.request.uri.args.names': STRINGS,
  'http.request.uri.args.values': STRINGS,
  'http.request.headers': STRING_LISTS_BY_NAME,
  'http.request.headers.names': STRINGS,
  'http.request.headers.values': STRINGS,
  'http.request.cookies': STRING_LISTS_BY_NAME,
  'http.request.accepted_languages': STRINGS,
  'http.request.body.raw': BYTES,
  'http.request.body.size': INT,
  'http.request.body.truncated': BOOL,
  'http.request.body.form': STRING_LISTS_BY_NAME,
  // Not in the list, but Cloudflare's own url_decode() example reads .values; rules
  // copied from its docs should check.
  'http.request.body.form.names': STRINGS,
  'http.request.body.form.values': STRINGS,
  'http.request.body.mime': BYTES,

  // --- response phase ---
  'http.response.code': response(INT),
  'http.response.headers': response(STRING_LISTS_BY_NAME),
  'http.response.headers.names': response(STRINGS),
  'http.response.headers.values': response(STRINGS),
  'http.response.content_type.media_type': response(BYTES),

  // --- client connection ---
  'ip.src': IP,
  'ip.src.asnum': INT,
  'ip.src.country': BYTES,
  'ip.src.continent': BYTES,
  ssl: BOOL,
  'tls.version': BYTES,
  'tls.cipher': BYTES,
  'tls.ja3': BYTES,
  'tls.ja4': BYTES,
}

/**
 * Cloudflare spells the fingerprints under bot management; rules copied from a Cloudflare
 * account keep working. `fields` of a checked rule always reports the canonical name.
 */
const aliases: Record<string, string> = {
  'cf.bot_management.ja3_hash': 'tls.ja3',
  'cf.bot_management.ja4': 'tls.ja4',
}

export const wafScheme: Scheme = defineScheme('waf_rule', fields, aliases, true)
