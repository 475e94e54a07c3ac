/**
 * A real uWS server with the feed routes, a temporary LMDB store, workspaces and keys, for the
 * HTTP tests of test/http/feed*.test.ts.
 *
 * The snapshots it serves come from a `FeedSource` the test chooses: `StaticFeedSource` (below)
 * holds snapshots built by `buildTestSnapshot`, whose bodies, tags, dates and caps the test sets
 * exactly (413, Last-Modified, cold builds); the end-to-end test passes the real FeedService.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHash } from 'node:crypto'
import { gzipSync } from 'node:zlib'
import { request } from 'node:http'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { Authenticator } from '../../src/http/auth.js'
import { Metrics } from '../../src/http/metrics.js'
import { RateLimiter, startHttpServer, type HttpContext, type HttpServer, type RouteModule } from '../../src/http/app.js'
import { feedRoutes, type FeedSource } from '../../src/http/feed-routes.js'
import { ListDirectory } from '../../src/http/list-resolve.js'
import { ClientAddresses } from '../../src/http/consumer-address.js'
import type { ConsumerTracker } from '../../src/http/consumers.js'
import { StoreCatalog, type CatalogStore } from '../../src/feed/catalog.js'
import type { SnapshotSource } from '../../src/feed/snapshot-port.js'
import { openEmbeddedStore, type EmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { CACHE_CONTROL, CONTENT_TYPES, VARY, variantKey, type FeedId, type FeedSnapshot, type Representation, type Variant } from '../../src/feed/snapshot-types.js'
import { FAMILIES, FEED_ACTIONS, FORMATS, type Scope, type Workspace } from '../../src/store/types.js'

/** Front-end threads the feed tests run with: THREATFEED_HTTP_THREADS of the test run, else 1. */
export function threadsFromEnv (): number {
  const n = Number(process.env.THREATFEED_HTTP_THREADS ?? '1')
  return Number.isInteger(n) && n >= 1 ? n : 1
}

function hasOnSwap (source: FeedSource): boolean {
  return typeof (source as Partial<SnapshotSource>).onSwap === 'function'
}

export interface FeedServer {
  readonly base: string
  /** The data directory of the store (for a CLI run against it). */
  readonly dir: string
  readonly port: number
  readonly store: EmbeddedStore
  readonly metrics: Metrics
  /** The HTTP server: its front-end threads' counts (threadMetrics), for the thread tests. */
  readonly http: HttpServer
  readonly lists: ListDirectory
  /** Active workspace with a `feeds:read` key (`key`), and keys for the other outcomes. */
  readonly workspace: Workspace
  readonly key: string
  readonly signalsOnlyKey: string
  readonly inactiveKey: string
  readonly revokedKey: string
  /** A second active workspace (with its own feeds:read key) for isolation tests. */
  readonly otherWorkspace: Workspace
  readonly otherKey: string
  stop (): Promise<void>
}

async function createKey (store: EmbeddedStore, workspaceId: string, scopes: Scope[]): Promise<{ key: string, id: string }> {
  const key = generateApiKey()
  const stored = await store.keys.create({ workspaceId, hash: hashApiKey(key), scopes })
  return { key, id: stored.id }
}

/**
 * Starts the server. `feeds` is built after the store exists (so a real FeedService can use it).
 *
 * @example
 *   const source = new StaticFeedSource()
 *   const s = await startFeedServer(() => source)
 *   t.teardown(() => s.stop())
 */
export interface FeedServerOptions {
  /** Route modules besides the feed routes. */
  extra?: RouteModule[]
  /** Environment for loadConfig. */
  env?: Record<string, string>
  /** Load the list directory before serving (default true); false leaves the first load to the first list request. */
  loadLists?: boolean
  /** What the list directory reads in place of the store (an outage), and its longest wait for a first load. */
  listSource?: (store: EmbeddedStore) => CatalogStore
  listAwaitMs?: number
  /** Consumer tracking (issue 20): what counts each answered poll, on every thread. */
  tracker?: Pick<ConsumerTracker, 'count' | 'absorb'>
  /** Front-end threads, in place of the test run's (threadsFromEnv): 1 for a test that watches the main thread's lookups. */
  threads?: number
}

