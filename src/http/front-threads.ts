/**
 * THREATFEED_HTTP_THREADS: the main thread and N - 1 front-end threads, each with its own
 * uWebSockets.js listeners on the same ports (uSockets sets SO_REUSEPORT on Linux, so the kernel
 * spreads new connections over the listening sockets; README "Architecture").
 *
 *   main thread                                       front-end thread (front-thread.ts), × N - 1
 *   ─────────────                                     ────────────────────────────────────────────
 *   StoreCatalog ──── catalog port (catalog-port) ──► CatalogReplica → Authenticator, ListDirectory
 *   FeedService ──── SnapshotExporter (snapshot-port) ► SnapshotReplica → feed routes (304 / 200)
 *   ConsumerTracker ◄──────────── polls, batched ───── PollRelay
 *   /metrics ◄───────────── each thread's counts ────── Metrics.export
 *   internal listener (127.0.0.1) ◄── every other request, forwarded (forward.ts): signals, explain, …
 *
 * Signals stay on one writer, the main thread: the stream append, the consumer's admission and
 * the per-key rate limit live there, so a signal answered by any thread is the same as with one.
 */
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads'
import type { Config } from '../config.js'
import type { Logger } from '../log.js'
import { ThreatfeedError } from '../errors.js'
import { shareCatalog } from '../feed/catalog-port.js'
import type { StoreCatalog } from '../feed/catalog.js'
import { SnapshotExporter, type ReplicaReply, type ReplicaRequest, type SnapshotSource } from '../feed/snapshot-port.js'
import type { ConsumerTracker, PollFacts } from './consumers.js'
import type { ThreadMetrics } from './metrics.js'
import uWS from './uws.js'

/** What the front-end threads replicate of the main thread. */
export interface ThreadSources {
  readonly feeds: SnapshotSource
  readonly catalog: Pick<StoreCatalog, 'view' | 'onChange' | 'refresh'>
  /** Feed polls answered on a thread are counted here; null: tracking is off. */
  readonly tracker: Pick<ConsumerTracker, 'count'> | null
}

/** A poll as a thread relays it: the facts and count()'s arguments. */
export type RelayedPoll = readonly [PollFacts, number, string | null, number]

/** Posted by a thread to the main thread. */
export type FromThread =
  | ReplicaRequest
  | { readonly type: 'ready' }
  | { readonly type: 'failed', readonly message: string }
  | { readonly type: 'polls', readonly polls: readonly RelayedPoll[] }
  | { readonly type: 'metrics', readonly id: number, readonly metrics: ThreadMetrics }
  | { readonly type: 'reloaded', readonly id: number, readonly changed: boolean }
  | { readonly type: 'closed' }

/** Posted by the main thread to a thread. */
export type ToThread =
  | ({ readonly type: 'reply' } & ReplicaReply)
  | { readonly type: 'metrics', readonly id: number }
  | { readonly type: 'reload', readonly id: number, readonly reason: string }
  | { readonly type: 'close', readonly graceMs: number }

/** What a thread starts from (workerData). */
export interface ThreadData {
  readonly index: number
  /** The main thread's config with the ports it bound (never 0). */
  readonly config: Config
  readonly internalPort: number
  readonly token: string
  readonly tracking: boolean
  readonly catalog: MessagePort
  readonly snapshots: MessagePort
  readonly bodies: MessagePort
  readonly generation: SharedArrayBuffer
  readonly mailbox: SharedArrayBuffer
}

const devEntry = fileURLToPath(new URL('./front-thread-entry-tsx.mjs', import.meta.url))
const isDev = import.meta.url.endsWith('.ts') && existsSync(devEntry)
const entry = isDev ? devEntry : fileURLToPath(new URL('./front-thread-entry.js', import.meta.url))

/** How long a thread may take to start (load the code, get the catalog, listen). */
const START_MS = 30_000

/**
 * Ports every thread can bind: a port of 0 becomes a free port picked now, since the kernel lets
 * no other socket join one bound as "any port", even with SO_REUSEPORT.
 */
export async function sharedPorts (config: Config): Promise<Config> {
  const pick = (): number => {
    let port = 0
    uWS.App().listen('127.0.0.1', 0, (s) => {
      if (s === false) return
      port = uWS.us_socket_local_port(s)
      uWS.us_listen_socket_close(s)
    })
    if (port === 0) throw new ThreatfeedError('TF_ERR_CONFIG', ['cannot find a free port for the front-end threads'])
    return port
  }
  const port = config.port === 0 ? pick() : config.port
  const tls = config.tls === null ? null : { ...config.tls, port: config.tls.port === 0 ? pick() : config.tls.port }
  return Object.freeze({ ...config, port, tls })
}

interface ThreadHandle {
  readonly worker: Worker
  readonly closed: Promise<void>
}

export class FrontEndThreads {
  readonly #threads: ThreadHandle[] = []
  readonly #exporter: SnapshotExporter
  readonly #stopCatalog: Array<() => void> = []
  readonly #log: Logger
  readonly #waiting = new Map<number, (m: FromThread) => void>()
  #nextId = 0

