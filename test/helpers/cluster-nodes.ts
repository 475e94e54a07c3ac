/**
 * Several `threatfeed serve` processes on one data directory (LMDB is multi-process), and the raw
 * HTTP a poller needs: exact body bytes (a gzip body is compared as sent), ETag, Last-Modified.
 *
 * @example
 *   const seed = await seedCluster(dir)
 *   const nodes = await Promise.all([0, 1, 2].map(() => startNode(dir, { THREATFEED_FEED_REBUILD_MS: '1000' })))
 *   const r = await get(nodes[0]!.port, '/v1/threat/feeds?format=plain', { authorization: seed.auth })
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { availableParallelism } from 'node:os'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from './server.js'

const RUN = fileURLToPath(new URL('../../src/cli/run.ts', import.meta.url))
const ROOT = fileURLToPath(new URL('../../', import.meta.url))

export interface Node {
  readonly port: number
  readonly pid: number
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
  /** The node's warn and error log lines (JSON), for a failing test to show. */
  readonly warnings: string[]
}

export interface Seed {
  readonly workspaceId: string
  /** The Authorization header of a key with both scopes. */
  readonly auth: string
  /** Lists of the workspace: one selecting labels team=edge, one with its own defaults. */
  readonly listIds: readonly string[]
}

/** A workspace, a key of both scopes and two lists in a new data directory. */
export async function seedCluster (dataDir: string): Promise<Seed> {
  const store = await openStore({ kind: 'embedded', dataDir })
  try {
    const key = generateApiKey()
    const ws = await store.workspaces.create({ name: 'fleet', subscription: 'active' })
    await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
    const edge = await store.lists.create({ workspaceId: ws.id, name: 'edge', description: 'edge', defaults: {}, selector: { team: 'edge' } })
    const small = await store.lists.create({ workspaceId: ws.id, name: 'small', description: 'capped', defaults: { maxEntries: 40 }, selector: {} })
    return { workspaceId: ws.id, auth: `Bearer ${key}`, listIds: [edge.id, small.id] }
  } finally {
    await store.close()
  }
}

/** Starts `threatfeed serve` on `dataDir`; resolves once it listens and answers /readyz 200. */
export async function startNode (dataDir: string, env: Record<string, string> = {}): Promise<Node> {
  const child = spawn(process.execPath, ['--import=tsx', RUN, 'serve'], {
    cwd: ROOT,
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: '0',
      THREATFEED_DATA_DIR: dataDir,
      THREATFEED_LOG_LEVEL: 'info',
      THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
      THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
      THREATFEED_WORKERS: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => { resolve(code) }))
  const lines = createInterface({ input: child.stdout! })
  const warnings: string[] = []
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => { reject(new Error('no "listening" log line within 60 s')) }, 60_000)
    void exited.then((code) => { clearTimeout(timer); reject(new Error(`node exited with ${code} before listening`)) })
    lines.on('line', (line) => {
      let rec: { msg?: string, port?: number, level?: number }
      try { rec = JSON.parse(line) as typeof rec } catch { return }
      if ((rec.level ?? 0) >= 40) warnings.push(line)
      if (rec.msg === 'listening' && typeof rec.port === 'number') { clearTimeout(timer); resolve(rec.port) }
    })
  })
  for (let i = 0; i < 600; i++) {
    if ((await get(port, '/readyz')).status === 200) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return { port, pid: child.pid!, child, exited, warnings }
}

/** Stops a node with SIGTERM (or SIGKILL) and waits for it. */
export async function stopNode (node: Node, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (node.child.exitCode === null && node.child.signalCode === null) node.child.kill(signal)
  await node.exited
}

export interface Answer {
  readonly status: number
  readonly etag: string | undefined
  readonly lastModified: string | undefined
  readonly body: Buffer
  /** sha256 of the body, for messages. */
  readonly digest: string
}

const agent = new Agent({ keepAlive: true, maxSockets: 16 })

/** One GET with the exact bytes answered (no decompression). */
export function get (port: number, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers, agent }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const body = Buffer.concat(chunks)
        resolve({
          status: res.statusCode ?? 0,
          etag: res.headers.etag,
          lastModified: res.headers['last-modified'],
          body,
          digest: createHash('sha256').update(body).digest('hex').slice(0, 16),
        })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

/** Posts a JSON body; the status and the parsed answer. */
export function post (port: number, path: string, headers: Record<string, string>, body: unknown): Promise<{ status: number, json: unknown }> {
  return new Promise((resolve, reject) => {
    const data = Buffer.from(JSON.stringify(body))
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', headers: { ...headers, 'content-type': 'application/json', 'content-length': String(data.length) }, agent }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json: unknown
        try { json = JSON.parse(text) } catch { json = text }
        resolve({ status: res.statusCode ?? 0, json })
      })
    })
    req.on('error', reject)
    req.end(data)
  })
}

