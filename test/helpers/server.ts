/**
 * A full HTTP server for tests: port 0, a temporary LMDB store, a workspace and keys of every
 * kind, the signal and OpenAPI routes, the stream consumer, plus whatever route modules a test
 * adds (the feed tests add theirs). Everything is closed and the directory removed by `close()`.
 * Also: `post` (a signal request with a parsed answer) and `eventually` (poll until true).
 *
 * @example
 *   const srv = await startTestServer()
 *   t.teardown(() => srv.close())
 *   await fetch(`${srv.url}/v1/signal`, { method: 'POST', headers: srv.auth('all'), body })
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadConfig, type Config } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { loadGeoIndex } from '../../src/geo/load.js'
import { startHttpServer, type HttpContext, type HttpServer, type RouteModule } from '../../src/http/app.js'
import { Authenticator } from '../../src/http/auth.js'
import { Metrics } from '../../src/http/metrics.js'
import { RateLimiter } from '../../src/http/rate-limit.js'
import { signalRoutes, type SignalRouteDeps } from '../../src/http/signal-routes.js'
import { openapiRoutes } from '../../src/http/openapi-routes.js'
import { SignalIngester } from '../../src/ingest/batch.js'
import { buildOpenApiDocument } from '../../src/ingest/openapi.js'
import { StreamConsumer, type Consumer } from '../../src/stream/consumer.js'
import { ThreadedConsumer } from '../../src/stream/consumer-thread.js'
import { openStore } from '../../src/store/open.js'
import type { BatchingStore } from '../../src/store/batch-types.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import type { Scope, Workspace } from '../../src/store/types.js'
import { StoreCatalog } from '../../src/feed/catalog.js'
import type { SnapshotSource } from '../../src/feed/snapshot-port.js'
import { threadsFromEnv } from './feed-server.js'

/** MaxMind's test databases, copied into the repo (MIT; see the LICENSE-MIT beside them). */
export const GEO_FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'geo', 'maxmind')
export const ASN_TEST_DB = join(GEO_FIXTURES, 'GeoLite2-ASN-Test.mmdb')
export const COUNTRY_TEST_DB = join(GEO_FIXTURES, 'GeoLite2-Country-Test.mmdb')

/** Keys by what they may do: see `provision`. */
export type KeyName = 'all' | 'write' | 'read' | 'inactive' | 'revoked' | 'other'

export interface TestServerOptions {
  /** Environment for loadConfig (HOST, PORT and the data dir are set unless given). */
  readonly env?: Record<string, string>
  /** Reuse a data directory (a restart); it is then not removed on close. */
  readonly dataDir?: string
  /** Create the workspaces and keys (default true; false on a restart over provisioned data). */
  readonly provision?: boolean
  /** ASN existence; default: the MaxMind ASN test database. */
  readonly asnExists?: (asn: number) => boolean
  /** Extra route modules, built once the store and consumer exist. */
  readonly modules?: (deps: { store: BatchingStore, consumer: Consumer, config: Config }) => RouteModule[]
  /** Run the stream consumer (default true). */
  readonly consumer?: boolean
  /** Run it on a thread of its own, as the server does for the embedded store (default false: in this thread). */
  readonly consumerThread?: boolean
  /** Backlog above which signals wait for room, then get 429 (signal-routes default otherwise). */
  readonly maxBacklog?: number
  /** How long a signal batch waits for room in the backlog (signal-routes default otherwise). */
  readonly admissionWaitMs?: number
  /** What the signal routes see of the consumer, in place of the server's own (admission tests). */
  readonly admissionConsumer?: SignalRouteDeps['consumer']
  /**
   * The feed service a module built (feed-module.ts): with THREATFEED_HTTP_THREADS > 1 in the
   * test's environment, front-end threads then answer its feeds too, as in the server.
   */
  readonly threadFeeds?: () => SnapshotSource
  /**
   * With THREATFEED_HTTP_THREADS > 1 in the test's environment, start the front-end threads even
   * without `threadFeeds` (they then answer no feed): the signal tests, whose requests the
   * threads hand over to the main thread (src/http/handover.ts). Not the default: through a
   * thread, a request pipelined behind one answered later is dropped (methods.test.ts).
   */
  readonly frontThreads?: boolean
}

