/**
 * The ArrayBuffer form of fixed header bytes (src/http/uws-bytes.ts): exactly the Latin-1 bytes,
 * in a buffer of their own (never Node's shared pool), and nothing that is not Latin-1.
 */
import t from 'tap'
import { uwsBytes } from '../../src/http/uws-bytes.js'

const cases: Array<{ description: string, input: string, expected: number[] }> = [
  { description: 'empty', input: '', expected: [] },
  { description: 'a header name', input: 'if-none-match', expected: [...Buffer.from('if-none-match')] },
  { description: 'a status line with a header', input: '304 Not Modified\r\nETag: "a"', expected: [...Buffer.from('304 Not Modified\r\nETag: "a"')] },
  { description: 'Latin-1 beyond ASCII, one byte each', input: 'caf\u00e9\u00ff', expected: [0x63, 0x61, 0x66, 0xe9, 0xff] },
]

for (const c of cases) {
  t.test(c.description, async (t) => {
    const bytes = uwsBytes(c.input)
    t.type(bytes, ArrayBuffer)
    t.equal(bytes.byteLength, c.expected.length, 'the buffer holds these bytes and nothing else')
    t.same([...new Uint8Array(bytes)], c.expected)
  })
}

t.test('two calls never share memory', async (t) => {
  const a = uwsBytes('connection')
  const b = uwsBytes('connection')
  t.not(a, b)
  new Uint8Array(a)[0] = 0x43
  t.equal(new Uint8Array(b)[0], 0x63)
})

const refused: Array<{ description: string, input: string }> = [
  { description: 'a character above U+00FF', input: 'na\u0101me' },
  { description: 'an emoji (surrogate pair)', input: 'x\ud83d\ude00' },
]
for (const c of refused) {
  t.test(`refuses ${c.description}`, async (t) => {
    t.throws(() => uwsBytes(c.input), RangeError)
  })
}
