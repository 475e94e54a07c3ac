/**
 * A client that opens a new TLS connection for every request, as an appliance polling once a
 * minute does: `full` makes every handshake a full one, `resumed` offers the last session it was
 * given (a ticket, or a session ID for TLS 1.2). It sends one conditional GET with
 * `Connection: close`, reads the answer's head, and prints one JSON line at the end.
 *
 * Usage: node --import=tsx bench/tls/handshake-client.ts <port> <full|resumed> <seconds> <concurrency> <path> <headers JSON>
 */
import { connect } from 'node:tls'

const [port, mode, seconds, concurrency, path, headersJson] = process.argv.slice(2)
const headers = JSON.parse(headersJson ?? '{}') as Record<string, string>
const request = `GET ${path} HTTP/1.1\r\nHost: localhost\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}Connection: close\r\n\r\n`
let session: Buffer | undefined
const statuses = new Map<string, number>()
let requests = 0
let reused = 0
let errors = 0

function once (): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port: Number(port), servername: 'localhost', rejectUnauthorized: false, session: mode === 'resumed' ? session : undefined })
    let head = ''
    let done = false
    const finish = (ok: boolean): void => {
      if (done) return
      done = true
      if (ok) requests++
      else errors++
      socket.destroy()
      resolve()
    }
    socket.on('session', (s: Buffer) => { if (mode === 'resumed') session = s })
    socket.on('secureConnect', () => {
      if (socket.isSessionReused()) reused++
      socket.write(request)
    })
    socket.on('data', (c: Buffer) => {
      head += c.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      const status = head.slice(9, 12)
      statuses.set(status, (statuses.get(status) ?? 0) + 1)
      // Let a TLS 1.3 ticket sent with the answer arrive before closing.
      setImmediate(() => { finish(true) })
    })
    socket.on('error', () => { finish(false) })
    socket.on('close', () => { finish(head.includes('\r\n\r\n')) })
  })
}

const until = Date.now() + Number(seconds) * 1000
const started = process.hrtime.bigint()
await Promise.all(Array.from({ length: Number(concurrency) }, async () => {
  while (Date.now() < until) await once()
}))
const wallS = Number(process.hrtime.bigint() - started) / 1e9
process.stdout.write(`HSJSON ${JSON.stringify({ requests, reused, errors, seconds: wallS, statuses: Object.fromEntries(statuses) })}\n`)
