/**
 * The text as bytes (one per UTF-16 unit, non-ASCII as one marker): the native fast path for
 * ASCII and the loop for everything else must give the same bytes as a plain charCodeAt
 * loop, for any text, followed by the 0 that ends the lexer's scans.
 */
import t from 'tap'
import fc from 'fast-check'
import { codesOf, hexValue, MAX_TEXT_LENGTH, NON_ASCII, textCodes } from '../../src/expr/text.js'

/** The oracle: what every byte must be. */
function expected (text: string): number[] {
  return [...Array.from({ length: text.length }, (_, i) => (text.charCodeAt(i) < 0x80 ? text.charCodeAt(i) : NON_ASCII)), 0]
}

t.test('textCodes and codesOf agree with a charCodeAt loop', async () => {
  const into = new Uint8Array(MAX_TEXT_LENGTH + 1).fill(0xff) // stale bytes must not leak through
  const text = fc.oneof(
    fc.string({ maxLength: 200, unit: 'grapheme-ascii' }),
    fc.string({ maxLength: 200, unit: 'binary' }), // lone surrogates included
    fc.string({ maxLength: 50, unit: 'grapheme' }),
  )
  fc.assert(fc.property(text, (s) => {
    const want = JSON.stringify(expected(s))
    const got = JSON.stringify(Array.from(textCodes(s, into).subarray(0, s.length + 1)))
    if (got !== want) throw new Error(`textCodes(${JSON.stringify(s)}) = ${got}`)
    if (JSON.stringify(Array.from(codesOf(s))) !== want) throw new Error(`codesOf(${JSON.stringify(s)})`)
  }), { numRuns: 1000 })
})

t.test('edge texts', async (t) => {
  const into = new Uint8Array(MAX_TEXT_LENGTH + 1)
  const cases: ReadonlyArray<[string, string]> = [
    ['empty', ''],
    ['NUL inside', 'a\u0000b'],
    ['DEL and the last ASCII', '\u007f~'],
    ['first non-ASCII', '\u0080'],
    ['a pair and a lone surrogate', '😀\ud800x'],
    ['the longest text, ASCII', 'a'.repeat(MAX_TEXT_LENGTH)],
    ['the longest text, non-ASCII', 'é'.repeat(MAX_TEXT_LENGTH)],
  ]
  for (const [label, s] of cases) t.same(Array.from(textCodes(s, into).subarray(0, s.length + 1)), expected(s), label)
})

t.test('hexValue', async (t) => {
  const digits = '0123456789abcdefABCDEF'
  for (const d of digits) t.equal(hexValue(d.charCodeAt(0)), parseInt(d, 16), d)
  for (const c of ['g', 'G', '/', ':', '@', '`']) t.equal(hexValue(c.charCodeAt(0)), -1, c)
  t.equal(hexValue(-1), -1, 'the end of the text')
})
