/**
 * One front-end thread (front-threads.ts): the feed routes over the catalog and snapshot
 * replicas, answered here from shared memory; every other request forwarded to the main thread.
 * Feed polls are counted by the thread's own consumer tracker, which hands each flush to the
 * main thread's (nothing crosses threads per poll); counts go to its /metrics.
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
import { addressText, ClientAddresses } from './consumer-address.js'
import { ConsumerTracker } from './consumers.js'
import { feedRoutes } from './feed-routes.js'
import { forwarder } from './forward.js'
import { HandOverClient } from './handover.js'
import type { FromThread, ThreadData, ToThread } from './front-threads.js'
import { ListDirectory } from './list-resolve.js'
import { Metrics } from './metrics.js'
import { RateLimiter } from './rate-limit.js'

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
  const tracker = data.tracking
    ? new ConsumerTracker({
      store: NO_STORE,
      log,
      staleMs: config.consumerStaleMs,
      perKey: config.consumersPerKey,
      handOver: (flush) => { port.postMessage({ type: 'consumers', flush } satisfies FromThread) },
    })
    : null
  tracker?.start()
  const clients = new ClientAddresses(config.trustedProxies)
  const forward = forwarder({ port: data.internalPort, token: data.token, maxBodyBytes: config.maxBodyBytes, clientAddress: (res, req) => addressText(clients.of(res, req)) })
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
  const consumers = tracker === null ? undefined : { tracker, addresses: new ClientAddresses(config.trustedProxies) }
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
        void http.close(m.graceMs).then(async () => {
          await tracker?.stop()
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
