/**
 * Fixed bytes handed to uWebSockets.js on a hot path (header names read, a status line with its
 * headers written), in the form it reads cheapest.
 *
 * uWS takes a string, a typed array or an ArrayBuffer wherever it takes text. A string it
 * converts to UTF-8 in a fresh allocation per call; a typed array it reads in place, but must
 * first look up the view's buffer and that buffer's backing store; an ArrayBuffer only the
 * backing store. Per getHeader call on the bench machine (uWebSockets.js 20.51, Node 20, median
 * of thousands of requests): string 200 ns, Buffer 153 ns, ArrayBuffer 133 ns — a poll makes
 * five such calls. The ArrayBuffer must be the bytes alone: a small Buffer is a view into
 * Node's shared 8 KiB pool, whose `.buffer` is the whole pool.
 */

/**
 * `text` as Latin-1 bytes in an ArrayBuffer of its own (every character must be below U+0100).
 *
 * @example
 *   const AUTHORIZATION = uwsBytes('authorization')
 *   req.getHeader(AUTHORIZATION)
 */
export function uwsBytes (text: string): ArrayBuffer {
  const bytes = new Uint8Array(text.length)
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c > 0xff) throw new RangeError(`uwsBytes: ${JSON.stringify(text)} is not Latin-1`)
    bytes[i] = c
  }
  return bytes.buffer
}
