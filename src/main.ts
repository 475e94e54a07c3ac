/**
 * Composition root: config → store → geo → pool → snapshot → http. It wires and decides nothing.
 */
import { loadConfig, type Config } from './config.js'
import { createLogger, type Logger } from './log.js'
import { openStore } from './store/open.js'
import type { BatchingStore } from './store/batch-types.js'
import { addSweepPass } from './store/types.js'
import { Authenticator } from './http/auth.js'
import { Metrics, registerClockSkewMetric, registerConsumerMetrics, registerFeedConsumerMetrics } from './http/metrics.js'
import { ClockSkewWatch } from './store/clock-skew.js'
import { RateLimiter } from './http/rate-limit.js'
import { startHttpServer, type HttpContext, type Readiness } from './http/app.js'
import { signalRoutes } from './http/signal-routes.js'
import { openapiRoutes } from './http/openapi-routes.js'
import { feedRoutes } from './http/feed-routes.js'
import { bouncerRoutes } from './http/bouncer-routes.js'
import { explainGeoOf, explainRoutes } from './http/explain-route.js'
import { ListDirectory } from './http/list-resolve.js'
import { ConsumerTracker } from './http/consumers.js'
import { adminRoutes } from './http/admin-routes.js'
import { AdminJournal, journalBounds } from './http/admin-journal.js'
import { ClientAddresses } from './http/consumer-address.js'
import { AppendHealth } from './ingest/append-health.js'
import { prerenderDeltas } from './http/feed-delta.js'
import { SignalIngester } from './ingest/batch.js'
import { buildOpenApiDocument } from './ingest/openapi.js'
import { StreamConsumer, type Consumer } from './stream/consumer.js'
import { ThreadedConsumer } from './stream/consumer-thread.js'
import { Housekeeper, type HousekeeperOptions } from './stream/housekeeping.js'
import { consumerReadiness } from './stream/consumer-health.js'
import { createPool } from './pool/pool.js'
import { backgroundNice, niceAllThreadsBut } from './pool/thread-priority.js'
import { FeedService } from './feed/feed-service.js'
import { DeltaHistory } from './feed/delta-history.js'
import { BouncerRetimes } from './feed/bouncer-retimes.js'
import { StoreCatalog } from './feed/catalog.js'
import { registerFeedMetrics } from './feed/metrics.js'
import { loadGeoIndex } from './geo/load.js'
import { watchGeo } from './geo/watch.js'
import { ensureDefaultAsnDb, defaultCountryDb } from './geo/default-db.js'
import type { GeoIndex } from './geo/geo-index.js'
import { isThreatfeedError } from './errors.js'
import { loadTlsMaterial } from './http/tls-material.js'
import { checkListenAddresses } from './http/listen-check.js'

export interface RunningServer {
  readonly port: number
  /** The HTTPS listener's port; null without THREATFEED_TLS_CERT. */
  readonly tlsPort: number | null
  /** Reads the TLS files again (what SIGHUP does); true when the certificate changed. */
  reloadTls (reason: string): Promise<boolean>
  readonly config: Config
  readonly store: BatchingStore
  /** The admin API's diagnostics and audit log (its samples can be taken now: tests). */
  readonly adminJournal: AdminJournal
  /** Where the sweep runs when not in the Housekeeper (its `sweeper`: the consumer thread), for
   *  a Housekeeper of one's own (bench/soak); null: the Housekeeper sweeps. */
  readonly sweeper: HousekeeperOptions['sweeper'] | null
  /** Stops accepting, finishes in-flight requests, flushes and closes the store. */
  stop (): Promise<void>
  /** Settles when a front-end thread exits unasked: `serve` then stops with exit code 1. */
  readonly threadLost: Promise<Error>
  /** The nice value of the background threads (THREATFEED_BACKGROUND_NICE); null: off. */
  readonly backgroundNice: number | null
  /** The OS ids of the front-end threads (none with THREATFEED_HTTP_THREADS=1). */
  readonly frontThreadIds: readonly number[]
}

/** Worker tasks longer than this are abandoned (their worker replaced); the last snapshot keeps serving. */
const TASK_TIMEOUT_MS = 60_000
/** A feed's first build waits at most this long for acknowledged signals to be applied (DECISIONS §3: 1 s). */
const CAUGHT_UP_MS = 1000

/** The configured geo databases, or the embedded default (DECISIONS §1), building the ASN one on first use. */
async function geoPaths (config: Config, log: Logger): Promise<{ countryDb: string, asnDb: string }> {
  const countryDb = config.geoCountryDb ?? defaultCountryDb()
  const asnDb = config.geoAsnDb ?? await ensureDefaultAsnDb(config.dataDir, {
    progress: process.stderr.isTTY === true,
    onBuilt: (s) => { log.info({ path: s.path, version: s.version, ms: Math.round(s.ms) }, 'built the default ASN database') },
  })
  return { countryDb, asnDb }
}

