/**
 * What each word of the vocabulary means to the parser: the operators, the logical keywords,
 * the functions, and that no word means two things.
 */
import t from 'tap'
import { functions } from '../../src/expr/functions.js'
import { compareOpOf, functionOf, isKeyword, KEYWORDS, logicalOpOf, NOT_WORD, STRICT_WORD, vocabulary, WILDCARD_WORD } from '../../src/expr/words.js'

const compare: ReadonlyArray<[string, string]> = [
  ['eq', 'eq'], ['ne', 'ne'], ['lt', 'lt'], ['le', 'le'], ['gt', 'gt'], ['ge', 'ge'], ['contains', 'contains'],
  ['matches', 'matches'], ['wildcard', 'wildcard'], ['in', 'in'], ['bitwise_and', 'bitwise_and'],
]

t.test('operator and keyword words', async (t) => {
  for (const [word, op] of compare) t.equal(compareOpOf[vocabulary.idOf(word)], op, word)
  for (const word of ['and', 'or', 'xor']) t.equal(logicalOpOf[vocabulary.idOf(word)], word, word)
  for (const word of KEYWORDS) t.equal(isKeyword[vocabulary.idOf(word)], true, `${word} is a keyword`)
  t.equal(vocabulary.words[NOT_WORD], 'not')
  t.equal(vocabulary.words[STRICT_WORD], 'strict')
  t.equal(vocabulary.words[WILDCARD_WORD], 'wildcard')
  t.equal(compareOpOf[STRICT_WORD], undefined, 'strict alone is no operator (it needs wildcard)')
})

t.test('function words', async (t) => {
  for (const [name, def] of functions) t.equal(functionOf[vocabulary.idOf(name)], def, name)
})

t.test('no word means two things, and id 0 means nothing', async (t) => {
  for (let id = 0; id < vocabulary.words.length; id++) {
    const meanings = [compareOpOf[id], logicalOpOf[id], functionOf[id]].filter((m) => m !== undefined)
    t.ok(meanings.length <= 1, `${vocabulary.words[id]}: ${meanings.length} meanings`)
    if (isKeyword[id] === true) t.equal(functionOf[id], undefined, `${vocabulary.words[id]}: a keyword is no function`)
  }
  t.same([compareOpOf[0], logicalOpOf[0], functionOf[0], isKeyword[0]], [undefined, undefined, undefined, undefined])
})
