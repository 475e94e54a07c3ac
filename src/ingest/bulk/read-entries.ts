/**
 * Entries of a bulk-import file, read as a stream: a JSON array of any size (split with the
 * incremental JsonArraySplitter) or NDJSON (one entry per line, blank lines skipped). The file is
 * never held whole in memory; each entry keeps its exact text, so a v1 entry reaches the stream
 * byte for byte as it is in the file.
 */
import type { Readable } from 'node:stream'
import { JsonArraySplitter } from '../../json/array-splitter.js'

export interface SourceEntry {
  /** 0-based position in the file. */
  readonly index: number
  /** The entry's JSON text as in the file. */
  readonly text: string
}

export type SourceFormat = 'json' | 'ndjson'

/** Thrown for a file that is neither a JSON array nor NDJSON, or not UTF-8. */
export class SourceError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'SourceError'
  }
}

/**
 * Yields the entries in slices (one per chunk read), and after each slice reports how many bytes
 * of the file have been read, for progress. The format is taken from the first non-blank
 * character: `[` is a JSON array, anything else NDJSON.
 *
 * @example
 *   for await (const slice of readEntries(createReadStream('signals.ndjson'))) send(slice)
 */
export async function * readEntries (input: Readable, onBytes: (bytes: number) => void = () => {}): AsyncGenerator<SourceEntry[]> {
  const decoder = new TextDecoder('utf-8', { fatal: true })
  let format: SourceFormat | null = null
  const splitter = new JsonArraySplitter()
  let carry = '' // NDJSON: the unfinished last line
  let index = 0
  let bytes = 0
  for await (const chunk of input) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk as Buffer
    bytes += buf.byteLength
    let text: string
    try {
      text = decoder.decode(buf, { stream: true })
    } catch {
      throw new SourceError(`the file is not valid UTF-8 (between bytes ${bytes - buf.byteLength} and ${bytes})`)
    }
    if (format === null) {
      const first = firstNonBlank(text)
      if (first === '') { carry += text; continue }
      format = first === '[' ? 'json' : 'ndjson'
      text = carry + text
      carry = ''
    }
    const texts: string[] = []
    if (format === 'json') {
      try {
        splitter.push(text, texts)
      } catch (e) {
        throw new SourceError(`not a JSON array: ${(e as Error).message}`)
      }
    } else {
      carry = splitLines(carry + text, texts)
    }
    onBytes(bytes)
    if (texts.length > 0) {
      yield texts.map((t) => ({ index: index++, text: t }))
    }
  }
  try {
    decoder.decode()
  } catch {
    throw new SourceError('the file ends inside a UTF-8 sequence')
  }
  if (format === 'json') {
    try {
      splitter.end()
    } catch (e) {
      throw new SourceError(`not a JSON array: ${(e as Error).message}`)
    }
  } else if (carry.trim() !== '') {
    yield [{ index: index++, text: carry.trim() }]
  }
}

function firstNonBlank (s: string): string {
  const m = /[^\s]/.exec(s)
  return m === null ? '' : m[0]
}

/** Appends the complete non-blank lines of `s` to `out`; returns the unfinished last line. */
function splitLines (s: string, out: string[]): string {
  let start = 0
  for (;;) {
    const nl = s.indexOf('\n', start)
    if (nl < 0) return s.slice(start)
    const line = s.slice(start, nl).trim()
    if (line !== '') out.push(line)
    start = nl + 1
  }
}
