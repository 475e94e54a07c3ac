/**
 * THREATFEED_HTTP_THREADS: the main thread and N - 1 front-end threads, each with its own
 * uWebSockets.js listeners on the same ports (uSockets sets SO_REUSEPORT on Linux, so the kernel
 * spreads new connections over the listening sockets; README "Architecture").
 *
 *   main thread                                       front-end thread (front-thread.ts), × N - 1
 *   ─────────────                                     ────────────────────────────────────────────
 *   StoreCatalog ──── catalog port (catalog-port) ──► CatalogReplica → Authenticator, ListDirectory
 *   FeedService ──── SnapshotExporter (snapshot-port) ► SnapshotReplica → feed routes (304 / 200)
 *   ConsumerTracker ◄──── each flush (5 s) ─────────── ConsumerTracker (its own polls)
 *   /metrics ◄───────────── each thread's counts ────── Metrics.export
 *   signal routes ◄──── hand-over port (handover.ts) ──── POST /v1/signal, /v2/signal: body transferred
 *   internal listener (127.0.0.1) ◄── every other request, forwarded (forward.ts): explain, /healthz, …
 *
 * Signals stay on one writer, the main thread: the stream append, the consumer's admission and
 * the per-key rate limit live there, so a signal answered by any thread is the same as with one.
 */
import { randomBytes } from 'node:crypto'
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads'
import type { Gauge } from 'prom-client'
import type { Config } from '../config.js'
import type { Logger } from '../log.js'
import { ThreatfeedError } from '../errors.js'
import { shareCatalog } from '../feed/catalog-port.js'
import type { StoreCatalog } from '../feed/catalog.js'
import { SnapshotExporter, type ReplicaReply, type ReplicaRequest, type SnapshotSource } from '../feed/snapshot-port.js'
import type { ConsumerFlush, ConsumerTracker } from './consumers.js'
import { serveHandOvers, type HandOverRequest, type HandOverRoute } from './handover.js'
import type { JsonAnswer } from './respond.js'
import type { Metrics, ThreadMetrics } from './metrics.js'
import uWS from './uws.js'
import { threadEntry } from '../threads/entry.js'

/** What the front-end threads replicate of the main thread. */
export interface ThreadSources {
  readonly feeds: SnapshotSource
  readonly catalog: Pick<StoreCatalog, 'view' | 'onChange' | 'refresh'>
  /** Feed polls answered on a thread are counted here; null: tracking is off. */
  readonly tracker: Pick<ConsumerTracker, 'count' | 'absorb'> | null
}

/** Posted by a thread to the main thread. */
export type FromThread =
  | ReplicaRequest
  /** Listening; `tid`: the thread's OS id (pool/thread-priority.ts `threadId`), null where unknown. */
  | { readonly type: 'ready', readonly tid: number | null }
  | { readonly type: 'failed', readonly message: string }
  /** A flush of the thread's consumer tracker, for the main thread's to write. */
  | { readonly type: 'consumers', readonly flush: ConsumerFlush }
  | { readonly type: 'metrics', readonly id: number, readonly metrics: ThreadMetrics }
  | { readonly type: 'reloaded', readonly id: number, readonly changed: boolean }
  | { readonly type: 'closed' }
  /** The thread had an uncaught error after its start; it closed its sockets and exits. */
  | { readonly type: 'died', readonly message: string }

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
  /** The routes the thread hands over through `handOver` rather than forwarding them. */
  readonly handOverRoutes: readonly HandOverRoute[]
  readonly handOver: MessagePort
  readonly tracking: boolean
  readonly catalog: MessagePort
  readonly snapshots: MessagePort
  readonly bodies: MessagePort
  readonly generation: SharedArrayBuffer
  readonly mailbox: SharedArrayBuffer
}

const entry = threadEntry(import.meta.url, './front-thread-entry')

/** The thread's message is often a TF_ERR_CONFIG one already: not said twice. */
const CONFIG_PREFIX = /^invalid configuration: /

/** How long a thread may take to start (load the code, get the catalog, listen). */
const START_MS = 30_000