/** Starts every component and the HTTP server; used by `threatfeed serve` and by tests. */
export async function startServer (config: Config, log: Logger): Promise<RunningServer> {
  // A bad certificate or key stops the start before anything is opened (the listener reads them again).
  if (config.tls !== null) await loadTlsMaterial(config.tls)
  // So is a HOST or port that cannot be listened on (checked again just before listening).
  await checkListenAddresses(config)
  // Taken before any thread is niced: every background thread runs at this one value.
  const nice = backgroundNice(config.backgroundNice)
  const store = await openStore(config.store === 'mongodb'
    // The database may still be starting (docker compose): retry for a minute, a line per attempt.
    ? { kind: 'mongodb', uri: config.mongodbUri!, dbName: config.mongodbDb, tombstoneMax: config.tombstoneMax, connectRetryMs: 60_000, onConnectRetry: (attempt, err) => { log.warn({ err, attempt }, 'MongoDB not reachable yet; retrying') } }
    : { kind: 'embedded', dataDir: config.dataDir, tombstoneMax: config.tombstoneMax })
  const metrics = new Metrics()
  const paths = await geoPaths(config, log)
  let geo: GeoIndex = await loadGeoIndex(paths)
  log.info({ countries: geo.countries().length, asns: geo.asns().length, ...paths }, 'geo databases loaded')

  // One poller of the store's revisions; keys, lists and the feed service all read its view.
  const catalog = new StoreCatalog(store, { pollMs: config.pollMs, onError: (e) => { log.warn({ err: e }, 'catalog reload failed; serving the previous keys and lists') } })
  await catalog.start()
  const auth = new Authenticator(catalog, { pollMs: config.pollMs })
  await auth.start()

  // A store that offers it (the embedded one) applies on a thread of its own (consumer-thread.ts);
  // MongoDB does its work in the server, so its consumer only waits on it, in this thread.
  const consumer: Consumer = store.consumerThread === undefined
    ? new StreamConsumer(store, { pollMs: config.pollMs, log })
    : new ThreadedConsumer({ handoff: store.consumerThread, pollMs: config.pollMs, logLevel: config.logLevel, log, nice, onSwept: (pass) => { addSweepPass(store.housekeeping, pass) } })
  await consumer.start()
  // The consumer sweeps, in turn with its applies and only while it holds the applier lease
  // (housekeeping.ts says why; on MongoDB every node sweeping unleased starved the apply).
  const sweeper = consumer.setSweep === undefined ? {} : { sweeper: consumer as { setSweep (limit: number | null): void } }
  const housekeeper = config.sweepIntervalMs === null ? null : new Housekeeper({ store, intervalMs: config.sweepIntervalMs, retentionMs: config.streamRetentionMs, log, ...sweeper })
  housekeeper?.start()
  registerConsumerMetrics(metrics, () => consumer.health())
  // Nodes sharing a MongoDB stamp expiries and Last-Modified with their own clocks: measured against the server's.
  const clockSkew = store.clockSkew === undefined ? null : new ClockSkewWatch(store as Required<Pick<BatchingStore, 'clockSkew'>>, log)
  if (clockSkew !== null) {
    registerClockSkewMetric(metrics, () => clockSkew.skewMs)
    clockSkew.start()
  }
  // The admin API's diagnostics and audit log (issue 22); it samples the feeds once they exist.
  const journal = new AdminJournal({ store, log, bounds: journalBounds({ keepMs: config.batchJournalRetentionMs, maxPerPartition: config.batchJournalMax }) })
  const appendHealth = new AppendHealth()
  const ingester = new SignalIngester({
    stream: store.stream,
    health: appendHealth,
    onBatch: journal.recordBatch,
    checks: { asnExists: (asn) => geo.hasAsn(asn), checkExpressions: true },
    onAppended: (batch) => { consumer.offer(batch) },
  })

  const pool = createPool({ workers: config.workers, taskTimeoutMs: TASK_TIMEOUT_MS, nice })
  const feeds = new FeedService({
    store,
    pool,
    config: { feedRebuildMs: config.feedRebuildMs, pollMs: config.pollMs },
    log,
    metrics: registerFeedMetrics(metrics),
    geo,
    // Everything accepted so far: the head of the stream as this process knows it.
    caughtUp: () => consumer.waitFor(consumer.position + consumer.backlog, CAUGHT_UP_MS),
    catalog,
  })
  // Before the feeds start: the journal samples the snapshots they publish, those built at start too.
  journal.start(feeds)
  // Every snapshot served is a version feed deltas can start from (docs/deltas.md).
  const deltaHistory = new DeltaHistory({ versions: config.deltaHistory, maxAgeMs: config.deltaMaxAgeMs })
  const deltaRenders = metrics.counter('threatfeed_feed_delta_renders_total', 'Delta bodies rendered: in the pool per build (one and two versions behind), or while a request waited', ['where'])
  const renderedInPool = deltaRenders.labels('pool')
  const renderedForRequest = deltaRenders.labels('request')
  // Networks whose lapse moved later, for the bouncers' durations (docs/bouncers.md).
  const bouncerRetimes = new BouncerRetimes()
  feeds.onSwap((workspaceId, feedId, snapshot) => {
    const now = Date.now()
    deltaHistory.record(workspaceId, feedId, snapshot, now)
    bouncerRetimes.record(workspaceId, feedId, snapshot)
    if (snapshot === null) return
    prerenderDeltas(snapshot, deltaHistory, (task) => pool.renderDeltas(task), now).then((n) => { renderedInPool.inc(n) }, (e: unknown) => {
      log.warn({ err: e, workspaceId, feedId }, 'deltas not rendered ahead; requests render them')
    })
  })
  await feeds.start()
  const geoWatcher = watchGeo(paths, (next) => {
    geo = next
    feeds.setGeo(next)
    explainGeoOf(paths, next)
    log.info({ countries: next.countries().length, asns: next.asns().length }, 'geo databases reloaded')
  }, (err) => { log.error({ err, code: err.code }, `${err.message}; keeping the previous geo databases`) })
  // Explain's point reader (~70 ms to open the default databases) opens now, not on a request.
  explainGeoOf(paths, geo)
  const lists = new ListDirectory(catalog, { pollMs: config.pollMs })
  await lists.start()

  // Ready (DECISIONS §6, as README "Decisions beyond the spec" words it): the store answers, the
  // geo databases and the key and list catalog are loaded (all awaited above, before listening),
  // and the feeds served in the hour before this start are built; other feeds build on demand;
  // and the stream consumer is neither wedged nor far behind (consumer-health.ts).
  const readiness = async (): Promise<Readiness> => {
    const checks: Record<string, boolean | string> = {
      geo: true,
      lists: lists.loaded || 'list catalog not loaded yet',
      feeds: feeds.ready() || 'feeds served in the hour before the start not built yet',
      consumer: consumerReadiness(consumer.health(), Date.now()),
    }
    try {
      await store.ping()
      checks.store = true
    } catch (e) {
      checks.store = (e as Error).message
    }
    checks.signals = appendHealth.readiness(store.streamFreeBytes?.() ?? null, 2 * config.maxBodyBytes)
    return { ready: Object.values(checks).every((v) => v === true), checks }
  }

  const ctx: HttpContext = {
    config,
    store,
    auth,
    metrics,
    log,
    rateLimiter: new RateLimiter(config.rateLimitPerSecond, config.rateLimitBurst),
    readiness,
  }
  const tracker = config.consumerTracking ? new ConsumerTracker({ store, log, staleMs: config.consumerStaleMs, perKey: config.consumersPerKey }) : null
  if (tracker !== null) registerFeedConsumerMetrics(metrics, tracker)
  tracker?.start()
  const explain = { feeds, lists, geo: () => explainGeoOf(paths, geo), heldBy: (workspaceId: string, feedId: string) => feeds.holdOf(workspaceId, feedId) }
  let lostThread: (e: Error) => void = () => {}
  const threadLost = new Promise<Error>((resolve) => { lostThread = resolve })
  const http = await startHttpServer(ctx, [
    adminRoutes({ journal, explain }),
    signalRoutes({ ingester, consumer }),
    feedRoutes({ feeds, lists, consumers: tracker === null ? undefined : { tracker, addresses: new ClientAddresses(config.trustedProxies) }, deltas: { history: deltaHistory, rendered: () => { renderedForRequest.inc() } } }),
    bouncerRoutes({ feeds, history: deltaHistory, retimes: bouncerRetimes, maxDurationMs: config.bouncerMaxDurationMs, perKey: config.consumersPerKey, consumers: tracker === null ? undefined : { tracker, addresses: new ClientAddresses(config.trustedProxies) } }),
    explainRoutes(explain),
    openapiRoutes(buildOpenApiDocument()),
  ], { threads: { feeds, catalog, tracker }, onThreadLost: (e) => { lostThread(e) } })

  let stopping: Promise<void> | null = null
  return {
    port: http.port,
    tlsPort: http.tlsPort,
    reloadTls: (reason) => http.reloadTls(reason),
    config,
    store,
    adminJournal: journal,
    sweeper: sweeper.sweeper ?? null,
    threadLost,
    backgroundNice: nice,
    frontThreadIds: http.frontThreadIds,
    stop () {
      // Order: stop taking requests and let in-flight ones finish (their writes are awaited),
      // then the background work, then the store, which flushes on close.
      stopping ??= (async () => {
        await http.close(config.shutdownMs)
        await tracker?.stop()
        await journal.stop()
        clockSkew?.stop()
        await housekeeper?.stop()
        geoWatcher.close()
        catalog.stop()
        await feeds.stop()
        await consumer.stop()
        await pool.destroy()
        await store.close()
      })()
      return stopping
    },
  }
}

