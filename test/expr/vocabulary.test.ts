/**
 * The vocabulary automaton: it must know exactly its words — every word gets its own id, and
 * everything else (prefixes, extensions, one-byte changes, other case, random words) gets 0.
 * The oracle is a Set of the words. Also the words it refuses to be built from.
 */
import t from 'tap'
import fc from 'fast-check'
import { Vocabulary } from '../../src/expr/vocabulary.js'
import { vocabulary } from '../../src/expr/words.js'

const words = vocabulary.words.slice(1)
const known = new Set(words)

t.test('every word has its own id, and the id names the word', async (t) => {
  t.equal(vocabulary.words[0], '', 'id 0 is no word')
  const ids = new Set<number>()
  for (const w of words) {
    const id = vocabulary.idOf(w)
    t.not(id, 0, w)
    t.equal(vocabulary.words[id], w, `${w}: words[idOf(w)]`)
    ids.add(id)
  }
  t.equal(ids.size, words.length, 'no two words share an id')
})

/** Near misses of real words: the cases a trie gets wrong when it stops early or late. */
function nearMisses (w: string): string[] {
  return [
    w.slice(0, -1), w + 'x', w + '.', w + '_', w.toUpperCase(), w[0]!.toUpperCase() + w.slice(1),
    w.slice(1), w.replace(/.$/, (c) => (c === 'a' ? 'b' : 'a')), w + w, `${w}\u00e9`,
  ]
}

t.test('near misses of the words are unknown', async (t) => {
  for (const w of words) {
    for (const miss of nearMisses(w)) {
      if (!known.has(miss)) t.equal(vocabulary.idOf(miss), 0, `${JSON.stringify(miss)} (from ${w})`)
    }
  }
})

t.test('random words agree with a Set of the words', async () => {
  const alphabet = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789_.ABHT'.split(''))
  const word = fc.oneof(
    fc.array(alphabet, { minLength: 1, maxLength: 25 }).map((cs) => cs.join('')),
    // A real word with a random edit, so that most of the path through the trie is walked.
    fc.tuple(fc.constantFrom(...words), fc.nat(), alphabet, fc.nat(2)).map(([w, at, c, how]) => {
      const i = at % (w.length + 1)
      return how === 0 ? w.slice(0, i) + c + w.slice(i) : how === 1 ? w.slice(0, i) + w.slice(i + 1) : w.slice(0, i) + c + w.slice(i + 1)
    }),
  )
  fc.assert(fc.property(word, (w) => {
    const id = vocabulary.idOf(w)
    if (known.has(w) ? vocabulary.words[id] !== w : id !== 0) throw new Error(`${JSON.stringify(w)}: id ${id}`)
  }), { numRuns: 3000 })
})

t.test('a small vocabulary, step by step', async (t) => {
  const v = new Vocabulary(['and', 'an', 'a.b_1'])
  t.equal(v.idOf('and'), 1)
  t.equal(v.idOf('an'), 2)
  t.equal(v.idOf('a.b_1'), 3)
  t.equal(v.idOf('a'), 0, 'a prefix that is no word')
  t.equal(v.idOf(''), 0, 'the empty word')
  t.equal(v.idOf('anda'), 0, 'past the end of a word')
  t.equal(v.idOf('a b'), 0, 'a byte that is no word byte')
  t.equal(v.idOf('a\u0100'), 0, 'a character above 0xff')
})

t.test('every word byte can be in a word: rows are as wide as the alphabet', async (t) => {
  const letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.'
  const v = new Vocabulary([`x${letters}`, 'x.', 'x_9'])
  t.equal(v.stride, letters.length + 2, 'a symbol per word byte, plus "ends the word" and "in no word"')
  t.equal(v.idOf(`x${letters}`), 1)
  t.equal(v.idOf('x.'), 2)
  t.equal(v.idOf('x_9'), 3)
  t.equal(v.idOf(`x${letters.slice(0, -1)}`), 0)
  t.equal(v.idOf('x'), 0)
})

t.test('words it cannot be built from', async (t) => {
  t.throws(() => new Vocabulary(['1abc']), /cannot be a word/, 'starts with a digit')
  t.throws(() => new Vocabulary(['.abc']), /cannot be a word/, 'starts with a dot')
  t.throws(() => new Vocabulary(['a b']), /cannot be a word/, 'holds a space')
  t.throws(() => new Vocabulary(['caf\u00e9']), /cannot be a word/, 'non-ASCII')
  t.throws(() => new Vocabulary(['and', 'and']), /listed twice/, 'a duplicate')
  const letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.'
  const pairs = [...letters.slice(0, 52)].flatMap((a) => [...letters.slice(0, 52)].map((b) => a + b))
  t.throws(() => new Vocabulary(pairs), /too many words/, 'more nodes than 16-bit row offsets reach')
})
