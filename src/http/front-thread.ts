/**
 * One front-end thread (front-threads.ts): the feed routes over the catalog and snapshot
 * replicas, answered here from shared memory; every other request forwarded to the main thread.
 * Feed polls are relayed to the main thread's consumer tracker, counts to its /metrics.
 */
import type { MessagePort } from 'node:worker_threads'
import { createLogger } from '../log.js'
import { ThreatfeedError } from '../errors.js'
import { CatalogReplica } from '../feed/catalog-port.js'
import { SnapshotReplica } from '../feed/snapshot-port.js'
import { threadId } from '../pool/thread-priority.js'
import type { Store } from '../store/types.js'
import { startHttpServer, type HttpContext } from './app.js'
import { Authenticator } from './auth.js'
import { ClientAddresses } from './consumer-address.js'
import type { PollFacts } from './consumers.js'
import { feedRoutes } from './feed-routes.js'
import { forwarder } from './forward.js'
import { HandOverClient } from './handover.js'
import type { FromThread, RelayedPoll, ThreadData, ToThread } from './front-threads.js'
import { ListDirectory } from './list-resolve.js'
import { Metrics } from './metrics.js'
import { RateLimiter } from './rate-limit.js'

/** How often relayed polls go to the main thread's tracker (which flushes to the store every few seconds). */
const RELAY_MS = 250

/** Feed polls counted on this thread, posted to the main thread's ConsumerTracker in batches. */
class PollRelay {
  #polls: RelayedPoll[] = []
  readonly #timer: NodeJS.Timeout

  constructor (readonly port: MessagePort) {
    this.#timer = setInterval(() => { this.flush() }, RELAY_MS)
    this.#timer.unref()
  }

  count (p: PollFacts, status: number, etag: string | null, since: number): void {
    // A copy: the request object is the route's, and posting clones it later.
    this.#polls.push([{ workspaceId: p.workspaceId, keyId: p.keyId, address: p.address, userAgent: p.userAgent, client: p.client, listRef: p.listRef, variant: p.variant, at: p.at }, status, etag, since])
  }

  flush (): void {
    if (this.#polls.length === 0) return
    this.port.postMessage({ type: 'polls', polls: this.#polls } satisfies FromThread)
    this.#polls = []
  }

  stop (): void {
    clearInterval(this.#timer)
    this.flush()
  }
}

/** The thread has no store: whatever would read it is forwarded to the main thread instead. */
const NO_STORE = new Proxy({}, {
  get (_target, name) {
    throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error(`a front-end thread has no store (read of ${String(name)}); the main thread answers this`) })
  },
}) as Store

export async function runFrontThread (data: ThreadData, port: MessagePort): Promise<void> {
  const config = data.config
  const log = createLogger(config.logLevel).child({ thread: data.index })
  const catalog = new CatalogReplica(data.catalog)
  await catalog.loaded()
  const auth = new Authenticator(catalog, { pollMs: config.pollMs })
  await auth.start()
  const lists = new ListDirectory(catalog, { pollMs: config.pollMs })
  await lists.start()
  const feeds = new SnapshotReplica(data, (m) => { port.postMessage(m) })
  const relay = data.tracking ? new PollRelay(port) : null
  const forward = forwarder({ port: data.internalPort, token: data.token, maxBodyBytes: config.maxBodyBytes })
  const handOver = new HandOverClient(data.handOver, config.maxBodyBytes)
  const metrics = new Metrics({ processMetrics: false })
  const ctx: HttpContext = {
    config,
    store: NO_STORE,
    auth,
    metrics,
    log,
    rateLimiter: new RateLimiter(config.rateLimitPerSecond, config.rateLimitBurst),
    readiness: () => Promise.reject(new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error('readiness is answered by the main thread') })),
  }
  const consumers = relay === null ? undefined : { tracker: relay, addresses: new ClientAddresses(config.trustedProxies) }
  const http = await startHttpServer(ctx, [feedRoutes({ feeds, lists, consumers, deltas: { forward: forward.handle } })], { forward: forward.handle, handOver: { routes: data.handOverRoutes, client: handOver } })

  port.on('message', (m: ToThread) => {
    switch (m.type) {
      case 'reply': feeds.reply(m); return
      case 'metrics':
        void metrics.export().then((exported) => { port.postMessage({ type: 'metrics', id: m.id, metrics: exported } satisfies FromThread) })
        return
      case 'reload':
        void http.reloadTls(m.reason).then((changed) => { port.postMessage({ type: 'reloaded', id: m.id, changed } satisfies FromThread) })
        return
      case 'close':
        void http.close(m.graceMs).then(() => {
          relay?.stop()
          feeds.close()
          catalog.close()
          auth.stop()
          lists.stop()
          forward.close()
          handOver.close()
          port.postMessage({ type: 'closed' } satisfies FromThread)
          port.close()
        })
    }
  })
  // An uncaught error ends this thread, not the process: its sockets are closed first (Node
  // aborts the process when a thread exits with uWebSockets.js sockets open), the main thread is
  // told, and stops the process so that its supervisor restarts it (README "Front-end threads").
  const die = (e: unknown): void => {
    process.off('uncaughtException', die)
    process.off('unhandledRejection', die)
    log.fatal({ err: e }, 'front-end thread failed')
    port.postMessage({ type: 'died', message: e instanceof Error ? e.message : String(e) } satisfies FromThread)
    void http.close(0).finally(() => { process.exit(1) })
  }
  process.on('uncaughtException', die)
  process.on('unhandledRejection', die)
  port.postMessage({ type: 'ready', tid: threadId() } satisfies FromThread)
}