export interface TestServer {
  readonly url: string
  readonly port: number
  readonly config: Config
  readonly dataDir: string
  readonly store: BatchingStore
  readonly ctx: HttpContext
  readonly consumer: Consumer
  readonly ingester: SignalIngester
  readonly http: HttpServer
  /** The main workspace (active) and another one, for isolation tests. */
  readonly workspace: Workspace
  readonly otherWorkspace: Workspace
  readonly keys: Readonly<Record<KeyName, string>>
  /** `{ Authorization: 'Bearer <key>', 'Content-Type': 'application/json' }` for a key. */
  auth (key: KeyName): Record<string, string>
  close (): Promise<void>
}

/** The feeds of a test server without feed routes: none (the threads' feed routes answer 404). */
const NO_FEEDS: SnapshotSource = {
  getSnapshot: () => null,
  awaitSnapshot: () => Promise.reject(new Error('this test server serves no feeds')),
  onSwap: () => () => {},
}

let asnIndex: Promise<(asn: number) => boolean> | null = null
function fixtureAsnExists (): Promise<(asn: number) => boolean> {
  asnIndex ??= loadGeoIndex({ asnDb: ASN_TEST_DB }).then((g) => (asn: number) => g.hasAsn(asn))
  return asnIndex
}

async function createKey (store: BatchingStore, workspaceId: string, scopes: Scope[]): Promise<{ key: string, id: string }> {
  const key = generateApiKey()
  const stored = await store.keys.create({ workspaceId, hash: hashApiKey(key), scopes })
  return { key, id: stored.id }
}

/**
 * Workspaces `main` (active) and `other` (active), an inactive one, and keys:
 * all (both scopes), write (signals:write), read (feeds:read), inactive (both scopes, inactive
 * workspace), revoked (both scopes, revoked), other (both scopes, the other workspace).
 */
export async function provision (store: BatchingStore): Promise<{ workspace: Workspace, otherWorkspace: Workspace, keys: Record<KeyName, string> }> {
  const both: Scope[] = ['signals:write', 'feeds:read']
  const workspace = await store.workspaces.create({ name: 'main', subscription: 'active' })
  const otherWorkspace = await store.workspaces.create({ name: 'other', subscription: 'active' })
  const inactive = await store.workspaces.create({ name: 'unpaid', subscription: 'inactive' })
  const revoked = await createKey(store, workspace.id, both)
  await store.keys.revoke(revoked.id)
  const keys: Record<KeyName, string> = {
    all: (await createKey(store, workspace.id, both)).key,
    write: (await createKey(store, workspace.id, ['signals:write'])).key,
    read: (await createKey(store, workspace.id, ['feeds:read'])).key,
    inactive: (await createKey(store, inactive.id, both)).key,
    revoked: revoked.key,
    other: (await createKey(store, otherWorkspace.id, both)).key,
  }
  return { workspace, otherWorkspace, keys }
}

