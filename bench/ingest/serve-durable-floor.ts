/**
 * The floor of durable ingestion on this stack: a bare uWS server that does only what SPEC §6 and
 * DECISIONS §3 cannot do without — each batch appended to an LMDB stream and flushed to disk
 * before the 200, then applied to an LMDB rules table (one record per target, with the
 * consumer's checkpoint, in one transaction per pass, at most 4000 entries a pass as threatfeed's
 * consumer) — and nothing else: no authentication, no rate limit, no validation or normalization,
 * one stream value per batch instead of a record per entry, no expiry log, no ids, no metrics.
 * Records are laid out as threatfeed lays out unkeyed rules (src/store/embedded/arrival-index.ts):
 * in arrival order, the target → record identity in memory, so that a pass of random targets
 * appends rather than dirtying a B-tree page per target — the cheapest layout known here, so the
 * floor stays the least an implementation must do.
 * Two environments, opened as threatfeed opens its own (lmdb-env.ts: flushed commits, no
 * overlapping sync). No implementation of the spec on uWS and LMDB can accept and apply a batch
 * for less.
 *
 * Prints `{"port":…,"key":"floor"}`; answers GET /bench/lag and /bench/stored like
 * bench/ingest.ts's server.
 *
 * Usage: node --import=tsx bench/ingest/serve-durable-floor.ts <data dir>
 */
import { join } from 'node:path'
import { open } from 'lmdb'
import uWS from 'uWebSockets.js'
import { readBody } from './read-body.js'

const dir = process.argv[2]!
const MAP_SIZE = 2 ** 38
const PASS = 4000
const WORKSPACE = '00000000-0000-4000-8000-000000000000\u001fa\u001f'

const streamRoot = open({ path: join(dir, 'stream'), maxDbs: 4, mapSize: MAP_SIZE, overlappingSync: false })
const stream = streamRoot.openDB<Buffer, number>({ name: 'stream', encoding: 'binary' })
const root = open({ path: dir, maxDbs: 4, mapSize: MAP_SIZE, overlappingSync: false })
const rules = root.openDB<Buffer, Buffer>({ name: 'rules', encoding: 'binary', keyEncoding: 'binary' })
const checkpoints = root.openDB<number, string>({ name: 'checkpoints', encoding: 'json' })

/** A v1 event or a v2 envelope: only the target, the action, the expiry and the text are kept. */
interface Entry { ip?: string, action?: string, expiration?: number, description?: string, expires_in?: number, reason?: string, rule?: { target?: { ip?: string }, action?: string } }

/** target → key of its record (arrival number). */
const identity = new Map<string, number>()
let arrivals = 0
let head = 0
/** Entries accepted (durable on the stream) and applied. */
let accepted = 0
let applied = 0
const queue: Entry[] = []
let running = false

/** Applies what is queued, a pass of at most PASS entries at a time, until the queue is empty. */
async function consume (): Promise<void> {
  if (running) return
  running = true
  while (queue.length > 0) {
    const pass = queue.splice(0, PASS)
    const to = applied + pass.length
    await root.transaction(() => {
      for (const e of pass) {
        const ip = e.ip ?? e.rule?.target?.ip ?? ''
        const expiresAt = Date.now() + (e.expiration ?? e.expires_in ?? 0) * 1000
        const target = ip + '/32'
        let n = identity.get(target)
        if (n === undefined) identity.set(target, n = ++arrivals)
        const key = Buffer.alloc(WORKSPACE.length + 8)
        key.write(WORKSPACE, 'latin1')
        key.writeDoubleBE(n, WORKSPACE.length)
        rules.putSync(key, Buffer.from(`${target}\u001f${e.action ?? e.rule?.action ?? ''}\u001f${expiresAt}\u001f${e.description ?? e.reason ?? ''}`))
      }
      checkpoints.putSync('rules', to)
    })
    applied = to
  }
  running = false
}

const app = uWS.App()
app.post('/*', (res) => {
  readBody(res, (body, aborted) => {
    const entries = JSON.parse(body.toString()) as Entry[]
    const seq = ++head
    void stream.put(seq, body).then(() => {
      accepted += entries.length
      queue.push(...entries)
      void consume()
      if (aborted()) return
      res.cork(() => res.writeHeader('Content-Type', 'application/json').end(`{"success":true,"message":"Processed ${entries.length} entries, 0 failed"}`))
    })
  })
})
app.get('/bench/lag', (res) => {
  const cpu = process.cpuUsage()
  // In entries, not stream seqs: what was accepted against what is applied.
  res.end(JSON.stringify({ head: accepted, applied, cpuMicros: cpu.user + cpu.system }))
})
app.get('/bench/stored', (res) => {
  // Rules applied, one per target (the identity in memory holds every record).
  res.end(JSON.stringify({ stored: identity.size }))
})
app.listen('127.0.0.1', 0, (s) => {
  if (s === false) throw new Error('cannot listen')
  process.stdout.write(JSON.stringify({ port: uWS.us_socket_local_port(s), key: 'floor' }) + '\n')
})
process.once('SIGTERM', () => { app.close(); void Promise.all([root.close(), streamRoot.close()]).then(() => process.exit(0)) })
