import t from 'tap'
import fc from 'fast-check'
import { isDeepStrictEqual } from 'node:util'
import { JsonArraySplitter, JsonArraySyntaxError, splitJsonArray } from '../../src/json/array-splitter.js'

t.test('element texts are the exact source text of each element', async (t) => {
  const cases: Array<{ description: string, input: string, expected: string[] }> = [
    { description: 'empty array', input: '[]', expected: [] },
    { description: 'blank around', input: ' \n[ ]\r\n', expected: [] },
    { description: 'objects keep inner whitespace', input: '[ {"a" : 1} ,\n{ "b":[1, 2] } ]', expected: ['{"a" : 1}', '{ "b":[1, 2] }'] },
    { description: 'numbers in any notation', input: '[1e2,-0.5E-3 , 10]', expected: ['1e2', '-0.5E-3', '10'] },
    { description: 'literals', input: '[true,false,null]', expected: ['true', 'false', 'null'] },
    { description: 'strings with brackets, commas and escapes', input: '["a,]}", "q\\"x", "\\\\", "\\u0041"]', expected: ['"a,]}"', '"q\\"x"', '"\\\\"', '"\\u0041"'] },
    { description: 'nested arrays', input: '[[1,[2,[3]]],{"x":{"y":[]}}]', expected: ['[1,[2,[3]]]', '{"x":{"y":[]}}'] },
    { description: 'non-ASCII text', input: '[{"d":"é✓😀"}]', expected: ['{"d":"é✓😀"}'] },
  ]
  for (const c of cases) t.same(splitJsonArray(c.input), c.expected, c.description)
})

t.test('broken punctuation is refused with an offset', async (t) => {
  const cases: Array<{ input: string, message: string }> = [
    { input: '', message: 'expected "[" at offset 0' },
    { input: '{"a":1}', message: 'expected "[" at offset 0' },
    { input: '[1,]', message: 'expected a value after "," at offset 3' },
    { input: '[,1]', message: 'expected a value at offset 1' },
    { input: '[1 2]', message: 'expected "," or "]" at offset 3' },
    { input: '[{"a":1}}]', message: 'expected "," or "]" at offset 8' },
    { input: '[1] [2]', message: 'unexpected text after the array at offset 4' },
    { input: '[1', message: 'unterminated array at offset 2' },
    { input: '["abc', message: 'unterminated array at offset 5' },
  ]
  for (const c of cases) {
    let caught: unknown = null
    try {
      splitJsonArray(c.input)
    } catch (e) {
      caught = e
    }
    t.ok(caught instanceof JsonArraySyntaxError, JSON.stringify(c.input))
    t.equal((caught as Error).message, c.message)
  }
})

// Oracle: JSON.parse of each element equals the parsed array, and re-joining the texts parses to
// the same array, for any JSON array cut into chunks at any places.
t.test('property: matches JSON.parse for random arrays and random chunking', async (t) => {
  const value = fc.jsonValue({ maxDepth: 4 })
  fc.assert(fc.property(fc.array(value, { maxLength: 20 }), fc.array(fc.nat(), { maxLength: 8 }), fc.boolean(), (arr, cuts, pretty) => {
    const text = pretty ? JSON.stringify(arr, null, 2) : JSON.stringify(arr)
    const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b)
    const splitter = new JsonArraySplitter()
    const out: string[] = []
    let prev = 0
    for (const p of [...points, text.length]) {
      splitter.push(text.slice(prev, p), out)
      prev = p
    }
    splitter.end()
    return isDeepStrictEqual(out.map((s) => JSON.parse(s) as unknown), JSON.parse(text))
  }), { numRuns: 500 })
  t.pass('500 random arrays')
})

t.test('chunk boundaries inside escapes and backslash runs', async (t) => {
  const text = '["a\\\\", "b\\"c", "\\\\\\"", 123, {"k":"\\\\"}]'
  const expected = JSON.parse(text)
  for (let cut = 0; cut <= text.length; cut++) {
    for (let cut2 = cut; cut2 <= text.length; cut2 += 3) {
      const s = new JsonArraySplitter()
      const out: string[] = []
      s.push(text.slice(0, cut), out)
      s.push(text.slice(cut, cut2), out)
      s.push(text.slice(cut2), out)
      s.end()
      t.same(out.map((x) => JSON.parse(x)), expected)
    }
  }
  t.equal(new JsonArraySplitter().done, false)
})
