/**
 * Composition root: config → store → geo → pool → snapshot → http. It wires and decides nothing.
 */
import { loadConfig, type Config } from './config.js'
import { createLogger, type Logger } from './log.js'
import { openStore } from './store/open.js'
import type { Store } from './store/types.js'
import { Authenticator } from './http/auth.js'
import { Metrics } from './http/metrics.js'
import { RateLimiter } from './http/rate-limit.js'
import { startHttpServer, type HttpContext, type Readiness, type RouteModule } from './http/app.js'
import { isThreatfeedError } from './errors.js'

export interface RunningServer {
  readonly port: number
  readonly config: Config
  readonly store: Store
  /** Stops accepting, finishes in-flight requests, flushes and closes the store. */
  stop (): Promise<void>
}

/** Starts every component and the HTTP server; used by `threatfeed serve` and by tests. */
export async function startServer (config: Config, log: Logger): Promise<RunningServer> {
  const store = await openStore(config.store === 'mongodb'
    ? { kind: 'mongodb', uri: config.mongodbUri!, dbName: config.mongodbDb }
    : { kind: 'embedded', dataDir: config.dataDir })
  const metrics = new Metrics()
  const auth = new Authenticator(store, { pollMs: config.pollMs, onError: (e) => { log.warn({ err: e }, 'key reload failed; serving the previous keys') } })
  await auth.start()

  const readiness = async (): Promise<Readiness> => {
    const checks: Record<string, boolean | string> = {}
    try {
      await store.ping()
      checks.store = true
    } catch (e) {
      checks.store = (e as Error).message
    }
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
  const modules: RouteModule[] = []
  const http = await startHttpServer(ctx, modules)

  let stopping: Promise<void> | null = null
  return {
    port: http.port,
    config,
    store,
    stop () {
      stopping ??= (async () => {
        await http.close(config.shutdownMs)
        auth.stop()
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
  let server: RunningServer
  try {
    server = await startServer(config, log)
  } catch (e) {
    log.fatal({ err: e, code: isThreatfeedError(e) ? e.code : undefined }, `cannot start: ${(e as Error).message}`)
    return 1
  }
  return new Promise<number>((resolve) => {
    const onSignal = (signal: string): void => {
      log.info({ signal }, 'shutting down')
      const hard = setTimeout(() => { log.error('shutdown took too long; exiting'); resolve(1) }, config.shutdownMs + 1500)
      hard.unref()
      server.stop().then(
        () => { clearTimeout(hard); log.info('stopped'); log.flush?.(); resolve(0) },
        (e: unknown) => { clearTimeout(hard); log.error({ err: e }, 'shutdown failed'); resolve(1) },
      )
    }
    process.once('SIGTERM', onSignal)
    process.once('SIGINT', onSignal)
  })
}
