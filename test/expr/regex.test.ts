/**
 * Regex validation against Rust regex syntax (docs.rs/regex, "Syntax"): what Rust accepts must
 * pass, including the spellings JavaScript does not know; what needs backtracking or is not
 * Rust syntax must fail at the right index.
 */
import t from 'tap'
import fc from 'fast-check'
import { checkRegex, MAX_REGEX_SIZE } from '../../src/expr/regex.js'
import { codesOf } from '../../src/expr/text.js'

const rustValid: ReadonlyArray<[string, string]> = [
  ['empty pattern', ''],
  ['literals and anchors', '^/admin$'],
  ['lazy quantifiers', 'a*?b+?c??'],
  ['counted repetitions', 'a{2}b{2,}c{2,5}d{2,5}?'],
  ['Perl classes', '\\d\\D\\s\\S\\w\\W'],
  ['control escapes', '\\a\\f\\t\\n\\r\\v'],
  ['hex escapes, all forms', '\\x41\\x{1F600}\\u0041\\u{41}\\U00000041\\U{41}'],
  ['escaped punctuation, including what JS u-mode refuses', '\\.\\-\\#\\&\\~\\%\\!\\"\\ \\/\\:'],
  ['one-letter Unicode class', '\\pL\\PN'],
  ['Unicode script by bare name', '\\p{Greek}+'],
  ['loose Unicode names', '\\p{greek}\\p{Uppercase_Letter}\\p{lu}\\p{white space}'],
  ['Unicode class with sc=', '\\p{sc=Greek}\\p{Script:Latin}\\P{gc=Lu}'],
  ['ASCII classes', '[[:alpha:]][[:^digit:]][[:xdigit:][:punct:]]'],
  ['nested classes and set operations', '[a-z&&[^aeiou]][0-9--4][a-g~~b-h][x[^xyz]]'],
  ['escaped brackets in a class', '[\\[\\]]'],
  ['] first in a class is literal', '[]a][^]a]'],
  ['class with escapes and ranges', '[\\x00-\\x1f\\d\\p{L}_-]'],
  ['inline flags', '(?i)abc(?-i)d(?ims)e'],
  ['scoped flags', '(?i:a)(?s-m:b)'],
  ['verbose mode ignores spaces and comments', '(?x) a b # a comment\n c [ d ]'],
  ['named groups, both spellings', '(?P<year>\\d{4})-(?<month>\\d{2})-(?P<day.of[x]>\\d\\d)'],
  ['non-capturing group', '(?:ab)+'],
  ['anchors \\A \\z', '\\Aabc\\z'],
  ['word boundaries', '\\bfoo\\B\\<bar\\>\\b{start}x\\b{end}\\b{start-half}\\b{end-half}'],
  ['lone ] and } are literals', 'a]b}'],
  ['empty alternatives and groups', 'a||b()'],
  ['dot', '.+\\..*'],
  ['Unicode text', 'ü日本😀+'],
  ['bytes mode flag', '(?-u:\\xff)'],
  ['SQL injection rule', '(?i)(union\\s+select|sleep\\(\\s*\\d+\\s*\\)|benchmark\\()'],
  ['path traversal rule', '(\\.\\./|\\.\\.\\\\|%2e%2e%2f)'],
]