  private constructor (exporter: SnapshotExporter, log: Logger) {
    this.#exporter = exporter
    this.#log = log
  }

  /**
   * Starts `count` threads listening on the ports of `config` (as bound by the main thread) and
   * resolves once each listens; a thread that cannot start stops the start.
   */
  static async start (opts: { count: number, config: Config, internalPort: number, token: string, sources: ThreadSources, log: Logger }): Promise<FrontEndThreads> {
    const threads = new FrontEndThreads(new SnapshotExporter(opts.sources.feeds), opts.log)
    try {
      await Promise.all(Array.from({ length: opts.count }, (_, i) => threads.#spawn(i, opts)))
    } catch (e) {
      await threads.close(0)
      throw e
    }
    return threads
  }

  get size (): number {
    return this.#threads.length
  }

  /** Each thread's counts, for the main thread's /metrics. */
  async metrics (): Promise<ThreadMetrics[]> {
    const answers = await Promise.all(this.#threads.map((t) => this.#ask(t, (id) => ({ type: 'metrics', id }))))
    return answers.flatMap((m) => m.type === 'metrics' ? [m.metrics] : [])
  }

  /** Reads the TLS files again on every thread (SIGHUP); true when one of them changed its certificate. */
  async reloadTls (reason: string): Promise<boolean> {
    const answers = await Promise.all(this.#threads.map((t) => this.#ask(t, (id) => ({ type: 'reload', id, reason }))))
    return answers.some((m) => m.type === 'reloaded' && m.changed)
  }

  /** Each thread stops listening, lets its requests finish (up to graceMs) and exits. */
  async close (graceMs: number): Promise<void> {
    for (const t of this.#threads) t.worker.postMessage({ type: 'close', graceMs } satisfies ToThread)
    await Promise.all(this.#threads.map((t) => t.closed))
    for (const stop of this.#stopCatalog) stop()
    this.#exporter.close()
  }

  #ask (t: ThreadHandle, make: (id: number) => ToThread): Promise<FromThread> {
    const id = this.#nextId++
    return new Promise<FromThread>((resolve) => {
      this.#waiting.set(id, resolve)
      t.worker.postMessage(make(id))
    })
  }

  async #spawn (index: number, opts: { config: Config, internalPort: number, token: string, sources: ThreadSources }): Promise<void> {
    const catalog = new MessageChannel()
    const snapshots = new MessageChannel()
    const bodies = new MessageChannel()
    this.#stopCatalog.push(shareCatalog(opts.sources.catalog, catalog.port1))
    const shared = this.#exporter.addThread(snapshots.port1, bodies.port1)
    const data: ThreadData = {
      index: index + 1,
      config: opts.config,
      internalPort: opts.internalPort,
      token: opts.token,
      tracking: opts.sources.tracker !== null,
      catalog: catalog.port2,
      snapshots: snapshots.port2,
      bodies: bodies.port2,
      ...shared,
    }
    const worker = new Worker(entry, { workerData: data, transferList: [catalog.port2, snapshots.port2, bodies.port2], ...(isDev ? { execArgv: [] } : {}) })
    const closed = new Promise<void>((resolve) => { worker.once('exit', () => { resolve() }) })
    const handle: ThreadHandle = { worker, closed }
    const exporterIndex = this.#threads.length
    this.#threads.push(handle)
    const tracker = opts.sources.tracker
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => { reject(new ThreatfeedError('TF_ERR_CONFIG', [`front-end thread ${index + 1} did not start within ${START_MS} ms`])) }, START_MS)
      worker.once('error', (e) => { clearTimeout(timer); reject(e) })
      worker.once('exit', (code) => { clearTimeout(timer); reject(new ThreatfeedError('TF_ERR_CONFIG', [`front-end thread ${index + 1} exited (${code}) while starting`])) })
      worker.on('message', (m: FromThread) => {
        switch (m.type) {
          case 'ready': clearTimeout(timer); resolve(); return
          case 'failed': clearTimeout(timer); reject(new ThreatfeedError('TF_ERR_CONFIG', [m.message])); return
          case 'polls':
            if (tracker !== null) for (const [facts, status, etag, since] of m.polls) tracker.count(facts, status, etag, since)
            return
          case 'metrics':
          case 'reloaded': {
            const waiter = this.#waiting.get(m.id)
            this.#waiting.delete(m.id)
            waiter?.(m)
            return
          }
          case 'closed': return
          default:
            void this.#exporter.answer(exporterIndex, m, (reply) => { worker.postMessage({ type: 'reply', ...reply } satisfies ToThread) })
        }
      })
    })
    worker.on('error', (e) => { this.#log.error({ err: e, thread: index + 1 }, 'front-end thread failed') })
  }
}

/** A secret per process: the internal listener answers only requests carrying it (forward.ts). */
export function threadToken (): string {
  return randomBytes(24).toString('base64url')
}
