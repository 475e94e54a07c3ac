/**
 * A fixed set of words, recognised while a word of the text is scanned: an automaton (a trie,
 * one node per prefix of a word) that the lexer steps through with each byte of the word, so
 * that when the word ends its id is known too. This replaces a scan to find the word's end
 * followed by a lookup, which had to compare the word's bytes a second time (or slice and hash
 * it, for a Map): field names are long (`http.request.uri.path` is 21 bytes) and every operand,
 * operator and logical keyword is a word.
 *
 *   bytes  h t t p . h o s t
 *   nodes  1→2→3→4→5→6→7→8→9→10   ids[10] = id of "http.host"
 *
 * A node is a row of `next`, one entry per symbol (a byte the words use), and `next` holds
 * the offset of the target row rather than its node number: a step is one load, with no
 * multiply or shift on the chain of loads that the scan of a word is.
 *
 * A word byte that no word uses leads to node 0, which every byte leads back to: the scan
 * goes on to the end of the word, which is then unknown (id 0; the words' ids start at 1, so
 * that tables indexed by id need no bounds test for "unknown").
 */
import { isWordByte, isWordStart } from './text.js'

/** Transitions per node: a power of two, so that a row's node (for its id) is a shift away. */
const STRIDE_BITS = 6
const STRIDE = 1 << STRIDE_BITS
/** The row of the root (node 1). */
export const ROOT_ROW = STRIDE

export class Vocabulary {
  /** The words, by id (index 0 holds '', for "no word"). */
  readonly words: readonly string[]
  /** Byte → symbol: 0 is not a word byte (the word ends), 1 a word byte no word uses, 2… the rest. */
  readonly symbols = new Uint8Array(256)
  /** `next[row + symbol]` is the row of the node reached; row 0 is dead, ROOT_ROW the root. */
  readonly next: Uint16Array
  /** Word id at each node (row >> STRIDE_BITS), or 0. */
  readonly ids: Uint16Array

  constructor (words: readonly string[]) {
    this.words = ['', ...words]
    let alphabet = 2
    for (let c = 0; c < 256; c++) if (isWordByte(c)) this.symbols[c] = 1
    for (const w of words) {
      for (let i = 0; i < w.length; i++) {
        const c = w.charCodeAt(i)
        // The lexer steps through the automaton only from a word start (a letter or `_`).
        if (c > 0x7f || !(i === 0 ? isWordStart(c) : isWordByte(c))) throw new Error(`${JSON.stringify(w)} cannot be a word`)
        if (this.symbols[c] === 1) this.symbols[c] = alphabet++
      }
    }
    if (alphabet > STRIDE) throw new Error(`the words use more than ${STRIDE - 2} distinct bytes`)
    // Build the trie in plain arrays first: its size is known only at the end.
    const next: number[] = new Array<number>(2 * STRIDE).fill(0)
    const ids: number[] = [0, 0]
    for (const [index, w] of words.entries()) {
      let node = 1
      for (let i = 0; i < w.length; i++) {
        const slot = (node << STRIDE_BITS) | this.symbols[w.charCodeAt(i)]!
        if (next[slot] === 0) {
          next[slot] = ids.length
          ids.push(0)
          for (let k = 0; k < STRIDE; k++) next.push(0)
        }
        node = next[slot]!
      }
      if (ids[node] !== 0) throw new Error(`${JSON.stringify(w)} is listed twice`)
      ids[node] = index + 1
    }
    if (ids.length * STRIDE > 0x10000 || words.length >= 0xffff) throw new Error('too many words')
    this.next = Uint16Array.from(next, (node) => node << STRIDE_BITS)
    this.ids = Uint16Array.from(ids)
  }

  /**
   * The id of `word`, or 0 (off the lexer's path: tests, tables).
   *
   * @example
   *   new Vocabulary(['and', 'or']).idOf('or') // → 2
   */
  idOf (word: string): number {
    let row = ROOT_ROW
    for (let i = 0; i < word.length && row !== 0; i++) {
      const c = word.charCodeAt(i)
      row = c > 0xff || this.symbols[c] === 0 ? 0 : this.next[row + this.symbols[c]!]!
    }
    return this.idAt(row)
  }

  /** The id of the word that ends at `row` (0 for none). */
  idAt (row: number): number {
    return this.ids[row >>> STRIDE_BITS]!
  }
}
