/**
 * Authentication and authorization (SPEC §5, DECISIONS §2).
 *
 * The one function that decides 401/402/403 is `decideAccess`. The Authenticator keeps every live
 * key in memory, keyed by hash, and reloads the whole set whenever the store's admin revision
 * moves, so a key revoked from the CLI in another process is refused within one poll interval
 * (250 ms by default; DECISIONS §1 allows 1 s).
 *
 * Hot path: a feed poll must not hash. Valid Authorization header strings are cached to their
 * entry (a positive cache only: invalid credentials are hashed every time, so an attacker cannot
 * grow the cache), and the cache is dropped on every reload.
 */
import { ThreatfeedError } from '../errors.js'
import { hashApiKey } from '../store/api-key.js'
import type { ApiKey, Scope, Store, Workspace } from '../store/types.js'

export type Api = 'v1' | 'v2' | 'feeds'

export interface Principal {
  readonly key: ApiKey
  readonly workspace: Workspace
}

export type AccessDecision =
  | { readonly ok: true, readonly principal: Principal }
  | { readonly ok: false, readonly error: ThreatfeedError }

const BEARER = 'bearer '
const BASIC = 'basic '

/**
 * Extracts the API key from an Authorization header value: `Bearer <key>` on every interface,
 * `Basic base64(api:<key>)` on feeds only. Scheme names are case-insensitive (RFC 9110 §11.1).
 */
export function extractKey (header: string, api: Api): string | null {
  if (header.length > 8192) return null
  if (header.slice(0, BEARER.length).toLowerCase() === BEARER) {
    const key = header.slice(BEARER.length).trim()
    return key === '' ? null : key
  }
  if (api === 'feeds' && header.slice(0, BASIC.length).toLowerCase() === BASIC) {
    const decoded = Buffer.from(header.slice(BASIC.length).trim(), 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    if (colon < 0 || decoded.slice(0, colon) !== 'api') return null
    const key = decoded.slice(colon + 1)
    return key === '' ? null : key
  }
  return null
}

const unauthorized = (): ThreatfeedError => new ThreatfeedError('TF_ERR_UNAUTHORIZED')

/**
 * The one place that turns "who is calling" into an outcome.
 * v1 and feeds: unknown/revoked key or deleted workspace → 401, missing scope → 403, inactive
 * subscription → 402. v2: the spec allows only 200/206/400/401, so every failure is 401 with a
 * message that says which.
 */
export function decideAccess (principal: Principal | null, scope: Scope, api: Api): AccessDecision {
  if (principal === null || principal.key.revokedAt !== null || principal.workspace.deletedAt !== null) {
    return { ok: false, error: unauthorized() }
  }
  if (!principal.key.scopes.includes(scope)) {
    return { ok: false, error: new ThreatfeedError(api === 'v2' ? 'TF_ERR_UNAUTHORIZED_SCOPE' : 'TF_ERR_FORBIDDEN', [scope]) }
  }
  if (principal.workspace.subscription !== 'active') {
    return { ok: false, error: new ThreatfeedError(api === 'v2' ? 'TF_ERR_UNAUTHORIZED_SUBSCRIPTION' : 'TF_ERR_PAYMENT_REQUIRED') }
  }
  return { ok: true, principal }
}

export class Authenticator {
  readonly #store: Store
  #byHash = new Map<string, Principal>()
  /**
   * Authorization header text → principal, for headers that authenticated (positive cache).
   * Feeds accept Basic and signals do not, so the two never share a cache.
   */
  #feedHeaders = new Map<string, Principal>()
  #signalHeaders = new Map<string, Principal>()
  #revision = -1
  #timer: NodeJS.Timeout | null = null
  #loading: Promise<void> | null = null
  readonly #pollMs: number
  readonly #onError: (e: unknown) => void

  constructor (store: Store, options: { pollMs: number, onError?: (e: unknown) => void }) {
    this.#store = store
    this.#pollMs = options.pollMs
    this.#onError = options.onError ?? (() => {})
  }

  /** Loads every key once, then polls the admin revision. */
  async start (): Promise<void> {
    await this.refresh()
    this.#timer = setInterval(() => { this.refresh().catch(this.#onError) }, this.#pollMs)
    this.#timer.unref()
  }

  stop (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }

  /** Reloads when the admin revision moved (or always when forced). Concurrent calls share one load. */
  async refresh (force = false): Promise<void> {
    if (this.#loading !== null) return this.#loading
    this.#loading = (async () => {
      try {
        const { admin } = await this.#store.revisions()
        if (!force && admin === this.#revision) return
        const [keys, workspaces] = await Promise.all([this.#store.keys.list(), this.#store.workspaces.list()])
        const ws = new Map(workspaces.map((w) => [w.id, w]))
        const byHash = new Map<string, Principal>()
        for (const key of keys) {
          const workspace = ws.get(key.workspaceId)
          if (workspace !== undefined && key.revokedAt === null && workspace.deletedAt === null) byHash.set(key.hash, { key, workspace })
        }
        this.#byHash = byHash
        this.#feedHeaders = new Map()
        this.#signalHeaders = new Map()
        this.#revision = admin
      } finally {
        this.#loading = null
      }
    })()
    return this.#loading
  }

  /** Synchronous: answers from memory. `header` is the raw Authorization value ('' when absent). */
  authenticate (header: string, scope: Scope, api: Api): AccessDecision {
    const cache = api === 'feeds' ? this.#feedHeaders : this.#signalHeaders
    let principal = cache.get(header) ?? null
    if (principal === null) {
      const key = extractKey(header, api)
      principal = key === null ? null : this.#byHash.get(hashApiKey(key)) ?? null
      if (principal !== null && cache.size < 100_000) cache.set(header, principal)
    }
    return decideAccess(principal, scope, api)
  }
}
