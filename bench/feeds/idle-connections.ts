/**
 * Opens N keep-alive connections, makes one conditional feed request on each (so every one is a
 * real HTTP connection that has been served), then leaves them idle. Prints `READY <open>` once
 * all are idle; on a `count` line on stdin prints `OPEN <still open>`; exits on `quit` or EOF.
 * Needs `ulimit -n` above N (bench/feeds.ts raises it).
 *
 * Usage: node --import=tsx bench/feeds/idle-connections.ts <port> <count> <authorization> <etag>
 */
import { connect, type Socket } from 'node:net'
import { createInterface } from 'node:readline'

const [portArg, countArg, authorization, etag] = process.argv.slice(2)
if (portArg === undefined || countArg === undefined || authorization === undefined || etag === undefined) {
  throw new Error('usage: idle-connections.ts <port> <count> <authorization> <etag>')
}
const port = Number(portArg)
const count = Number(countArg)
const request = `GET /v1/threat/feeds HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${authorization}\r\nIf-None-Match: ${etag}\r\n\r\n`
const sockets = new Set<Socket>()
const BATCH = 250

function openOne (): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let head = ''
    const onData = (chunk: Buffer): void => {
      head += chunk.toString('latin1')
      if (head.includes('\r\n\r\n')) {
        socket.off('data', onData)
        if (!head.startsWith('HTTP/1.1 304')) reject(new Error(`expected a 304, got ${head.split('\r\n')[0]}`))
        else resolve()
      }
    }
    socket.on('data', onData)
    socket.once('error', reject)
    socket.once('connect', () => { socket.write(request) })
    socket.on('close', () => { sockets.delete(socket) })
    // Idle sockets must not keep a listener that throws later (a reset at the end is expected).
    socket.on('error', () => {})
    sockets.add(socket)
  })
}

for (let opened = 0; opened < count; opened += BATCH) {
  await Promise.all(Array.from({ length: Math.min(BATCH, count - opened) }, openOne))
}
process.stdout.write(`READY ${sockets.size}\n`)

const rl = createInterface({ input: process.stdin })
const quit = (): void => {
  for (const s of sockets) s.destroy()
  process.exit(0)
}
rl.on('line', (line) => {
  if (line.trim() === 'count') process.stdout.write(`OPEN ${sockets.size}\n`)
  else if (line.trim() === 'quit') quit()
})
rl.on('close', quit)
