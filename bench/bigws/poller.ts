/**
 * bench/bigws's open-loop poller, a process of its own: poll i of the small feed is due at
 * t0 + i / rate, whatever the answers before it did, until the parent says stop. It does nothing
 * else — the parent's ingest, its watch of the big feed and their bodies would make it send late,
 * and a poll sent late is the client's delay, not the server's. The parent starts it at a
 * real-time priority when it may (bench/bigws.ts), so that it sends on time while the server
 * keeps both cores busy.
 *
 * argv: port, API key, polls per second. Answers the parent's 'stop' with every poll's scheduled
 * send time (ms since the epoch), its latency from that time and how late it was sent (ms), and
 * how many polls failed or were not 200.
 */
import { Pool } from 'undici'

export interface PollerResult {
  scheduledAt: Float64Array
  latencyMs: Float64Array
  sendLagMs: Float64Array
  errors: number
}

const [port, key, rate] = [Number(process.argv[2]), process.argv[3]!, Number(process.argv[4])]
const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 32, pipelining: 1, keepAliveTimeout: 60_000 })
const request = { path: '/v1/threat/feeds', method: 'GET' as const, headers: { authorization: `Bearer ${key}` } }
const epoch = performance.timeOrigin
let capacity = 1 << 16
let scheduledAt = new Float64Array(capacity)
let latencyMs = new Float64Array(capacity)
let sendLagMs = new Float64Array(capacity)
let done = 0
let errors = 0
let inFlight = 0
let stopping = false

function record (scheduled: number, latency: number, lag: number): void {
  if (done === capacity) {
    capacity *= 2
    const grow = (a: Float64Array<ArrayBuffer>): Float64Array<ArrayBuffer> => { const b = new Float64Array(capacity); b.set(a); return b }
    scheduledAt = grow(scheduledAt); latencyMs = grow(latencyMs); sendLagMs = grow(sendLagMs)
  }
  scheduledAt[done] = epoch + scheduled
  latencyMs[done] = latency
  sendLagMs[done] = lag
  done++
}

// Warm up before the clock starts: the pool's connections opened, undici's path compiled. The
// first polls would otherwise wait for both and count it against the server.
for (let round = 0; round < 20; round++) {
  await Promise.all(Array.from({ length: 32 }, async () => { await (await pool.request(request)).body.dump() }))
}
const t0 = performance.now()
let sent = 0
const timer = setInterval(() => {
  const now = performance.now()
  const due = Math.floor((now - t0) * rate / 1000)
  for (; sent < due; sent++) {
    const scheduled = t0 + sent * 1000 / rate
    const lag = now - scheduled
    inFlight++
    pool.request(request).then(async (r) => {
      await r.body.dump()
      if (r.statusCode !== 200) errors++
      else record(scheduled, performance.now() - scheduled, lag)
    }, () => { errors++ }).finally(() => {
      inFlight--
      if (stopping && inFlight === 0) finish()
    })
  }
}, 1)

function finish (): void {
  const result: PollerResult = { scheduledAt: scheduledAt.slice(0, done), latencyMs: latencyMs.slice(0, done), sendLagMs: sendLagMs.slice(0, done), errors }
  process.send!(result, () => { void pool.close().finally(() => process.exit(0)) })
}

process.on('message', (m) => {
  if (m !== 'stop' || stopping) return
  stopping = true
  clearInterval(timer)
  if (inFlight === 0) finish()
})
process.send!('ready')
