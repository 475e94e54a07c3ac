/**
 * The floor of any uWebSockets.js front end: a bare uWS app that answers every request with the
 * 304 threatfeed sends (the same status line and headers, given in FLOOR_HEADERS as JSON pairs)
 * and does nothing else but say `Connection: close` when uWS will close — no authentication, no ETag compare, no routing, no metrics. What it
 * costs per request is uWS's own HTTP parsing and writing plus the kernel's socket work; no
 * application on uWS can answer a poll for less. Prints `READY <port>`.
 *
 * Usage: FLOOR_HEADERS='[["ETag","…"],…]' PORT=… node bench/feeds/serve-uws-floor.ts
 */
import uWS from 'uWebSockets.js'

const headers = JSON.parse(process.env.FLOOR_HEADERS ?? '[]') as Array<[string, string]>
const app = uWS.App()
app.any('/*', (res, req) => {
  // uWS closes after a request whose Connection value is five characters long; the answer then
  // says so, as threatfeed's does (src/http/feed-write.ts closesAfter).
  const close = req.getHeader('connection').length === 5
  res.cork(() => {
    res.writeStatus('304 Not Modified')
    for (const [name, value] of headers) res.writeHeader(name, value)
    if (close) res.writeHeader('Connection', 'close')
    res.endWithoutBody()
  })
})
app.listen('127.0.0.1', Number(process.env.PORT ?? 0), (s) => {
  if (s === false) throw new Error('cannot listen')
  process.stdout.write(`READY ${uWS.us_socket_local_port(s)}\n`)
})
process.once('SIGTERM', () => { app.close(); process.exit(0) })
