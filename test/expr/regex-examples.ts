/**
 * Regular expressions as Cloudflare's Rules-language documentation and wirefilter's own tests
 * and benches write them, with the pattern that must reach the regex check (after the quoted
 * string's regex rule: escapes kept, `\"` outside a class → `"`). Shared by the unit tables
 * (regex-strings.test.ts) and the CLI test (test/cli/expr.test.ts).
 */

export interface RegexExample {
  /** Where the example is written. */
  readonly source: string
  readonly expression: string
  readonly fields: readonly string[]
  /** The pattern the regex check receives. */
  readonly pattern: string
  /** The canonical text, when it differs from the expression. */
  readonly canonical?: string
}

const DOCS = 'https://developers.cloudflare.com/ruleset-engine/rules-language'
const WIREFILTER = 'https://github.com/cloudflare/wirefilter/blob/master/engine'

export const documentedRegexExamples: readonly RegexExample[] = [
  {
    source: `${DOCS}/expressions/ (the headline example)`,
    expression: String.raw`http.request.uri.path matches "/autodiscover\.(xml|src)$"`,
    fields: ['http.request.uri.path'],
    pattern: String.raw`/autodiscover\.(xml|src)$`,
  },
  {
    source: `${DOCS}/operators/ (comparison operators table)`,
    expression: String.raw`http.request.uri.path matches "^/articles/200[7-8]/$"`,
    fields: ['http.request.uri.path'],
    pattern: String.raw`^/articles/200[7-8]/$`,
  },
  {
    source: `${DOCS}/operators/ (nest expressions)`,
    expression: String.raw`http.host matches "^(www|store|blog)\.example\.com" and http.request.uri.path contains "wp-login.php"`,
    fields: ['http.host', 'http.request.uri.path'],
    pattern: String.raw`^(www|store|blog)\.example\.com`,
  },
  {
    source: `${DOCS}/values/ (quoted string syntax)`,
    expression: String.raw`http.request.uri.path matches "a\"b"`,
    fields: ['http.request.uri.path'],
    pattern: 'a"b',
  },
  {
    source: `${DOCS}/values/ (quoted string syntax)`,
    expression: String.raw`http.request.uri.path matches "a\"#b"`,
    fields: ['http.request.uri.path'],
    pattern: 'a"#b',
  },
  {
    source: `${DOCS}/values/ (raw string syntax)`,
    expression: 'http.request.uri.path matches r#"a"b"#',
    fields: ['http.request.uri.path'],
    pattern: 'a"b',
  },
  {
    source: `${DOCS}/values/ (raw string syntax)`,
    expression: 'http.request.uri.path matches r##"a"#b"##',
    fields: ['http.request.uri.path'],
    pattern: 'a"#b',
  },
  {
    source: `${DOCS}/values/ (raw string syntax)`,
    expression: String.raw`http.request.uri.path matches r"/api/login\.aspx$"`,
    fields: ['http.request.uri.path'],
    pattern: String.raw`/api/login\.aspx$`,
  },
  {
    source: `${DOCS}/functions/ (url_decode, the u option)`,
    expression: String.raw`url_decode(http.request.uri.path) matches "(?u)\p{Hangul}+"`,
    fields: ['http.request.uri.path'],
    pattern: String.raw`(?u)\p{Hangul}+`,
  },
  {
    source: `${WIREFILTER}/benches/bench.rs (bench_string_matches)`,
    expression: String.raw`http.user_agent ~ "(?i)googlebot/\d+\.\d+"`,
    fields: ['http.user_agent'],
    pattern: String.raw`(?i)googlebot/\d+\.\d+`,
    canonical: String.raw`http.user_agent matches "(?i)googlebot/\d+\.\d+"`,
  },
  {
    source: `${WIREFILTER}/src/rhs_types/regex/mod.rs (test: a quote inside a class)`,
    expression: String.raw`http.host matches "[a-z"\]]+\d{1,10}\""`,
    fields: ['http.host'],
    pattern: String.raw`[a-z"\]]+\d{1,10}"`,
  },
  {
    source: `${WIREFILTER}/src/rhs_types/regex/mod.rs (test_raw_string)`,
    expression: String.raw`http.host matches r#"(?u)\*\a\f\t\n\r\v\x7F\x{10FFFF}\u007F\u{7F}\U0000007F\U{7F}"#`,
    fields: ['http.host'],
    pattern: String.raw`(?u)\*\a\f\t\n\r\v\x7F\x{10FFFF}\u007F\u{7F}\U0000007F\U{7F}`,
    canonical: String.raw`http.host matches r"(?u)\*\a\f\t\n\r\v\x7F\x{10FFFF}\u007F\u{7F}\U0000007F\U{7F}"`,
  },
]