export const FORMATS = ['plain', 'dialect_a', 'dialect_b', 'nftables'] as const
export const FAMILIES = ['v4', 'v6', 'both'] as const
export const ACTIONS = ['block', 'allow'] as const

/** Every variant of a feed a poller can ask for: path and headers. nftables has no `both`. */
export function variants (workspaceFeeds: readonly string[]): Array<{ path: string, headers: Record<string, string> }> {
  const out: Array<{ path: string, headers: Record<string, string> }> = []
  for (const feed of workspaceFeeds) {
    for (const format of FORMATS) {
      for (const family of FAMILIES) {
        if (format === 'nftables' && family === 'both') continue
        for (const action of ACTIONS) {
          for (const md5 of [false, true]) {
            for (const gzip of [false, true]) {
              const path = `/v1/threat/feeds${feed === '*' ? '' : `/${feed}`}?format=${format}&family=${family}&action=${action}${md5 ? '&checksum=md5' : ''}`
              out.push({ path, headers: gzip ? { 'accept-encoding': 'gzip' } : {} })
            }
          }
        }
      }
    }
  }
  return out
}

/** Threads of the processes `pids` ready to run or running now (state R in /proc/<pid>/task/<tid>/stat). */
function runnableThreadsOf (pids: readonly number[]): number {
  let n = 0
  for (const pid of pids) {
    let tids: string[]
    try { tids = readdirSync(`/proc/${pid}/task`) } catch { continue }
    for (const tid of tids) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'latin1')
        if (stat.charCodeAt(stat.lastIndexOf(')') + 2) === 0x52 /* R */) n++
      } catch {
        // The thread ended between the listing and the read.
      }
    }
  }
  return n
}

export interface ForeignLoad {
  /** From now for `ms`, also sample a window of its own: the time the builds after the round's writes had. */
  mark (ms: number): void
  /**
   * Stops sampling: the mean number of runnable threads per core outside `own`, the share of the
   * cores' time the hypervisor took (steal), and both over the marked window (NaN if none).
   */
  stop (): { perCore: number, steal: number, windowPerCore: number, windowSteal: number, samples: number }
}

/** Steal and total jiffies of all cores so far (/proc/stat's first line). */
function stealJiffies (): { steal: number, total: number } {
  const f = readFileSync('/proc/stat', 'latin1').split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number)
  return { steal: f[7] ?? 0, total: f.reduce((a, b) => a + b, 0) }
}

function stealShare (from: { steal: number, total: number }, to: { steal: number, total: number }): number {
  const total = to.total - from.total
  return total > 0 ? (to.steal - from.steal) / total : 0
}

/**
 * How busy the machine is with work other than the cluster's own, while a round runs: every
 * `everyMs`, the threads running or ready to run (/proc/loadavg) less those of the processes
 * `own()` names (the nodes with their worker threads, and this test); and the CPU time the
 * hypervisor kept from every thread (steal, /proc/stat). The load average cannot say either: it
 * lags by a minute, and it counts the nodes' own builds, which are what is measured. Null where
 * /proc is not Linux's.
 */
export function sampleForeignLoad (own: () => readonly number[], everyMs = 100): ForeignLoad | null {
  if (!existsSync('/proc/loadavg')) return null
  let sum = 0
  let samples = 0
  let window: { until: number, sum: number, samples: number, stolen: { steal: number, total: number }, stolenEnd: { steal: number, total: number } | null } | null = null
  const stolen = stealJiffies()
  const sample = (): void => {
    const running = Number(readFileSync('/proc/loadavg', 'latin1').split(' ')[3]!.split('/')[0])
    const foreign = Math.max(0, running - runnableThreadsOf(own()))
    sum += foreign
    samples++
    if (window !== null && window.stolenEnd === null) {
      window.sum += foreign
      window.samples++
      if (Date.now() >= window.until) window.stolenEnd = stealJiffies()
    }
  }
  sample()
  const timer = setInterval(sample, everyMs).unref()
  return {
    mark (ms) {
      window = { until: Date.now() + ms, sum: 0, samples: 0, stolen: stealJiffies(), stolenEnd: null }
    },
    stop () {
      clearInterval(timer)
      sample()
      const cores = availableParallelism()
      const w = window as typeof window
      return {
        perCore: sum / samples / cores,
        steal: stealShare(stolen, stealJiffies()),
        windowPerCore: w === null || w.samples === 0 ? NaN : w.sum / w.samples / cores,
        windowSteal: w === null ? NaN : stealShare(w.stolen, w.stolenEnd ?? stealJiffies()),
        samples,
      }
    },
  }
}
