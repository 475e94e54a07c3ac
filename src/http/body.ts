/**
 * Capped body reader. uWS hands out chunks that are only valid during the callback, so each is
 * copied; reading stops (and the connection is closed after the answer) as soon as the cap is
 * passed, so an oversized body never sits in memory.
 */
import type { Exchange } from './respond.js'
import { ThreatfeedError } from '../errors.js'

export function readBody (ex: Exchange, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    let done = false
    ex.abortListeners.push(() => {
      if (!done) { done = true; reject(new Error('client aborted the request')) }
    })
    ex.res.onData((chunk, isLast) => {
      if (done) return
      size += chunk.byteLength
      if (size > maxBytes) {
        done = true
        ex.closeAfter = true
        reject(bodyTooLarge(maxBytes))
        return
      }
      chunks.push(Buffer.from(chunk.slice(0)))
      if (isLast) {
        done = true
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
      }
    })
  })
}

/** What a body over the cap is answered (400), wherever the cap was passed (handover.ts: on a front-end thread). */
export function bodyTooLarge (maxBytes: number): ThreatfeedError {
  return new ThreatfeedError('TF_ERR_BAD_REQUEST', [`request body exceeds ${maxBytes} bytes`])
}