const notRust: ReadonlyArray<[string, string, number, RegExp]> = [
  ['look-ahead', 'a(?=b)', 1, /^look-around "\(\?=" is not supported: Rust regex syntax, which guarantees linear-time matching, has none$/],
  ['negative look-ahead', '(?!a)', 0, /look-around "\(\?!"/],
  ['look-behind', '(?<=a)b', 0, /look-around "\(\?<="/],
  ['negative look-behind', '(?<!a)b', 0, /look-around "\(\?<!"/],
  ['numbered backreference', '(a)\\1', 3, /^backreferences are not supported/],
  ['\\0 is not an escape', '\\0', 0, /^backreferences are not supported/],
  ['named backreference \\k', '(?<a>x)\\k<a>', 7, /^backreferences are not supported/],
  ['(?P=name) backreference', '(?P<a>x)(?P=a)', 8, /^backreferences and recursion are not supported/],
  ['recursion', '(?R)', 0, /^backreferences and recursion are not supported/],
  ['atomic group', '(?>a+)', 0, /^atomic groups/],
  ['possessive quantifier', 'a++', 2, /^possessive quantifiers/],
  ['possessive counted repetition', 'a{2}+', 4, /^possessive quantifiers/],
  ['PCRE comment group', '(?#note)', 2, /^unknown regex flag or group syntax "\(\?#"$/],
  ['branch reset', '(?|a)', 2, /^unknown regex flag or group syntax/],
  ['\\Z', 'a\\Z', 1, /^escape "\\Z" is not valid in Rust regex syntax$/],
  ['\\e', '\\e', 0, /^escape "\\e" is not valid/],
  ['\\cX', '\\cA', 0, /^escape "\\c" is not valid/],
  ['\\Q…\\E', '\\Qa\\E', 0, /^escape "\\Q" is not valid/],
  ['anchor in a class', '[\\b]', 1, /"\\b" is an anchor and cannot be used in a character class/],
  ['short \\x', '\\x4', 0, /^"\\x" needs 2 hex digits$/],
  ['\\x{} out of range', '\\x{110000}', 0, /is not a Unicode scalar value/],
  ['surrogate code point', '\\u{D800}', 0, /is not a Unicode scalar value/],
  ['unknown Unicode class', '\\p{Nope}', 0, /^unknown Unicode class "Nope"$/],
  ['unclosed Unicode class', '\\p{L', 0, /^unclosed Unicode class/],
  ['unknown ASCII class', '[[:nope:]]', 1, /^unknown ASCII class/],
  ['reversed range', '[b-a]', 1, /^invalid class range "b-a"/],
  ['unclosed class', '[ab', 0, /^unclosed character class/],
  ['unclosed group', '(ab', 3, /^regex has an unclosed "\("$/],
  ['unopened group', 'ab)', 2, /^regex has an unopened "\)"$/],
  ['unclosed flag group', '(?i', 0, /^regex has an unclosed "\(\?"$/],
  ['empty negation', '(?i-)a', 4, /needs at least one flag/],
  ['repeated flag', '(?ii)', 3, /^regex flag "i" is repeated$/],
  ['bad group name', '(?P<1a>x)', 4, /^invalid capture group name "1a"$/],
  ['duplicate group name', '(?<a>x)(?<a>y)', 10, /^duplicate capture group name "a"$/],
  ['{,n} is not Rust', 'a{,3}', 1, /^invalid counted repetition/],
  ['unclosed repetition', 'a{2', 1, /^invalid counted repetition/],
  ['reversed repetition', 'a{3,1}', 1, /minimum is above the maximum/],
  ['lone backslash', 'a\\', 1, /^regex ends with a lone backslash$/],
  ['nothing to repeat', '*a', 0, /^regex does not compile: Nothing to repeat$/],
]

t.test('Rust syntax that must be accepted', async (t) => {
  for (const [description, pattern] of rustValid) t.equal(checkRegex(pattern), undefined, description)
})

t.test('what Rust rejects, or what would need backtracking', async (t) => {
  for (const [description, pattern, index, message] of notRust) {
    const problem = checkRegex(pattern)
    t.ok(problem, `${description}: rejected`)
    if (problem === undefined) continue
    t.match(problem.message, message, `${description}: message`)
    t.equal(problem.index, index, `${description}: index`)
  }
})

t.test('size cap: counted repetitions multiply', async (t) => {
  t.equal(checkRegex('a{1000}'), undefined, 'a{1000} is small')
  t.equal(checkRegex('(a{100}){100}'), undefined, '(a{100}){100} fits')
  const big = checkRegex('((a{100}){100}){10}')
  t.match(big?.message, new RegExp(`too large once compiled \\(limit ${MAX_REGEX_SIZE} units`))
  t.match(checkRegex('\\w{2000}')?.message, /too large/, 'Unicode classes weigh more than literals')
  t.match(checkRegex('(((((a{9}){9}){9}){9}){9})')?.message, /too large/, 'nested groups multiply')
})