export async function startTestServer (options: TestServerOptions = {}): Promise<TestServer> {
  const ownDir = options.dataDir === undefined
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'tf-srv-'))
  const config = loadConfig({
    HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: dataDir, THREATFEED_LOG_LEVEL: 'silent', THREATFEED_POLL_MS: '50', THREATFEED_HTTP_THREADS: String(threadsFromEnv()), ...options.env,
  })
  const log = createLogger(config.logLevel)
  const store = await openStore({ kind: 'embedded', dataDir })
  const provisioned = options.provision === false ? null : await provision(store)
  const asnExists = options.asnExists ?? await fixtureAsnExists()

  const consumer: Consumer = options.consumerThread === true
    ? new ThreadedConsumer({ handoff: store.consumerThread!, pollMs: config.pollMs, logLevel: config.logLevel, log })
    : new StreamConsumer(store, { pollMs: config.pollMs, log })
  const ingester = new SignalIngester({
    stream: store.stream,
    checks: { asnExists, checkExpressions: true },
    onAppended: (batch) => { consumer.offer(batch) },
  })
  const threaded = threadsFromEnv() > 1 && (options.threadFeeds !== undefined || options.frontThreads === true)
  const catalog = threaded ? new StoreCatalog(store, { pollMs: config.pollMs }) : null
  if (catalog !== null) await catalog.start()
  const auth = new Authenticator(catalog ?? store, { pollMs: config.pollMs })
  await auth.start()
  if (options.consumer !== false) await consumer.start()
  const ctx: HttpContext = {
    config,
    store,
    auth,
    metrics: new Metrics(),
    log,
    rateLimiter: new RateLimiter(config.rateLimitPerSecond, config.rateLimitBurst),
    readiness: async () => ({ ready: true, checks: {} }),
  }
  const admission = {
    consumer: options.admissionConsumer ?? consumer,
    ...(options.maxBacklog === undefined ? {} : { maxBacklog: options.maxBacklog }),
    ...(options.admissionWaitMs === undefined ? {} : { admissionWaitMs: options.admissionWaitMs }),
  }
  const modules = [signalRoutes({ ingester, ...admission }), openapiRoutes(buildOpenApiDocument()), ...(options.modules?.({ store, consumer, config }) ?? [])]
  const http = await startHttpServer(ctx, modules, threaded ? { threads: { feeds: options.threadFeeds?.() ?? NO_FEEDS, catalog: catalog!, tracker: null } } : {})
  const keys = provisioned?.keys ?? ({} as Record<KeyName, string>)
  let closed: Promise<void> | null = null
  return {
    url: `http://127.0.0.1:${http.port}`,
    port: http.port,
    config,
    dataDir,
    store,
    ctx,
    consumer,
    ingester,
    http,
    workspace: provisioned?.workspace ?? ({} as Workspace),
    otherWorkspace: provisioned?.otherWorkspace ?? ({} as Workspace),
    keys,
    auth: (key) => ({ Authorization: `Bearer ${keys[key]}`, 'Content-Type': 'application/json' }),
    close () {
      closed ??= (async () => {
        await http.close(1000)
        await consumer.stop()
        auth.stop()
        catalog?.stop()
        await store.close()
        if (ownDir) rmSync(dataDir, { recursive: true, force: true })
      })()
      return closed
    },
  }
}

// ---------------------------------------------------------------- request helpers for tests

export interface Answer {
  status: number
  headers: Headers
  body: unknown
}

export async function post (srv: TestServer, api: 'v1' | 'v2', body: string | Buffer | unknown[], key: KeyName | null = 'all', headers: Record<string, string> = {}): Promise<Answer> {
  const h: Record<string, string> = key === null ? { 'Content-Type': 'application/json' } : srv.auth(key)
  const payload = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body)
  const res = await fetch(`${srv.url}/${api}/signal`, { method: 'POST', headers: { ...h, ...headers }, body: payload })
  const text = await res.text()
  let parsed: unknown = text
  try {
    parsed = JSON.parse(text)
  } catch { /* not JSON: keep the text */ }
  return { status: res.status, headers: res.headers, body: parsed }
}

/**
 * A signal answer's body without its `batch` receipt when the receipt is well formed (a UUID id,
 * first_seq ≤ last_seq, both positive integers), for tests of the rest of the body; a malformed
 * receipt is left in, so that an exact comparison still fails on it.
 */
export function withoutReceipt (body: unknown): unknown {
  if (typeof body !== 'object' || body === null || !('batch' in body)) return body
  const { batch, ...rest } = body as { batch: { id?: unknown, first_seq?: unknown, last_seq?: unknown } }
  const ok = typeof batch === 'object' && batch !== null && Object.keys(batch).length === 3 &&
    typeof batch.id === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(batch.id) &&
    Number.isSafeInteger(batch.first_seq) && Number.isSafeInteger(batch.last_seq) &&
    (batch.first_seq as number) >= 1 && (batch.first_seq as number) <= (batch.last_seq as number)
  return ok ? rest : body
}

/** Polls until `check` is true or `ms` elapse; returns the time it took, or -1. */
export async function eventually (check: () => Promise<boolean>, ms = 1000): Promise<number> {
  const start = Date.now()
  while (Date.now() - start <= ms) {
    if (await check()) return Date.now() - start
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  return -1
}

export const block = (extra: Record<string, unknown>) => ({ type: 'access_rules', action: 'block', ...extra })
export const unblock = (extra: Record<string, unknown>) => ({ type: 'access_rules', action: 'unblock', ...extra })