export async function startFeedServer (feeds: (store: EmbeddedStore, ctx: Pick<HttpContext, 'config' | 'log' | 'metrics'>) => FeedSource | Promise<FeedSource>, options: FeedServerOptions = {}): Promise<FeedServer> {
  const { extra = [], env = {}, loadLists = true, listSource = (s) => s, listAwaitMs, tracker, threads = threadsFromEnv() } = options
  const dir = mkdtempSync(join(tmpdir(), 'tf-feed-http-'))
  const config = loadConfig({ HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: dir, THREATFEED_LOG_LEVEL: 'silent', THREATFEED_POLL_MS: '50', THREATFEED_HTTP_THREADS: String(threads), ...env })
  const store = await openEmbeddedStore(dir)
  const log = createLogger('silent')
  const workspace = await store.workspaces.create({ name: 'acme', subscription: 'active' })
  const otherWorkspace = await store.workspaces.create({ name: 'globex', subscription: 'active' })
  const inactive = await store.workspaces.create({ name: 'initech', subscription: 'inactive' })
  const read = await createKey(store, workspace.id, ['feeds:read'])
  const signalsOnly = await createKey(store, workspace.id, ['signals:write'])
  const inactiveKey = await createKey(store, inactive.id, ['feeds:read'])
  const revoked = await createKey(store, workspace.id, ['feeds:read'])
  await store.keys.revoke(revoked.id)
  const other = await createKey(store, otherWorkspace.id, ['feeds:read'])

  const metrics = new Metrics()
  // THREATFEED_HTTP_THREADS in the test's environment (the second run of `npm test`) starts the
  // front-end threads over one shared catalog, as the server does. A test that simulates a list
  // outage (listSource) or a first list load after the start (loadLists false) keeps one thread:
  // a thread starts only once the catalog is loaded, which is what those tests hold back.
  const feedSource = await feeds(store, { config, log, metrics })
  const threaded = threads > 1 && options.listSource === undefined && loadLists && hasOnSwap(feedSource)
  const catalog = threaded ? new StoreCatalog(store, { pollMs: config.pollMs }) : null
  if (catalog !== null) await catalog.start()
  const auth = new Authenticator(catalog ?? store, { pollMs: config.pollMs })
  await auth.start()
  const lists = new ListDirectory(catalog ?? listSource(store), { pollMs: config.pollMs, awaitMs: listAwaitMs })
  if (loadLists) await lists.start()
  const ctx: HttpContext = {
    config,
    store,
    auth,
    metrics,
    log,
    rateLimiter: new RateLimiter(config.rateLimitPerSecond, config.rateLimitBurst),
    readiness: async () => ({ ready: true, checks: {} }),
  }
  const consumers = tracker === undefined ? undefined : { tracker, addresses: new ClientAddresses(config.trustedProxies) }
  const http: HttpServer = await startHttpServer(ctx, [feedRoutes({ feeds: feedSource, lists, consumers }), ...extra],
    threaded ? { threads: { feeds: feedSource as SnapshotSource, catalog: catalog!, tracker: tracker ?? null } } : {})
  return {
    base: `http://127.0.0.1:${http.port}`,
    dir,
    port: http.port,
    store,
    metrics,
    http,
    lists,
    workspace,
    key: read.key,
    signalsOnlyKey: signalsOnly.key,
    inactiveKey: inactiveKey.key,
    revokedKey: revoked.key,
    otherWorkspace,
    otherKey: other.key,
    async stop () {
      await http.close(1000)
      auth.stop()
      lists.stop()
      catalog?.stop()
      await store.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** Waits until the server's list directory sees the store's current lists (it polls every 50 ms). */
export async function syncLists (server: FeedServer): Promise<void> {
  await server.lists.refresh()
}

export interface RawResponse {
  status: number
  headers: Record<string, string>
  /** Raw header lines as received, to check exact names and that nothing is duplicated. */
  rawHeaders: string[]
  body: Buffer
}

/**
 * One request through node:http with exactly the given headers (fetch adds Accept-Encoding and
 * decodes gzip by itself, which would hide what the server sent).
 */
export function rawRequest (base: string, path: string, options: { method?: string, headers?: Record<string, string> } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(base + path, { method: options.method ?? 'GET', headers: options.headers ?? {}, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const headers: Record<string, string> = {}
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v
        resolve({ status: res.statusCode ?? 0, headers, rawHeaders: res.rawHeaders, body: Buffer.concat(chunks) })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

export function bearer (key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` }
}

export function basic (key: string, user = 'api'): Record<string, string> {
  return { authorization: `Basic ${Buffer.from(`${user}:${key}`).toString('base64')}` }
}

// --- snapshots built by the test -----------------------------------------------------------

export interface TestFeedOptions {
  workspaceId: string
  feedId: FeedId
  /** Networks of the deny feed; the allow feed gets the first one only. */
  networks: string[]
  lastModified: number
  limit?: number
  expiresAt?: number
  /** dialect_a header name. */
  name?: string
}

function md5 (b: Uint8Array): string {
  return createHash('md5').update(b).digest('hex')
}

function representation (body: Uint8Array, key: string, encoding: 'i' | 'g', variant: { status: number, contentType: string, entries: number, limit: number, lastModifiedHttp: string }): Representation {
  const etag = `"${key.replaceAll('|', '-')}-${encoding}-${md5(body).slice(0, 16)}"`
  const ok = variant.status === 200
  const headers: Array<readonly [string, string]> = [
    ['Content-Type', variant.contentType],
    ['Cache-Control', CACHE_CONTROL],
    ['Vary', VARY],
    ['X-Feed-Entry-Count', String(variant.entries)],
    ['X-Feed-Entry-Limit', String(variant.limit)],
  ]
  // As the real builder does: a 413 carries no validators, so no conditional applies to it.
  if (ok) headers.push(['ETag', etag], ['Last-Modified', variant.lastModifiedHttp])
  if (encoding === 'g') headers.push(['Content-Encoding', 'gzip'])
  return {
    body,
    etag,
    headers,
    notModifiedHeaders: ok ? [['ETag', etag], ['Last-Modified', variant.lastModifiedHttp], ['Cache-Control', CACHE_CONTROL], ['Vary', VARY]] : [],
  }
}

function renderTestBody (format: string, family: string, action: string, networks: string[], o: TestFeedOptions): string {
  const nets = networks.filter((n) => family === 'both' || (family === 'v4') === !n.includes(':'))
  switch (format) {
    case 'plain': return nets.map((n) => n + '\n').join('')
    case 'dialect_a': return `# ${o.name ?? 'feed'}\n# All access rules\n# action: ${action}\n# family: ${family}\n# generated: ${new Date(o.lastModified).toISOString()}\n# entries: ${nets.length}\n` + nets.map((n) => n + '\n').join('')
    case 'dialect_b': return nets.map((n) => `${n.replace(/\/(32|128)$/, '')},${/\/(32|128)$/.test(n) ? 'IP' : 'IP Range'},high,high\n`).join('')
    default: return nets.length === 0 ? '' : `elements = { ${nets.join(', ')} }\n`
  }
}

/** Two snapshots of a workspace feed to swap: v1 with one network, v2 with a second one added. */
export function swapSnapshots (workspaceId: string): { v1: FeedSnapshot, v2: FeedSnapshot } {
  return {
    v1: buildTestSnapshot({ workspaceId, feedId: '*', networks: ['192.0.2.1/32'], lastModified: Date.UTC(2026, 0, 1) }),
    v2: buildTestSnapshot({ workspaceId, feedId: '*', networks: ['192.0.2.1/32', '198.51.100.0/24'], lastModified: Date.UTC(2026, 0, 2) }),
  }
}

/**
 * Every variant of one feed, built the simple way (the real builder lives in src/feed/): the
 * HTTP layer only needs status, bodies, tags, counts and dates to be consistent.
 */
export function buildTestSnapshot (o: TestFeedOptions): FeedSnapshot {
  const limit = o.limit ?? 131072
  const variants = new Map<string, Variant>()
  const lastModified = Math.floor(o.lastModified / 1000) * 1000
  for (const format of FORMATS) {
    for (const family of FAMILIES) {
      for (const action of FEED_ACTIONS) {
        const networks = action === 'block' ? o.networks : o.networks.slice(0, 1)
        const text = renderTestBody(format, family, action, networks, o)
        const entries = networks.filter((n) => family === 'both' || (family === 'v4') === !n.includes(':')).length
        for (const checksum of [false, true]) {
          const key = variantKey({ format, family, action, checksum })
          const tooLarge = entries > limit
          const payload = tooLarge
            ? JSON.stringify({ success: false, error: 'feed exceeds its entry limit', details: { entries, limit, hint: 'raise the list max_entries or narrow the selection' } })
            : checksum ? md5(Buffer.from(text)) : text
          const body = Buffer.from(payload)
          const lastModifiedHttp = new Date(lastModified).toUTCString()
          const status = tooLarge ? 413 as const : 200 as const
          const contentType = tooLarge ? CONTENT_TYPES.json : format === 'dialect_b' && !checksum ? CONTENT_TYPES.csv : CONTENT_TYPES.text
          const shape = { status, contentType, entries, limit, lastModifiedHttp }
          if (format === 'nftables' && family === 'both') continue
          variants.set(key, {
            status,
            contentType,
            identity: representation(body, key, 'i', shape),
            gzip: representation(gzipSync(body), key, 'g', shape),
            entries,
            limit,
            lastModified,
            lastModifiedHttp,
          })
        }
      }
    }
  }
  const count = (nets: string[]): { v4: number, v6: number } => ({ v4: nets.filter((n) => !n.includes(':')).length, v6: nets.filter((n) => n.includes(':')).length })
  return {
    workspaceId: o.workspaceId,
    feedId: o.feedId,
    name: o.name ?? 'feed',
    defaults: null,
    limit,
    builtAt: Date.now(),
    expiresAt: o.expiresAt ?? Infinity,
    shardCounts: [],
    networks: { block: count(o.networks), allow: count(o.networks.slice(0, 1)) },
    variants,
    // Hand-set bodies have no computed networks: explain is tested over built snapshots.
    published: { block: NO_NETWORKS, allow: NO_NETWORKS },
  }
}

const NO_NETWORKS = { total: { v4: new Uint32Array(0), v6: new Uint32Array(0) }, groups: [] }

/**
 * A FeedSource over snapshots the test sets. `getSnapshot` answers only what is set and not
 * expired; `awaitSnapshot` waits until the test sets one (a cold feed), counting the waits.
 */
export class StaticFeedSource implements FeedSource {
  readonly #snapshots = new Map<string, FeedSnapshot>()
  readonly #waiters = new Map<string, Array<(s: FeedSnapshot) => void>>()
  readonly #swaps = new Set<(workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null) => void>()
  awaited = 0

  set (snapshot: FeedSnapshot): void {
    const id = `${snapshot.workspaceId}/${snapshot.feedId}`
    this.#snapshots.set(id, snapshot)
    for (const l of this.#swaps) l(snapshot.workspaceId, snapshot.feedId, snapshot)
    for (const w of this.#waiters.get(id) ?? []) w(snapshot)
    this.#waiters.delete(id)
  }

  delete (workspaceId: string, feedId: FeedId): void {
    this.#snapshots.delete(`${workspaceId}/${feedId}`)
    for (const l of this.#swaps) l(workspaceId, feedId, null)
  }

  /** The front-end threads' hook (src/feed/snapshot-port.ts), as FeedService has it. */
  onSwap (listener: (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null) => void): () => void {
    this.#swaps.add(listener)
    return () => { this.#swaps.delete(listener) }
  }

  getSnapshot (workspaceId: string, feedId: FeedId, now: number): FeedSnapshot | null {
    const s = this.#snapshots.get(`${workspaceId}/${feedId}`)
    return s !== undefined && now < s.expiresAt ? s : null
  }

  awaitSnapshot (workspaceId: string, feedId: FeedId, now: number): Promise<FeedSnapshot> {
    this.awaited++
    const s = this.getSnapshot(workspaceId, feedId, now)
    if (s !== null) return Promise.resolve(s)
    const id = `${workspaceId}/${feedId}`
    return new Promise((resolve) => {
      const list = this.#waiters.get(id) ?? []
      list.push(resolve)
      this.#waiters.set(id, list)
    })
  }
}