/** How long a scrape or a reload waits for a thread: a stuck thread must not hang /metrics. */
export const ASK_MS = 1000

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
  readonly index: number
  readonly worker: Worker
  readonly closed: Promise<void>
  exited: boolean
  /** It said it listens ('ready'). */
  ready: boolean
  /** The thread's OS id, once it said it listens (null: not yet, or unknown). */
  tid: number | null
}

export interface FrontEndThreadsOptions {
  readonly count: number
  readonly config: Config
  readonly internalPort: number
  readonly token: string
  /** The routes the threads hand over through a port of their own (handover.ts), and the answer to each request. */
  readonly handOver: { readonly routes: readonly HandOverRoute[], readonly answer: (m: HandOverRequest) => Promise<JsonAnswer> }
  readonly sources: ThreadSources
  readonly log: Logger
  /** Where the missing-thread gauge goes (the main thread's registry). */
  readonly metrics: Pick<Metrics, 'gauge' | 'registry'>
  /**
   * Called once when a started thread exits without being asked to: the process is meant to
   * stop so that its supervisor restarts it (README "Front-end threads").
   */
  readonly onLost: (error: Error) => void
}

export class FrontEndThreads {
  readonly #threads: ThreadHandle[] = []
  readonly #exporter: SnapshotExporter
  readonly #closers: Array<() => void> = []
  readonly #log: Logger
  readonly #waiting = new Map<number, (m: FromThread | null) => void>()
  readonly #missing: Gauge<string>
  readonly #onLost: (error: Error) => void
  #nextId = 0
  #closing = false
  #lost = false

  private constructor (exporter: SnapshotExporter, opts: FrontEndThreadsOptions) {
    this.#exporter = exporter
    this.#log = opts.log
    this.#onLost = opts.onLost
    // One gauge per registry, should a registry see a second start (tests).
    this.#missing = opts.metrics.registry.getSingleMetric('threatfeed_http_threads_missing') as Gauge<string> | undefined ?? opts.metrics.gauge('threatfeed_http_threads_missing', `Front-end threads that did not give their counts to the last scrape within ${ASK_MS} ms (exited or stuck); their requests are missing from it`)
    this.#missing.set(0)
  }

