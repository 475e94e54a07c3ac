/**
 * The lexer's cursor over the text's bytes: words are scanned and recognised in one pass,
 * whatever surrounds them (the ends are where a name stops, not where a known word stops);
 * the byte view is exact for ASCII and marks non-ASCII; the fixed buffer refuses longer text.
 */
import t from 'tap'
import { Cursor } from '../../src/expr/lexer.js'
import { MAX_TEXT_LENGTH } from '../../src/expr/text.js'
import { vocabulary } from '../../src/expr/words.js'

/** [text, where the word starts, the word expected there ('' for none), known to the vocabulary?] */
const words: ReadonlyArray<[string, number, string, boolean]> = [
  ['http.host eq "a"', 0, 'http.host', true],
  ['(http.request.uri.path)', 1, 'http.request.uri.path', true],
  ['x and y', 2, 'and', true],
  ['not(ssl)', 0, 'not', true],
  ['lower(http.host)', 0, 'lower', true],
  ['http.request.uri.pathx eq 1', 0, 'http.request.uri.pathx', false],
  ['http.request.uri.pat', 0, 'http.request.uri.pat', false],
  ['HTTP.host', 0, 'HTTP.host', false],
  ['_private.field', 0, '_private.field', false],
  ['ssl9.x_y', 0, 'ssl9.x_y', false],
  ['http.hóst', 0, 'http.h', false],
  ['ssl', 0, 'ssl', true],
  ['1abc', 0, '', false],
  ['.abc', 0, '', false],
  ['"ssl"', 0, '', false],
  ['', 0, '', false],
  ['and', 3, '', false],
]

t.test('scanWord finds the word and its id in one pass', async (t) => {
  for (const [text, at, word, isKnown] of words) {
    const c = new Cursor(text)
    c.pos = at
    const end = c.scanWord()
    t.equal(text.slice(at, end), word, `${JSON.stringify(text)}@${at}: the word`)
    t.equal(c.word, isKnown ? vocabulary.idOf(word) : 0, `${JSON.stringify(text)}@${at}: the id`)
    if (isKnown) t.not(c.word, 0)
    t.equal(c.pos, at, 'the word is not consumed')
    t.equal(c.peekWord(), word, 'peekWord agrees')
  }
})

/** [text, where the value starts in the text when it is that run of the text as is, else -1] */
const strings: ReadonlyArray<[string, number]> = [
  ['"abc"', 1],
  ['""', 1],
  ['"a b\u0000c"', 1],
  ['"a\\"b"', -1],
  ['"\\x41bc"', -1],
  ['"ab\\101"', -1],
  ['"é"', -1],
  ['"aé"', -1],
  ['r"a\\d+"', 2],
  ['r""', 2],
  ['r#"a"b"#', 3],
  ['r"é"', -1],
]

t.test('valueAt: where a string\'s value lies in the text as is, if it does', async (t) => {
  for (const [text, at] of strings) {
    const c = new Cursor(`x ${text} y`)
    c.pos = 2
    const value = c.readString().value
    t.equal(c.valueAt, at === -1 ? -1 : at + 2, `${text}: valueAt`)
    if (at !== -1) t.equal(value, `x ${text} y`.slice(c.valueAt, c.valueAt + value.length), `${text}: the value is the text there`)
  }
})

t.test('the bytes: ASCII as is, anything else as one marker byte per UTF-16 unit', async (t) => {
  const c = new Cursor('a é😀\u0000b')
  t.same(Array.from(c.codes.subarray(0, c.len + 1)), [97, 32, 0x80, 0x80, 0x80, 0, 98, 0], 'with a 0 after the text')
  t.equal(c.peek(), 97)
  t.equal(c.peek(2), 0x80)
  t.equal(c.peek(6), 98)
  t.equal(c.peek(7), -1, 'past the end')
  // A shorter text after a longer one: the 0 after it ends every scan, whatever the buffer held.
  const d = new Cursor('ss')
  t.equal(d.scanWord(), 2, 'the scan stops at the end of the shorter text')
})

t.test('the cursor reads at most MAX_TEXT_LENGTH characters', async (t) => {
  t.doesNotThrow(() => new Cursor('a'.repeat(MAX_TEXT_LENGTH)))
  t.throws(() => new Cursor('a'.repeat(MAX_TEXT_LENGTH + 1)), /at most 4096 characters/)
})
