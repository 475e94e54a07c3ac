/**
 * The expression case table, part 1: expressions that must check, with the fields and phase
 * they report and, where it says something, their canonical text. Part 2 (invalid input, with
 * the exact message and offset) is cases-invalid.ts. One test drives both: cases.test.ts.
 */
import type { Phase, RuleKind } from '../../src/expr/check.js'

export interface ValidCase {
  readonly description: string
  readonly kind: RuleKind
  readonly phase?: Phase
  readonly input: string
  readonly expected: { readonly fields: readonly string[], readonly phase: Phase | null, readonly canonical?: string }
}

export interface InvalidCase {
  readonly description: string
  readonly kind: RuleKind
  readonly phase?: Phase
  readonly input: string
  /** The whole message, ending with ` at <line>:<column>`, and the UTF-16 offset. */
  readonly expected: { readonly message: string, readonly offset: number }
}

const W: RuleKind = 'waf_rule'
const S: RuleKind = 'smart_firewall_rule'

function waf (description: string, input: string, fields: string[], canonical?: string, phase: Phase = 'request'): ValidCase {
  return { description, kind: W, input, expected: { fields, phase, ...(canonical === undefined ? {} : { canonical }) } }
}
function sf (description: string, input: string, fields: string[], canonical?: string): ValidCase {
  return { description, kind: S, input, expected: { fields, phase: null, ...(canonical === undefined ? {} : { canonical }) } }
}

