/**
 * The request body of a uWS POST, for the bench's bare servers (the anchor in bench/ingest.ts and
 * the durable floor): chunks copied as they come (uWS reuses its buffer), `done` called once with
 * the whole body unless the client went away first.
 */
import type { HttpResponse } from 'uWebSockets.js'

export function readBody (res: HttpResponse, done: (body: Buffer, aborted: () => boolean) => void): void {
  let aborted = false
  const chunks: Buffer[] = []
  res.onAborted(() => { aborted = true })
  res.onData((chunk, last) => {
    chunks.push(Buffer.from(chunk.slice(0)))
    if (last && !aborted) done(Buffer.concat(chunks), () => aborted)
  })
}