/**
 * `threatfeed serve`: start, then wait for SIGTERM/SIGINT (DECISIONS §6: stop accepting, finish
 * in-flight requests, flush, exit 0 within 10 s). Resolves with the exit code.
 */
export async function runServer (env: NodeJS.ProcessEnv): Promise<number> {
  let config: Config
  try {
    config = loadConfig(env)
  } catch (e) {
    process.stderr.write(`threatfeed: ${(e as Error).message}\n`)
    return 1
  }
  const log = createLogger(config.logLevel)
  // A stop asked for while starting (the listener is up before the front-end threads are) is
  // kept, and done once the start is over: without a handler the signal would end the process.
  let early: string | null = null
  const onEarly = (signal: string): void => { early ??= signal }
  process.on('SIGTERM', onEarly)
  process.on('SIGINT', onEarly)
  let server: RunningServer
  try {
    server = await startServer(config, log)
  } catch (e) {
    log.fatal({ err: e, code: isThreatfeedError(e) ? e.code : undefined }, `cannot start: ${(e as Error).message}`)
    // The cause too, as the CLI says it: "rule store unavailable" alone does not say where or why.
    const cause = isThreatfeedError(e) && e.cause instanceof Error ? ` (${e.cause.message})` : ''
    process.stderr.write(`threatfeed: cannot start: ${(e as Error).message}${cause}\n`)
    return 1
  } finally {
    process.off('SIGTERM', onEarly)
    process.off('SIGINT', onEarly)
  }
  // With front-end threads no other thread answers a poll: the main thread (reloads, rebuild
  // slices) and the threads the runtime started before us (V8's GC and compile helpers, libuv's
  // pool: thread-priority.ts) go behind those that do. Only now, once they exist: a thread starts
  // with its creator's nice value. In `serve` only, since a process that started the server in
  // its own thread (tests) is not the server's.
  if (server.frontThreadIds.length > 0 && server.backgroundNice !== null) {
    const lowered = niceAllThreadsBut(server.backgroundNice, new Set(server.frontThreadIds))
    log.info({ nice: server.backgroundNice, lowered, kept: server.frontThreadIds }, 'background threads niced')
  }
  // SIGHUP re-reads the TLS files (README "HTTPS"); without TLS it keeps Node's default (exit).
  const onHangUp = (): void => { void server.reloadTls('SIGHUP') }
  if (config.tls !== null) process.on('SIGHUP', onHangUp)
  return new Promise<number>((resolve) => {
    let stopping = false
    const onSignal = (signal: string, code = 0): void => {
      if (stopping) return
      stopping = true
      process.off('SIGHUP', onHangUp)
      log.info({ signal }, 'shutting down')
      const hard = setTimeout(() => { log.error('shutdown took too long; exiting'); resolve(1) }, config.shutdownMs + 1500)
      hard.unref()
      server.stop().then(
        () => { clearTimeout(hard); log.info('stopped'); log.flush?.(); resolve(code) },
        (e: unknown) => { clearTimeout(hard); log.error({ err: e }, 'shutdown failed'); resolve(1) },
      )
    }
    // Kept for the whole stop: a second SIGTERM while stopping (a supervisor, an impatient script)
    // must not end the process half way with the default action. Not onSignal itself: Node passes
    // the signal's number as a second argument, which would become the exit code.
    process.on('SIGTERM', (signal) => { onSignal(signal) })
    process.on('SIGINT', (signal) => { onSignal(signal) })
    if (early !== null) onSignal(early)
    else {
      // A dead front-end thread: a clean stop, and exit code 1 for the supervisor to restart us.
      void server.threadLost.then(() => { onSignal('front-end thread lost', 1) })
    }
  })
}