export const validCases: readonly ValidCase[] = [
  // --- ordering operators, English and C-like, on Bytes, Int and Ip ---
  waf('eq on Bytes', 'http.host eq "example.com"', ['http.host']),
  waf('== on Bytes', 'http.host == "example.com"', ['http.host'], 'http.host eq "example.com"'),
  waf('ne on Bytes', 'http.request.method ne "GET"', ['http.request.method']),
  waf('!= on Bytes', 'http.request.method != "GET"', ['http.request.method'], 'http.request.method ne "GET"'),
  waf('lt on Int', 'http.request.body.size lt 100', ['http.request.body.size']),
  waf('< on Int', 'http.request.body.size < 100', ['http.request.body.size'], 'http.request.body.size lt 100'),
  waf('le on Int', 'ip.src.asnum le 64511', ['ip.src.asnum']),
  waf('<= on Int', 'ip.src.asnum <= 64511', ['ip.src.asnum'], 'ip.src.asnum le 64511'),
  waf('gt on Int', 'http.request.body.size gt 1048576', ['http.request.body.size']),
  waf('> on Int', 'http.request.body.size > 1048576', ['http.request.body.size'], 'http.request.body.size gt 1048576'),
  waf('ge on Int (response phase detected)', 'http.response.code ge 500', ['http.response.code'], undefined, 'response'),
  waf('>= on Int', 'http.response.code >= 500', ['http.response.code'], 'http.response.code ge 500', 'response'),
  waf('lt on Bytes (wirefilter orders bytes)', 'http.request.version lt "HTTP/2"', ['http.request.version']),
  waf('eq on Ip, IPv4', 'ip.src eq 192.0.2.1', ['ip.src']),
  waf('ne on Ip, IPv6 in canonical form', 'ip.src ne 2001:DB8:0:0:0:0:0:1', ['ip.src'], 'ip.src ne 2001:db8::1'),
  waf('gt on Ip', 'ip.src gt 10.0.0.0', ['ip.src']),
  sf('eq on Ip, destination', 'ip.dst == 198.51.100.7', ['ip.dst'], 'ip.dst eq 198.51.100.7'),
  // --- Bytes operators ---
  waf('contains', 'http.request.uri.path contains "/wp-admin"', ['http.request.uri.path']),
  waf('matches', 'http.request.uri.path matches "^/api/v[0-9]+/"', ['http.request.uri.path']),
  waf('~ is matches', 'http.user_agent ~ "(?i)curl"', ['http.user_agent'], 'http.user_agent matches "(?i)curl"'),
  waf('wildcard', 'http.request.full_uri wildcard "https://*.example.com/*"', ['http.request.full_uri']),
  waf('strict wildcard', 'http.request.uri.path strict wildcard "/AdminTeam/*"', ['http.request.uri.path']),
  waf('strict   wildcard with extra spaces', 'http.request.uri.path strict   wildcard "/A*"', ['http.request.uri.path'], 'http.request.uri.path strict wildcard "/A*"'),
  waf('wildcard with escaped star and backslash', 'http.request.uri.path wildcard r"/a\\*b\\\\c*"', ['http.request.uri.path']),
  waf('wildcard with quoted-escaped star', 'http.request.uri.path wildcard "/a\\\\*b"', ['http.request.uri.path']),
  // --- in {…} ---
  waf('in strings', 'http.request.method in {"POST" "PUT" "PATCH"}', ['http.request.method']),
  sf('in integers and ranges', 'tcp.dstport in {22 80..90 443 8000..8999}', ['tcp.dstport']),
  sf('in negative range', 'ip.ttl in {-5..-1 0}', ['ip.ttl']),
  waf('in IPs, CIDRs and IP ranges, both families', 'ip.src in {192.0.2.1 198.51.100.0/24 203.0.113.10..203.0.113.20 2001:db8::/32 ::1 fe80::1..fe80::ff}', ['ip.src']),
  waf('in with newlines and tabs between values', 'ip.src.country in {\n\t"RU"\n\t"KP"\n}', ['ip.src.country'], 'ip.src.country in {"RU" "KP"}'),
  waf('in with IPv4-mapped IPv6', 'ip.src in {::ffff:192.0.2.1 ::ffff:0:0/96}', ['ip.src'], 'ip.src in {::ffff:192.0.2.1 ::ffff:0.0.0.0/96}'),
  waf('in with /0 and /32', 'ip.src in {0.0.0.0/0 192.0.2.7/32}', ['ip.src']),
  // --- bitwise and ---
  sf('& on Int', 'tcp.flags & 0x02', ['tcp.flags'], 'tcp.flags bitwise_and 2'),
  sf('bitwise_and on Int', 'tcp.flags bitwise_and 18', ['tcp.flags']),
  // --- logical operators ---
  waf('and', 'ssl and http.host eq "a"', ['http.host', 'ssl']),
  waf('&&', 'ssl && http.host eq "a"', ['http.host', 'ssl'], 'ssl and http.host eq "a"'),
  waf('or', 'ssl or http.host eq "a"', ['http.host', 'ssl']),
  waf('||', 'ssl || http.host eq "a"', ['http.host', 'ssl'], 'ssl or http.host eq "a"'),
  waf('xor', 'ssl xor http.request.body.truncated', ['http.request.body.truncated', 'ssl']),
  waf('^^', 'ssl ^^ http.request.body.truncated', ['http.request.body.truncated', 'ssl'], 'ssl xor http.request.body.truncated'),
  waf('not', 'not ssl', ['ssl']),
  waf('!', '!ssl', ['ssl'], 'not ssl'),
  waf('not not', 'not not ssl', ['ssl']),
  waf('not binds to one operand', 'not ssl and http.host eq "a"', ['http.host', 'ssl']),
  waf('and binds tighter than or', 'ssl or http.host eq "a" and http.host eq "b"', ['http.host', 'ssl']),
  waf('xor between or and and', 'ssl or ssl xor ssl and ssl', ['ssl']),
  waf('parentheses', '(ssl or http.host eq "a") and not (http.host eq "b")', ['http.host', 'ssl']),
  waf('nested parentheses', '((((ssl))))', ['ssl']),
  waf('not before a parenthesis', 'not(ssl)', ['ssl'], 'not (ssl)'),
  waf('no spaces around symbols', 'ssl&&!ssl||(http.host=="a")', ['http.host', 'ssl'], 'ssl and not ssl or (http.host eq "a")'),
  waf('multi-line expression', 'http.host eq "a"\r\n  and ssl\n  and ip.src in {10.0.0.0/8}', ['http.host', 'ip.src', 'ssl']),
  // --- bare Bool fields ---
  waf('bare Bool field', 'http.request.body.truncated', ['http.request.body.truncated']),
  sf('bare Bool TCP flags', 'tcp.flags.syn and not tcp.flags.ack and not tcp.flags.reset', ['tcp.flags.ack', 'tcp.flags.reset', 'tcp.flags.syn']),
  sf('every TCP flag', 'tcp.flags.fin or tcp.flags.push or tcp.flags.urg or tcp.flags.ecn or tcp.flags.cwr', ['tcp.flags.cwr', 'tcp.flags.ecn', 'tcp.flags.fin', 'tcp.flags.push', 'tcp.flags.urg']),
  // --- string literals ---
  waf('escaped quote and backslash', 'http.user_agent contains "a\\"b\\\\c"', ['http.user_agent']),
  waf('hex escape', 'http.user_agent contains "\\x41\\x2f"', ['http.user_agent'], 'http.user_agent contains "A/"'),
  waf('octal escape', 'http.user_agent contains "\\101\\000"', ['http.user_agent'], 'http.user_agent contains "A\\x00"'),
  waf('non-UTF-8 byte', 'http.request.body.raw contains "\\xff\\xfe"', ['http.request.body.raw']),
  waf('UTF-8 text', 'http.request.uri.path contains "/ü/日本"', ['http.request.uri.path']),
  waf('escaped UTF-8 bytes print as text', 'http.request.uri.path contains "\\xc3\\xbc"', ['http.request.uri.path'], 'http.request.uri.path contains "ü"'),
  waf('empty string', 'http.referer eq ""', ['http.referer']),
  waf('NUL typed inside a string', 'http.referer eq "a\u0000b"', ['http.referer'], 'http.referer eq "a\\x00b"'),
  waf('raw string', 'http.request.uri.path matches r"^/a\\d+\\.php$"', ['http.request.uri.path']),
  waf('raw string with #', 'http.user_agent contains r#"say "hi""#', ['http.user_agent']),
  waf('raw string with ##', 'http.user_agent contains r##"a"#b"##', ['http.user_agent']),
  waf('raw string printed with fewest hashes', 'http.user_agent contains r###"plain"###', ['http.user_agent'], 'http.user_agent contains r"plain"'),
  waf('empty raw string', 'http.referer eq r""', ['http.referer']),
  // --- integer literals ---
  waf('hex integer', 'http.request.body.size eq 0x10', ['http.request.body.size'], 'http.request.body.size eq 16'),
  waf('octal integer', 'http.request.body.size eq 017', ['http.request.body.size'], 'http.request.body.size eq 15'),
  waf('zero', 'http.request.body.size eq 0', ['http.request.body.size']),
  waf('negative integer', 'http.request.body.size gt -1', ['http.request.body.size']),
  waf('largest safe integer', 'http.request.body.size lt 9007199254740991', ['http.request.body.size']),
  waf('hex range', 'ip.src.asnum in {0x10..0x20}', ['ip.src.asnum'], 'ip.src.asnum in {16..32}'),
  // --- indexing ---
  waf('array position', 'http.request.headers.names[0] eq "host"', ['http.request.headers.names']),
  waf('map key then position', 'http.request.headers["content-type"][0] contains "json"', ['http.request.headers']),
  waf('map key as raw string', 'http.request.cookies[r"session"][0] eq "x"', ['http.request.cookies'], 'http.request.cookies[r"session"][0] eq "x"'),
  waf('map-each under any()', 'any(http.request.headers.values[*] contains "<script")', ['http.request.headers.values']),
  waf('map-each on a map', 'any(http.request.uri.args[*][0] eq "1")', ['http.request.uri.args']),
  waf('double map-each', 'all(http.request.body.form[*][*] ne "")', ['http.request.body.form']),
  waf('map key then map-each', 'all(http.request.headers["accept"][*] == "application/json")', ['http.request.headers'], 'all(http.request.headers["accept"][*] eq "application/json")'),
  waf('index on a function result', 'concat(http.request.headers.names, http.request.uri.args.names)[0] eq "a"', ['http.request.headers.names', 'http.request.uri.args.names']),
  waf('and between two Array<Bool>', 'any(http.request.headers.names[*] eq "a" and http.request.headers.values[*] eq "b")', ['http.request.headers.names', 'http.request.headers.values']),
  waf('not of an Array<Bool>', 'all(not http.request.accepted_languages[*] eq "en")', ['http.request.accepted_languages']),
  waf('in with map-each', 'any(http.request.uri.args.values[*] in {"1" "2"})', ['http.request.uri.args.values']),
  // --- functions ---
  waf('lower', 'lower(http.host) eq "example.com"', ['http.host']),
  waf('upper', 'upper(http.request.method) eq "POST"', ['http.request.method']),
  waf('len of Bytes', 'len(http.request.uri.query) gt 2048', ['http.request.uri.query']),
  waf('len of an array', 'len(http.request.headers.names) gt 50', ['http.request.headers.names']),
  waf('starts_with', 'starts_with(http.request.uri.path, "/admin")', ['http.request.uri.path']),
  waf('ends_with', 'ends_with(http.request.uri.path, ".php")', ['http.request.uri.path']),
  waf('concat of strings', 'concat(http.host, http.request.uri.path) eq "a/b"', ['http.host', 'http.request.uri.path']),
  waf('concat with a literal', 'concat("https://", http.host) eq "https://a"', ['http.host']),
  waf('url_decode', 'url_decode(http.request.uri.query) contains "<script"', ['http.request.uri.query']),
  waf('url_decode with options', 'url_decode(http.request.uri.query, "ru") contains "x"', ['http.request.uri.query']),
  waf('url_decode mapped over form values', 'any(url_decode(http.request.body.form.values[*])[*] contains "xss")', ['http.request.body.form.values']),
  waf('decode_base64', 'any(decode_base64(http.request.headers["client_id"][*])[*] eq "123abc")', ['http.request.headers']),
  waf('substring with start', 'substring(http.request.body.raw, 2) eq "x"', ['http.request.body.raw']),
  waf('substring with negative start and end', 'substring(http.request.body.raw, -5, -1) eq "x"', ['http.request.body.raw']),
  waf('lookup_json_string', 'lookup_json_string(http.request.body.raw, "user", "role") eq "admin"', ['http.request.body.raw']),
  waf('lookup_json_integer with a position', 'lookup_json_integer(http.request.body.raw, "ids", 0) gt 5', ['http.request.body.raw']),
  waf('cidr', 'cidr(ip.src, 24, 48) eq 192.0.2.0', ['ip.src']),
  waf('cidr6', 'cidr6(ip.src, 64) eq 2001:db8::', ['ip.src']),
  waf('remove_bytes', 'remove_bytes(http.host, "\\x2e\\x77") eq "examplecom"', ['http.host'], 'remove_bytes(http.host, ".w") eq "examplecom"'),
  waf('any over lower mapped', 'any(lower(http.request.headers.names[*])[*] eq "x-debug")', ['http.request.headers.names']),
  waf('all', 'all(http.request.accepted_languages[*] ne "ru")', ['http.request.accepted_languages']),
  waf('len mapped over an array', 'any(len(http.request.uri.args.values[*])[*] gt 100)', ['http.request.uri.args.values']),
  waf('space before (', 'lower (http.host) eq "a"', ['http.host'], 'lower(http.host) eq "a"'),
  // --- fields, aliases, phases ---
  waf('JA3 alias reports the canonical field', 'cf.bot_management.ja3_hash eq "abc"', ['tls.ja3']),
  waf('JA4 alias and canonical name together', 'cf.bot_management.ja4 eq "a" or tls.ja4 eq "b"', ['tls.ja4']),
  waf('response phase given, request fields allowed', 'http.host eq "a" and http.response.code eq 403', ['http.host', 'http.response.code'], undefined, 'response'),
  { description: 'phase "request" given explicitly', kind: W, phase: 'request', input: 'ssl', expected: { fields: ['ssl'], phase: 'request' } },
  { description: 'phase "response" given, no response field', kind: W, phase: 'response', input: 'ssl', expected: { fields: ['ssl'], phase: 'response' } },
  waf('response header names', 'any(http.response.headers.names[*] eq "set-cookie")', ['http.response.headers.names'], undefined, 'response'),
  waf('response content type', 'http.response.content_type.media_type eq "text/html"', ['http.response.content_type.media_type'], undefined, 'response'),
  sf('JA4 family', 'tls.ja4 eq "t13d" or tls.ja4s eq "t130" or tls.ja4t eq "1024_2" or tls.ja3 eq "e7d7"', ['tls.ja3', 'tls.ja4', 'tls.ja4s', 'tls.ja4t']),
  sf('ip.proto is a string', 'ip.proto eq "udp" and udp.dstport eq 53', ['ip.proto', 'udp.dstport']),
  sf('ICMP', 'icmp.type eq 8 and icmp.code eq 0', ['icmp.code', 'icmp.type']),
  sf('countries and ASN', 'ip.src.country eq "RU" and ip.dst.country ne "US" and ip.src.asnum eq 64500', ['ip.dst.country', 'ip.src.asnum', 'ip.src.country']),
  sf('lengths, ttl and ports', 'ip.len gt 1400 and ip.ttl lt 5 and tcp.srcport eq 0 and udp.srcport eq 19', ['ip.len', 'ip.ttl', 'tcp.srcport', 'udp.srcport']),
  // --- words the lexer knows (operators, functions, fields) next to ones it does not ---
  waf('logical keyword right before a parenthesis', 'ssl or(ssl)', ['ssl'], 'ssl or (ssl)'),
  waf('a field that extends another field', 'http.request.uri.path.extension eq "php" and http.request.uri.path eq "/a"', ['http.request.uri.path', 'http.request.uri.path.extension']),
  // --- literals in every spelling the byte parsers take apart ---
  waf('IPv6 ranges, CIDRs of every length, IPv4-mapped CIDR', 'ip.src in {2001:db8::..2001:db8::ff 1.2.3.4/32 ::/0 ::ffff:1.2.3.4/128}', ['ip.src']),
  waf('IPv6 ending in a dotted quad', 'ip.src in {::1.2.3.4 1:2:3:4:5:6:1.2.3.4}', ['ip.src'], 'ip.src in {::102:304 1:2:3:4:5:6:102:304}'),
  waf('non-ASCII text in quoted and raw strings and map keys', 'http.request.headers["a"][0] eq "é" and http.host eq r"é😀"', ['http.host', 'http.request.headers']),
  waf('regex: rewritten and verbatim parts side by side', 'http.host matches "(?i)(a|b)\\s+\\x41\\d[a-z]]" and http.host matches r"(?x) a # c\n b\\]" and http.host matches "(?i:a)(?-i)b\\Az"', ['http.host']),
  waf('regex: Unicode class and named groups', 'http.host matches "\\p{Greek}(?P<x>a)(?<y>b)"', ['http.host']),
  waf('regex: an escaped backslash stays one to the regex', 'http.host matches "a\\\\b"', ['http.host']),
  // --- limits at their edge ---
  waf('exactly 4096 characters', `http.host eq "${'a'.repeat(4096 - 15)}"`, ['http.host']),
  waf('nesting at the limit', `${'('.repeat(32)}ssl${')'.repeat(32)}`, ['ssl']),
]
