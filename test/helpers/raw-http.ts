/**
 * HTTP/1.1 over a bare socket, for what fetch and node:http hide or refuse to send: pipelined
 * requests, exact header bytes, bare-LF line ends, HTTP/1.0, oversized and repeated headers.
 *
 * @example
 *   const text = await rawExchange(port, 'HEAD /x HTTP/1.1\r\nHost: t\r\n\r\nGET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n')
 *   const [head, next] = parseResponses(text, ['HEAD', 'GET'])
 */
import { connect } from 'node:net'

/** Writes `request` and resolves with everything read until the server closes (or `idleMs` of silence). */
export function rawExchange (port: number, request: string | Buffer, idleMs = 2000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    const done = (): void => { clearTimeout(timer); socket.destroy(); resolve(Buffer.concat(chunks).toString('latin1')) }
    let timer = setTimeout(done, idleMs)
    socket.on('data', (c: Buffer) => {
      chunks.push(c)
      clearTimeout(timer)
      timer = setTimeout(done, idleMs)
    })
    socket.on('end', done)
    socket.on('close', done)
    socket.on('error', (e: NodeJS.ErrnoException) => {
      // The server may close while a large request is still being written: what it sent counts.
      if (e.code === 'ECONNRESET' || e.code === 'EPIPE') done()
      else { clearTimeout(timer); reject(e) }
    })
    socket.write(request)
  })
}

export interface ParsedResponse {
  readonly status: number
  readonly statusLine: string
  /** Lowercased names; a repeated header is joined with ', '. */
  readonly headers: Record<string, string>
  /** Header names exactly as sent. */
  readonly names: string[]
  readonly body: string
}

/**
 * Splits pipelined responses, framing each by Content-Length (no body for HEAD, 1xx, 204, 304).
 * Whatever follows the last expected response is returned as one more entry's body with status 0,
 * so a body sent where none belongs shows up instead of vanishing.
 */
export function parseResponses (text: string, methods: string[]): ParsedResponse[] {
  const out: ParsedResponse[] = []
  let at = 0
  for (const method of methods) {
    const end = text.indexOf('\r\n\r\n', at)
    if (end < 0) break
    const lines = text.slice(at, end).split('\r\n')
    const statusLine = lines[0]!
    const status = Number(statusLine.split(' ')[1])
    const headers: Record<string, string> = {}
    const names: string[] = []
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':')
      const name = line.slice(0, colon)
      const value = line.slice(colon + 1).trim()
      names.push(name)
      const k = name.toLowerCase()
      headers[k] = headers[k] === undefined ? value : `${headers[k]}, ${value}`
    }
    at = end + 4
    const bodiless = method === 'HEAD' || status === 304 || status === 204 || status < 200
    const length = bodiless ? 0 : headers['content-length'] === undefined ? text.length - at : Number(headers['content-length'])
    out.push({ status, statusLine, headers, names, body: text.slice(at, at + length) })
    at += length
  }
  if (at < text.length) out.push({ status: 0, statusLine: '', headers: {}, names: [], body: text.slice(at) })
  return out
}
