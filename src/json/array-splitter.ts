/**
 * Splits the text of a JSON array into the exact text of each element, incrementally, without
 * parsing the elements.
 *
 * Two users: the v1 ingest path, which must put each accepted entry on the stream byte-for-byte
 * as it appeared in the request body (DECISIONS §3) — re-serializing the parsed object would not
 * do, since `1e2`, `"\u0041"` and inner whitespace would all come back different — and the bulk
 * loader (`threatfeed import`), which streams a JSON array of any size in chunks.
 *
 * It checks the array's punctuation (brackets, commas, strings) but not the elements' grammar:
 * the server has already parsed the body, and the loader parses each element on its own. An
 * element ends when its brackets balance outside strings, or — for a bare number or literal — at
 * the next comma, bracket or whitespace.
 */

const S = {
  BEFORE: 0, // before '['
  FIRST: 1, // after '[': a value or ']'
  VALUE: 2, // inside an element
  AFTER: 3, // after an element: ',' or ']'
  NEXT: 4, // after ',': a value
  DONE: 5, // after ']': whitespace only
} as const
type State = (typeof S)[keyof typeof S]

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d

/** JSON whitespace (RFC 8259 §2): space, tab, line feed, carriage return. */
function isWhitespace (c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09
}

/** How many backslashes end `s[from, end)`. */
function trailingBackslashes (s: string, from: number, end: number): number {
  let k = end
  while (k > from && s.charCodeAt(k - 1) === BACKSLASH) k--
  return end - k
}

export class JsonArraySyntaxError extends Error {
  readonly offset: number
  constructor (message: string, offset: number) {
    super(`${message} at offset ${offset}`)
    this.name = 'JsonArraySyntaxError'
    this.offset = offset
  }
}

/**
 * @example
 *   const s = new JsonArraySplitter()
 *   const out: string[] = []
 *   s.push('[{"a": 1}, 2', out)
 *   s.push('0 , "x"]', out)
 *   s.end()            // out: ['{"a": 1}', '20', '"x"']
 */
export class JsonArraySplitter {
  #state: State = S.BEFORE
  /** Start of the current element's text carried over from earlier chunks. */
  #pending = ''
  #depth = 0
  #inString = false
  #escape = false
  /** 'c' composite ({ or [), 's' string, 'l' bare literal or number. */
  #kind = 'c'
  /** Characters consumed before the current chunk (for error offsets). */
  #consumed = 0

  /** Feeds the next chunk; appends every element completed in it to `out`. */
  push (chunk: string, out: string[]): void {
    // State lives in locals for the loop: private-field access per character measurably slows it.
    let state = this.#state
    let depth = this.#depth
    let inString = this.#inString
    let escape = this.#escape
    const n = chunk.length
    let start = 0 // start of the current element within this chunk, when it began here
    for (let i = 0; i < n; i++) {
      if (state === S.VALUE) {
        if (inString) {
          // Skip to the closing quote: a quote preceded by an odd run of backslashes is escaped.
          if (escape) { escape = false; continue }
          const q = chunk.indexOf('"', i)
          if (q < 0) {
            escape = trailingBackslashes(chunk, i, n) % 2 === 1
            break
          }
          if (trailingBackslashes(chunk, i, q) % 2 === 1) { i = q; continue }
          inString = false
          i = q
          if (this.#kind === 's') { this.#emit(chunk, start, i + 1, out); state = S.AFTER }
          continue
        }
        const c = chunk.charCodeAt(i)
        if (this.#kind === 'l') {
          if (c === COMMA || c === CLOSE_BRACKET || isWhitespace(c)) {
            this.#emit(chunk, start, i, out)
            state = S.AFTER
            i-- // the terminator is read again in AFTER
          }
        } else if (c === QUOTE) inString = true
        else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++
        else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
          if (--depth === 0) { this.#emit(chunk, start, i + 1, out); state = S.AFTER }
        }
        continue
      }
      const c = chunk.charCodeAt(i)
      if (isWhitespace(c)) continue
      switch (state) {
        case S.BEFORE:
          if (c !== OPEN_BRACKET) this.#fail('expected "["', i)
          state = S.FIRST
          break
        case S.FIRST:
        case S.NEXT:
          if (c === CLOSE_BRACKET) {
            if (state === S.NEXT) this.#fail('expected a value after ","', i)
            state = S.DONE
            break
          }
          if (c === COMMA) this.#fail('expected a value', i)
          start = i
          state = S.VALUE
          this.#kind = c === QUOTE ? 's' : c === OPEN_BRACE || c === OPEN_BRACKET ? 'c' : 'l'
          inString = c === QUOTE
          escape = false
          depth = this.#kind === 'c' ? 1 : 0
          break
        case S.AFTER:
          if (c === COMMA) state = S.NEXT
          else if (c === CLOSE_BRACKET) state = S.DONE
          else this.#fail('expected "," or "]"', i)
          break
        default:
          this.#fail('unexpected text after the array', i)
      }
    }
    if (state === S.VALUE) this.#pending += chunk.slice(start)
    this.#consumed += n
    this.#state = state
    this.#depth = depth
    this.#inString = inString
    this.#escape = escape
  }

  /** Throws unless the array was closed. */
  end (): void {
    if (this.#state !== S.DONE) this.#fail(this.#state === S.BEFORE ? 'expected "["' : 'unterminated array', 0)
  }

  /** Whether the closing ']' has been seen. */
  get done (): boolean {
    return this.#state === S.DONE
  }

  #emit (chunk: string, start: number, end: number, out: string[]): void {
    if (this.#pending === '') out.push(chunk.slice(start, end))
    else {
      out.push(this.#pending + chunk.slice(0, end))
      this.#pending = ''
    }
  }

  #fail (message: string, i: number): never {
    throw new JsonArraySyntaxError(message, this.#consumed + i)
  }
}

/**
 * The element texts of a complete JSON array text (e.g. a request body already parsed).
 *
 * @example
 *   splitJsonArray('[ {"ip":"10.0.0.1"} ,1e2]') // ['{"ip":"10.0.0.1"}', '1e2']
 */
export function splitJsonArray (text: string): string[] {
  const splitter = new JsonArraySplitter()
  const out: string[] = []
  splitter.push(text, out)
  splitter.end()
  return out
}
