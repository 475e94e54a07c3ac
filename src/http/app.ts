/**
 * The uWebSockets.js application: route registration with metrics, in-flight tracking and the
 * last-resort error mapping; health, readiness and metrics endpoints; the 404 fallback; listen and
 * graceful close (DECISIONS §6: stop accepting, finish in-flight requests, then resolve).
 *
 * Route modules (signal-routes.ts, feed-routes.ts, openapi-routes.ts) receive a `Router` and the
 * shared `HttpContext`; they never create the App themselves.
 */
import type { HttpRequest, HttpResponse } from 'uWebSockets.js'
import type { Config } from '../config.js'
import type { Logger } from '../log.js'
import type { Store } from '../store/types.js'
import type { Authenticator } from './auth.js'
import type { Metrics, ThreadMetrics } from './metrics.js'
import { RateLimiter } from './rate-limit.js'
import { beginExchange, errorAnswer, sendError, sendBody, sendJson, watchAbort, type ErrorShape, type Exchange, type JsonAnswer } from './respond.js'
import { ThreatfeedError } from '../errors.js'
import { Listeners } from './tls-listeners.js'
import { turnMonotonic } from './turn-clock.js'
import { consoleRoutes } from './console-routes.js'
import { checkListenAddresses } from './listen-check.js'
import { FrontEndThreads, sharedPorts, threadToken, type ThreadSources } from './front-threads.js'
import { handedOverRequest, portableRequest, type HandOverClient, type HandOverRequest, type HandOverRoute, type PortableHandler } from './handover.js'
import { isRawTarget, rawTargetError } from './request-target.js'

export interface Readiness {
  ready: boolean
  checks: Record<string, boolean | string>
}

export interface HttpContext {
  readonly config: Config
  readonly store: Store
  readonly auth: Authenticator
  readonly metrics: Metrics
  readonly log: Logger
  readonly rateLimiter: RateLimiter
  /** What /readyz reports: store reachable, geo and catalog loaded, recently served feeds built. */
  readonly readiness: () => Promise<Readiness>
}

export type Method = 'get' | 'post' | 'head' | 'put' | 'del' | 'patch' | 'options' | 'any'

/** A handler gets the exchange (aborted flag, status) and the request; it may be sync or async. */
export type Handler = (ex: Exchange, req: HttpRequest) => void | Promise<void>

export interface RouteOptions {
  /**
   * The handler refuses a target that is not ASCII itself (request-target.ts), after the checks
   * that must come first (the admin API's login limiter); otherwise the router answers it 400
   * before the handler runs.
   */
  readonly checksTarget?: boolean
}

export interface Router {
  /**
   * Registers a handler. `route` is the metrics label; `shape` picks the error body for anything
   * the handler throws (or rejects with). A request whose target is not ASCII is answered 400
   * in that shape (see RouteOptions).
   */
  on (method: Method, pattern: string, route: string, shape: ErrorShape, handler: Handler, options?: RouteOptions): void
  /**
   * Every other method on `pattern` answers 405 with `Allow`, HEAD included when `allow` does not
   * name it (uWS routes HEAD apart from other methods). A GET route without a HEAD route of its
   * own answers HEAD through its GET handler, the body left out (RFC 9110 §9.3.2).
   */
  onlyAllow (pattern: string, route: string, shape: ErrorShape, allow: string): void
  /**
   * A POST route that front-end threads hand over to this thread through their ports rather than
   * forward (handover.ts): `handler` answers it from this thread's sockets and from the ports
   * alike, with the same metrics, error mapping and drain. `headers`: those it reads.
   */
  portable (pattern: string, route: string, shape: ErrorShape, headers: readonly string[], handler: PortableHandler): void
}

export interface RouteModule {
  (router: Router, ctx: HttpContext): void
}

export interface HttpServer {
  /** The plain listener's port, or the TLS listener's when the plain one is off (`PORT=off`). */
  readonly port: number
  readonly tlsPort: number | null
  /** Reads the TLS certificate and key again (SIGHUP); true when the certificate changed. */
  reloadTls (reason: string): Promise<boolean>
  /** Stops accepting, waits for in-flight requests up to `graceMs`, then closes every connection. */
  close (graceMs: number): Promise<void>
  inflight (): number
  /** What each front-end thread other than this one counted (empty with one thread): which thread answered what. */
  threadMetrics (): Promise<ThreadMetrics[]>
  /** The OS ids of the front-end threads (pool/thread-priority.ts `threadId`); empty without them. */
  readonly frontThreadIds: readonly number[]
}