t.test('the cap bounds the time spent on hostile patterns', async (t) => {
  const hostile = ['(a{999999999}){999999999}', '('.repeat(2000) + ')'.repeat(2000), '[' + 'a-z'.repeat(1300) + ']', '\\p{L}'.repeat(800), '(?x)' + ' '.repeat(4000)]
  // V8 loads its Unicode property tables on the first \p{…} of the process (~0.3 s, once).
  checkRegex('\\p{L}\\p{Greek}')
  for (const p of hostile) {
    // CPU time, so that a busy (shared) machine does not make this flaky.
    const c0 = process.cpuUsage()
    checkRegex(p)
    const c = process.cpuUsage(c0)
    t.ok((c.user + c.system) / 1000 < 100, `${p.slice(0, 20)}… checked in bounded time`)
  }
})

t.test('repeated checks give the same verdict (the compiled-source cache keeps only valid ones)', async (t) => {
  const cases: ReadonlyArray<[string, RegExp | undefined]> = [
    ['(?i)(union|select)\\s+admin1', undefined],
    ['*a', /^regex does not compile: Nothing to repeat$/],
    ['(?=a)', /look-around/],
    ['\\p{Greek}+x', undefined],
  ]
  for (let round = 0; round < 3; round++) {
    for (const [pattern, want] of cases) {
      const got = checkRegex(pattern)
      if (want === undefined) t.equal(got, undefined, `${pattern} valid in round ${round}`)
      else t.match(got?.message, want, `${pattern} rejected in round ${round}`)
    }
  }
})

t.test('reading the pattern\'s bytes in place gives the verdict of reading the string', async (t) => {
  // As the checker calls it: the pattern is a run of the expression's bytes, between quotes.
  for (const [, pattern] of [...rustValid, ...notRust]) {
    const codes = codesOf(`http.host matches r#"${pattern}"#`)
    t.same(checkRegex(pattern, codes, 21), checkRegex(pattern), JSON.stringify(pattern))
  }
  const atoms = ['a', 'é', '\\d', '\\s', '\\.', '\\x41', '[a-z]', '(', ')', '(?i)', '(?x)', '(?P<n>', '(?:', '*', '+?', '{2,3}', '|', ' ', '#', '\n', '^', '$', ']', '}']
  fc.assert(fc.property(fc.array(fc.constantFrom(...atoms), { maxLength: 12 }), fc.nat(20), (parts, at) => {
    const pattern = parts.join('')
    const codes = codesOf(`${'x'.repeat(at)}${pattern}"`)
    const inPlace = JSON.stringify(checkRegex(pattern, codes, at))
    const own = JSON.stringify(checkRegex(pattern))
    if (inPlace !== own) throw new Error(`${JSON.stringify(pattern)}: ${inPlace} in place, ${own} from the string`)
  }), { numRuns: 2000 })
})

/** The cache's hash (regex.ts): FNV-1a over the translation's units, kept to 30 bits. */
function cacheHash (translation: string): number {
  let h = 0x811c9dc5 | 0
  for (let k = 0; k < translation.length; k++) h = Math.imul(h ^ translation.charCodeAt(k), 0x01000193)
  return h & 0x3fffffff
}

t.test('a translation that shares its hash with an accepted one is still compiled', async (t) => {
  // `a<n>` translates to itself and compiles; `*<n>` translates to itself and does not.
  const accepted = new Map<number, string>()
  for (let n = 0; n < 200_000; n++) accepted.set(cacheHash(`a${n}`), `a${n}`)
  let pair: [string, string] | undefined
  for (let n = 0; n < 200_000 && pair === undefined; n++) {
    const valid = accepted.get(cacheHash(`*${n}`))
    if (valid !== undefined) pair = [valid, `*${n}`]
  }
  if (pair === undefined) return t.fail('no two patterns with one hash found: has the hash changed?')
  const [valid, invalid] = pair
  t.equal(checkRegex(valid), undefined, `${valid} is valid`)
  t.match(checkRegex(invalid)?.message, /^regex does not compile: Nothing to repeat$/, `${invalid}, same hash, is still rejected`)
  t.equal(checkRegex(valid), undefined, `${valid} is still valid`)
})
