/**
 * A fixed set of words, recognised while a word of the text is scanned: an automaton (a trie,
 * one node per prefix of a word) that the lexer steps through with each byte of the word, so
 * that when the word ends its id is known too. This replaces a scan to find the word's end
 * followed by a lookup, which had to compare the word's bytes a second time (or slice and hash
 * it, for a Map): field names are long (`http.request.uri.path` is 21 bytes) and every operand,
 * operator and logical keyword is a word. (Measured against a scan for the end, then a hash of
 * the length and a few bytes, then a compare: the trie was faster, and so was it against a
 * double-array trie, whose smaller tables did not make up for its second load per byte.)
 *
 *   bytes  h t t p . h o s t
 *   nodes  1→2→3→4→5→6→7→8→9→10   id of node 10 = id of "http.host"
 *
 * A node is a row of `next`, one entry per symbol (a byte the words use), and `next` holds
 * the offset of the target row rather than its node number: a step is one load, with no
 * multiply or shift on the chain of loads that the scan of a word is. A row is as wide as the
 * alphabet, no wider (the table, 40 KB for the words of both schemes, is read a byte of text at
 * a time, and a tighter one stays in cache better: 64-entry rows measured 1–2 % slower over a
 * whole check), and the word id of its node sits in entry 0, where no step goes (symbol 0
 * ends the word).
 *
 * A word byte that no word uses leads to node 0, which every byte leads back to: the scan
 * goes on to the end of the word, which is then unknown (id 0; the words' ids start at 1, so
 * that tables indexed by id need no bounds test for "unknown").
 */
import { isWordByte, isWordStart } from './text.js'

export class Vocabulary {
  /** The words, by id (index 0 holds '', for "no word"). */
  readonly words: readonly string[]
  /** Byte → symbol: 0 is not a word byte (the word ends), 1 a word byte no word uses, 2… the rest. */
  readonly symbols = new Uint8Array(256)
  /** Entries per row: the number of symbols. */
  readonly stride: number
  /** The row of the root (node 1); row 0 is the dead node's. */
  readonly root: number
  /**
   * `next[row + symbol]` is the row of the node reached (symbol ≥ 1); `next[row]` is the id of
   * the word that ends at the row's node, or 0.
   */
  readonly next: Uint16Array

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
    const stride = alphabet
    // Build the trie in a plain array of node numbers first: its size is known only at the end.
    const next: number[] = new Array<number>(2 * stride).fill(0)
    for (const [index, w] of words.entries()) {
      let node = 1
      for (let i = 0; i < w.length; i++) {
        const slot = node * stride + this.symbols[w.charCodeAt(i)]!
        if (next[slot] === 0) {
          next[slot] = next.length / stride
          for (let k = 0; k < stride; k++) next.push(0)
        }
        node = next[slot]!
      }
      if (next[node * stride] !== 0) throw new Error(`${JSON.stringify(w)} is listed twice`)
      next[node * stride] = index + 1
    }
    if (next.length > 0x10000 || words.length >= 0xffff) throw new Error('too many words')
    this.stride = stride
    this.root = stride
    // Node numbers to row offsets, except in entry 0 of each row (a word id).
    this.next = Uint16Array.from(next, (v, k) => (k % stride === 0 ? v : v * stride))
  }

  /**
   * The id of `word`, or 0 (off the lexer's path: tests, tables).
   *
   * @example
   *   new Vocabulary(['and', 'or']).idOf('or') // → 2
   */
  idOf (word: string): number {
    let row = this.root
    for (let i = 0; i < word.length && row !== 0; i++) {
      const c = word.charCodeAt(i)
      row = c > 0xff || this.symbols[c] === 0 ? 0 : this.next[row + this.symbols[c]!]!
    }
    return this.idAt(row)
  }

  /** The id of the word that ends at `row` (0 for none). */
  idAt (row: number): number {
    return this.next[row]!
  }
}