export interface HttpServerOptions {
  /**
   * What front-end threads replicate (front-threads.ts): with it and THREATFEED_HTTP_THREADS > 1,
   * that many threads in all answer on the same ports.
   */
  readonly threads?: ThreadSources
  /**
   * On a front-end thread: the handler of every request its modules do not route (forward.ts);
   * health, readiness and metrics are the main thread's then, and the certificate gauge too.
   */
  readonly forward?: Handler
  /** A front-end thread exited after the start (front-threads.ts): the owner stops the process. */
  readonly onThreadLost?: (error: Error) => void
  /**
   * On a front-end thread, with `forward`: the routes it hands over to the main thread through
   * its port (handover.ts) instead of forwarding them.
   */
  readonly handOver?: { readonly routes: readonly HandOverRoute[], readonly client: HandOverClient }
}

/** GET /: the service's own pages, and where its documentation is. */
const ROOT_ANSWER = Object.freeze({
  service: 'threatfeed',
  console: '/console',
  openapi: '/openapi.json',
  health: '/healthz',
  readiness: '/readyz',
  metrics: '/metrics',
  docs: 'README.md and docs/ of the threatfeed repository: signals, feeds, the admin API (docs/admin-api.md), configuration',
})

export async function startHttpServer (ctx: HttpContext, modules: RouteModule[], options: HttpServerOptions = {}): Promise<HttpServer> {
  const threaded = options.threads !== undefined && ctx.config.httpThreads > 1 && options.forward === undefined
  // The front-end threads share the ports the main thread checked; nobody else may hold them.
  if (options.forward === undefined) await checkListenAddresses(ctx.config)
  const config = threaded ? await sharedPorts(ctx.config) : ctx.config
  const token = threaded ? threadToken() : null
  const listeners = await Listeners.open(config, ctx.log, options.forward === undefined ? ctx.metrics : null, token)
  if (threaded) listeners.leavePublicPortsToThreads()
  let threads: FrontEndThreads | null = null
  let inflight = 0
  let drained: (() => void) | null = null
  const report = (e: ThreatfeedError): void => { ctx.log.error({ err: e, cause: e.cause, code: e.code }, e.message) }

  const finish = (ex: Exchange, observe: (status: number, start: number) => void, start: number): void => {
    observe(ex.aborted ? 499 : ex.status, start)
    inflight--
    if (inflight === 0 && drained !== null) drained()
  }

  const getRoutes = new Map<string, { route: string, shape: ErrorShape, handler: Handler, options: RouteOptions | undefined }>()
  const portables = new Map<string, { readonly route: HandOverRoute, readonly shape: ErrorShape, readonly handler: PortableHandler, readonly observe: (status: number, start: number) => void }>()
  const headPatterns = new Set<string>()
  const router: Router = {
    on (method, pattern, route, shape, handler, options) {
      if (method === 'get') getRoutes.set(pattern, { route, shape, handler, options })
      const checksTarget = options?.checksTarget === true
      if (method === 'head') headPatterns.add(pattern)
      const observe = ctx.metrics.route(route)
      listeners.route(method, pattern, (res: HttpResponse, req: HttpRequest, gate) => {
        // The turn's arrival time, shared by the requests of one turn (turn-clock.ts); the end is
        // each request's own reading (Metrics).
        const start = turnMonotonic()
        const ex = beginExchange(res, method === 'head' || (method === 'any' && req.getMethod() === 'head'))
        inflight++
        let result: void | Promise<void> = undefined
        try {
          gate?.(res)
          if (!checksTarget && isRawTarget(req)) throw rawTargetError()
          result = handler(ex, req)
        } catch (e) {
          sendError(ex, e, shape, report)
        }
        watchAbort(ex)
        // `undefined` first: a 304 answered at once skips the instanceof (a slow builtin here).
        if (result !== undefined && result instanceof Promise) {
          result.then(
            () => { finish(ex, observe, start) },
            (e: unknown) => { sendError(ex, e, shape, report); finish(ex, observe, start) },
          )
        } else {
          finish(ex, observe, start)
        }
      })
    },
    onlyAllow (pattern, route, shape, allow) {
      const refuse: Handler = (ex) => {
        sendError(ex, new ThreatfeedError('TF_ERR_METHOD_NOT_ALLOWED', [allow]), shape, report, [['Allow', allow]])
      }
      router.on('any', pattern, route, shape, refuse)
      if (!allow.split(', ').includes('HEAD')) router.on('head', pattern, route, shape, refuse)
    },
    portable (pattern, route, shape, headers, handler) {
      const maxBodyBytes = ctx.config.maxBodyBytes
      router.on('post', pattern, route, shape, async (ex, req) => {
        const answer = await handler(portableRequest(ex, req, headers, maxBodyBytes))
        if (answer !== null) sendJson(ex, answer.status, answer.body, answer.headers)
      })
      portables.set(pattern, { route: { pattern, headers }, shape, handler, observe: ctx.metrics.route(route) })
    },
  }

  /**
   * A request a front-end thread handed over, answered as router.on answers one of this thread's
   * sockets: counted in flight (close waits for it), observed, a throw mapped by sendError's rules.
   * Never rejects (handover.ts serveHandOvers).
   */
  const answerHandedOver = async (m: HandOverRequest): Promise<JsonAnswer> => {
    const portable = portables.get(m.pattern)
    if (portable === undefined) return errorAnswer(new ThreatfeedError('TF_ERR_NOT_FOUND'), 'signal', report)
    const start = performance.now()
    inflight++
    let answer: JsonAnswer
    try {
      // Null only when the client went away, which a handed-over request's thread watches instead.
      answer = await portable.handler(handedOverRequest(m, ctx.config.maxBodyBytes)) ?? errorAnswer(new Error('a handed-over request was left unanswered'), portable.shape, report)
    } catch (e) {
      answer = errorAnswer(e, portable.shape, report)
    }
    portable.observe(answer.status, start)
    inflight--
    if (inflight === 0 && drained !== null) drained()
    return answer
  }

  if (options.forward !== undefined) {
    // A front-end thread: its modules' routes, and everything else to the main thread, which
    // counts it (so it is not counted here as well).
    const forward = options.forward
    for (const m of modules) m(router, ctx)
    for (const [pattern, get] of getRoutes) {
      if (!headPatterns.has(pattern)) router.on('head', pattern, get.route, get.shape, get.handler, get.options)
    }
    const passOn = (method: Method, pattern: string, handler: Handler): void => {
      listeners.route(method, pattern, (res, req, gate) => {
        const ex = beginExchange(res, req.getMethod() === 'head')
        inflight++
        const done = (): void => {
          inflight--
          if (inflight === 0 && drained !== null) drained()
        }
        let pending: void | Promise<void> = undefined
        try {
          gate?.(res)
          pending = handler(ex, req)
        } catch (e) {
          sendError(ex, e, 'signal', report)
        }
        watchAbort(ex)
        if (pending === undefined) done()
        else pending.then(done, (e: unknown) => { sendError(ex, e, 'signal', report); done() })
      })
    }
    // The other methods on a handed-over pattern (405) go the forwarded way with the rest. A
    // target that is not ASCII is refused here: the hand-over carries no target to check.
    for (const route of options.handOver?.routes ?? []) {
      const handOver = options.handOver!.client.handler(route)
      passOn('post', route.pattern, (ex, req) => {
        if (isRawTarget(req)) throw rawTargetError()
        return handOver(ex, req)
      })
    }
    for (const method of ['any', 'head'] as const) passOn(method, '/*', forward)
    const { port, tlsPort } = await listeners.listen()
    return {
      port: port ?? tlsPort!,
      tlsPort,
      reloadTls: (reason) => listeners.reloadTls(reason),
      inflight: () => inflight,
      threadMetrics: async () => [],
      frontThreadIds: [],
      close: (graceMs) => drain(graceMs),
    }
  }

  router.on('get', '/healthz', 'healthz', 'signal', (ex) => { sendJson(ex, 200, { status: 'ok' }) })
  router.on('get', '/readyz', 'readyz', 'signal', async (ex, req) => {
    const part = readinessPart(req.getQuery('for'))
    const r = await ctx.readiness()
    const can = { signals: partReady(r, 'signals'), feeds: partReady(r, 'feeds') }
    const ready = part === null ? r.ready : can[part]
    sendJson(ex, ready ? 200 : 503, { status: ready ? 'ready' : 'not ready', can, checks: r.checks })
  })
  const authCacheName = 'threatfeed_auth_cache_bytes'
  const authCache = ctx.metrics.registry.getSingleMetric(authCacheName) as ReturnType<typeof ctx.metrics.gauge> | undefined ??
    ctx.metrics.gauge(authCacheName, 'Bytes held by the cache of authenticated API keys (at most 4 MiB)')
  router.on('get', '/metrics', 'metrics', 'signal', async (ex) => {
    authCache.set(ctx.auth.cacheBytes)
    const m = await ctx.metrics.render(threads === null ? [] : await threads.metrics())
    sendBody(ex, 200, m.body, m.contentType)
  })
  for (const p of ['healthz', 'readyz', 'metrics']) router.onlyAllow(`/${p}`, p, 'signal', 'GET, HEAD')
  // Where an operator who opens the server's address lands: what there is to read (issue 36).
  router.on('get', '/', 'root', 'signal', (ex) => { sendJson(ex, 200, ROOT_ANSWER) })
  router.onlyAllow('/', 'root', 'signal', 'GET, HEAD')
  // The operator console (/console) is part of every server, beside the modules main composes.
  for (const m of [...modules, consoleRoutes()]) m(router, ctx)
  for (const [pattern, get] of getRoutes) {
    if (!headPatterns.has(pattern)) router.on('head', pattern, get.route, get.shape, get.handler, get.options)
  }
  // An unknown path, any method: 404 (to HEAD without the body, keeping the connection usable).
  router.on('any', '/*', 'unknown', 'signal', (ex) => { sendError(ex, new ThreatfeedError('TF_ERR_NOT_FOUND'), 'signal', report) })
  router.on('head', '/*', 'unknown', 'signal', (ex) => { sendError(ex, new ThreatfeedError('TF_ERR_NOT_FOUND'), 'signal', report) })

  const { port, tlsPort } = await listeners.listen()
  if (threaded) {
    try {
      threads = await FrontEndThreads.start({
        count: ctx.config.httpThreads,
        config: Object.freeze({ ...config, port, tls: config.tls === null ? null : { ...config.tls, port: tlsPort! } }),
        internalPort: listeners.internalPort!,
        token: token!,
        handOver: { routes: [...portables.values()].map((p) => p.route), answer: answerHandedOver },
        sources: options.threads!,
        log: ctx.log,
        metrics: ctx.metrics,
        onLost: options.onThreadLost ?? (() => {}),
      })
    } catch (e) {
      listeners.close()
      throw e
    }
    ctx.log.info({ threads: threads.size }, 'front-end threads listening')
    listeners.announce(port, tlsPort)
  }

  return {
    port: port ?? tlsPort!,
    tlsPort,
    async reloadTls (reason) {
      const [own, others] = await Promise.all([listeners.reloadTls(reason), threads?.reloadTls(reason) ?? false])
      return own || others
    },
    inflight: () => inflight,
    threadMetrics: async () => threads === null ? [] : await threads.metrics(),
    frontThreadIds: threads?.tids ?? [],
    async close (graceMs) {
      // The threads drain first: what they forward is answered here, on the internal listener.
      listeners.stopListening()
      await threads?.close(graceMs)
      await drain(graceMs)
    },
  }

  async function drain (graceMs: number): Promise<void> {
    listeners.stopListening()
    if (inflight > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs)
        drained = () => { clearTimeout(timer); resolve() }
      })
    }
    listeners.close()
  }
}

/**
 * The checks each part of the node needs (docs/operating.md, "Readiness"): signals need the
 * store, a stream that takes appends and a consumer that applies them; feeds need the store, the
 * geo databases, the catalog and the feeds built. A check a node does not run counts as passed.
 */
const PART_CHECKS = {
  signals: ['store', 'signals', 'consumer'],
  feeds: ['store', 'geo', 'lists', 'feeds'],
} as const

type ReadinessPart = keyof typeof PART_CHECKS

function readinessPart (value: string | undefined): ReadinessPart | null {
  if (value === undefined || value === '') return null
  if (value === 'signals' || value === 'feeds') return value
  throw new ThreatfeedError('TF_ERR_VALIDATION', [], { details: [{ field: 'for', message: 'must be signals or feeds', value }] })
}

function partReady (r: Readiness, part: ReadinessPart): boolean {
  return PART_CHECKS[part].every((name) => r.checks[name] === undefined || r.checks[name] === true)
}

export { RateLimiter }