  /**
   * Starts `count` threads listening on the ports of `config` (as bound by the main thread) and
   * resolves once each listens; a thread that cannot start stops the start.
   */
  static async start (opts: FrontEndThreadsOptions): Promise<FrontEndThreads> {
    const threads = new FrontEndThreads(new SnapshotExporter(opts.sources.feeds), opts)
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

  /** The OS ids of the threads that told theirs: the threads answering polls, kept at the process's priority. */
  get tids (): number[] {
    return this.#threads.flatMap((t) => t.tid === null ? [] : [t.tid])
  }

  /**
   * The counts of each thread that answers within ASK_MS, for the main thread's /metrics; the
   * others (exited or stuck) are counted in threatfeed_http_threads_missing instead.
   */
  async metrics (): Promise<ThreadMetrics[]> {
    const answers = await Promise.all(this.#threads.map((t) => this.#ask(t, (id) => ({ type: 'metrics', id }))))
    const got = answers.flatMap((m) => m?.type === 'metrics' ? [m.metrics] : [])
    this.#missing.set(this.#threads.length - got.length)
    return got
  }

  /** Reads the TLS files again on every thread (SIGHUP); true when one of them changed its certificate. */
  async reloadTls (reason: string): Promise<boolean> {
    const answers = await Promise.all(this.#threads.map((t) => this.#ask(t, (id) => ({ type: 'reload', id, reason }))))
    answers.forEach((m, i) => { if (m === null) this.#log.error({ thread: this.#threads[i]!.index }, `front-end thread did not reload its TLS files within ${ASK_MS} ms`) })
    return answers.some((m) => m?.type === 'reloaded' && m.changed)
  }

  /** Each thread stops listening, lets its requests finish (up to graceMs) and exits. */
  async close (graceMs: number): Promise<void> {
    this.#closing = true
    for (const t of this.#threads) {
      if (t.exited) continue
      // A thread that failed or is still starting has no handler for 'close' and would be waited
      // for in vain (a start that failed hung for good, issue 36): it has no listener to drain.
      if (!t.ready) void t.worker.terminate()
      else t.worker.postMessage({ type: 'close', graceMs } satisfies ToThread)
    }
    await Promise.all(this.#threads.map((t) => t.closed))
    for (const stop of this.#closers) stop()
    this.#exporter.close()
  }

  /** The thread's answer, or null when it has exited or does not answer within ASK_MS. */
  #ask (t: ThreadHandle, make: (id: number) => ToThread): Promise<FromThread | null> {
    if (t.exited) return Promise.resolve(null)
    const id = this.#nextId++
    return new Promise<FromThread | null>((resolve) => {
      const timer = setTimeout(() => { this.#waiting.delete(id); resolve(null) }, ASK_MS)
      this.#waiting.set(id, (m) => { clearTimeout(timer); resolve(m) })
      t.worker.postMessage(make(id))
    })
  }

  /** A started thread exited unasked: logged, and the owner told once (the process stops). */
  #exited (t: ThreadHandle, code: number, message: string | null): void {
    if (this.#closing) return
    const error = new Error(`front-end thread ${t.index} exited (${code})${message === null ? '' : `: ${message}`}`)
    this.#log.fatal({ thread: t.index, code, cause: message }, `${error.message}; the process stops so that its supervisor restarts it`)
    if (this.#lost) return
    this.#lost = true
    this.#onLost(error)
  }

  async #spawn (index: number, opts: FrontEndThreadsOptions): Promise<void> {
    const catalog = new MessageChannel()
    const snapshots = new MessageChannel()
    const bodies = new MessageChannel()
    const handOver = new MessageChannel()
    this.#closers.push(shareCatalog(opts.sources.catalog, catalog.port1))
    serveHandOvers(handOver.port1, opts.handOver.answer)
    // The thread closes its end once drained; the main thread's end goes with the thread.
    this.#closers.push(() => { handOver.port1.close() })
    const shared = this.#exporter.addThread(snapshots.port1, bodies.port1)
    const data: ThreadData = {
      index: index + 1,
      config: opts.config,
      internalPort: opts.internalPort,
      token: opts.token,
      handOverRoutes: opts.handOver.routes,
      handOver: handOver.port2,
      tracking: opts.sources.tracker !== null,
      catalog: catalog.port2,
      snapshots: snapshots.port2,
      bodies: bodies.port2,
      ...shared,
    }
    const worker = new Worker(entry.file, { workerData: data, transferList: [catalog.port2, snapshots.port2, bodies.port2, handOver.port2], ...(entry.loader.length > 0 ? { execArgv: [...entry.loader] } : {}) })
    let started = false
    let died: string | null = null
    const handle: ThreadHandle = {
      index: index + 1,
      worker,
      exited: false,
      ready: false,
      tid: null,
      closed: new Promise<void>((resolve) => {
        worker.once('exit', (code) => {
          handle.exited = true
          if (started) this.#exited(handle, code, died)
          resolve()
        })
      }),
    }
    const exporterIndex = this.#threads.length
    this.#threads.push(handle)
    const tracker = opts.sources.tracker
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => { reject(new ThreatfeedError('TF_ERR_CONFIG', [`front-end thread ${index + 1} did not start within ${START_MS} ms`])) }, START_MS)
      worker.once('error', (e) => { clearTimeout(timer); reject(e) })
      worker.once('exit', (code) => { clearTimeout(timer); reject(new ThreatfeedError('TF_ERR_CONFIG', [`front-end thread ${index + 1} exited (${code}) while starting`])) })
      worker.on('message', (m: FromThread) => {
        switch (m.type) {
          case 'ready': started = true; handle.ready = true; handle.tid = m.tid; clearTimeout(timer); resolve(); return
          case 'died': died = m.message; return
          case 'failed': clearTimeout(timer); reject(new ThreatfeedError('TF_ERR_CONFIG', [m.message.replace(CONFIG_PREFIX, '')])); return
          case 'consumers':
            tracker?.absorb(index + 1, m.flush)
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
