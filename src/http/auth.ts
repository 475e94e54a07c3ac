/**
 * Authentication and authorization (SPEC §5, DECISIONS §2).
 *
 * The one function that decides 401/402/403 is `decideAccess`. The Authenticator indexes every
 * live key of the catalog (feed/catalog.ts) by hash, again whenever the catalog's view changes, so
 * a key revoked from the CLI in another process is refused within one poll interval (250 ms by
 * default; DECISIONS §1 allows 1 s).
 *
 * Hot path: a feed poll must not hash. Keys that authenticated are cached to their entry — the
 * key itself, not the header it came in, so no spelling of one credential (a run of spaces, the
 * scheme's letter case, Bearer or Basic) adds an entry: the cache holds at most one entry per
 * live key, within a byte budget. It is a positive cache only (invalid credentials are hashed
 * every time, so an attacker cannot grow it), shared by every interface (the interface decides
 * only how the key is read from the header), and dropped on every reload. In front of it, the
 * one canonical header of a cached key (`Bearer <key>`) maps to the same entry, found first by a
 * number folded from the header's last characters (#byTail): a poll then costs one lookup by
 * number and one string compare, where parsing the header and hashing a fresh key string were
 * ~9 % of a 304's JavaScript, and hashing the fresh header for a lookup by string 1.8 % of its CPU. Every hit returns the entry's one decision object (no allocation per request).
 *
 * A key the set does not hold may have been created a moment ago by another process (a script
 * that runs `key create` and posts at once): `authenticateFresh` then reloads if the admin
 * revision moved before it answers 401 — at most one store read per MISS_RECHECK_MS, however
 * many unknown keys arrive, so bad credentials cannot load the store.
 */
import { ThreatfeedError } from '../errors.js'
import { hashApiKey } from '../store/api-key.js'
import type { ApiKey, Scope, Workspace } from '../store/types.js'
import { StoreCatalog, type CatalogReader, type CatalogStore, type CatalogView } from '../feed/catalog.js'

export type Api = 'v1' | 'v2' | 'feeds'

export interface Principal {
  readonly key: ApiKey
  readonly workspace: Workspace
}

export type AccessDecision =
  | { readonly ok: true, readonly principal: Principal }
  /**
   * `unknownKey`: well-formed credentials naming no live key this node holds (see authenticateFresh).
   * `principal`: a live key refused for its scope or subscription (the admin API audits who).
   */
  | { readonly ok: false, readonly error: ThreatfeedError, readonly unknownKey?: boolean, readonly principal?: Principal }

const BEARER = 'bearer'
const BASIC = 'basic'
const SP = 0x20
const HTAB = 0x09
const MAX_HEADER_LENGTH = 8192
/** RFC 4648 §4 base64: the alphabet, then at most two '=' filling the last group of four. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/**
 * The offset of the credentials when `header` starts with the scheme `word` (lowercase letters)
 * and a space, compared as ASCII only (RFC 9110 §11.1: scheme names are case-insensitive); else -1.
 */
function credentialsAt (header: string, word: string): number {
  if (header.length <= word.length || header.charCodeAt(word.length) !== SP) return -1
  for (let i = 0; i < word.length; i++) {
    // OR 0x20 folds A-Z onto a-z and nothing else onto a letter.
    if ((header.charCodeAt(i) | 0x20) !== word.charCodeAt(i)) return -1
  }
  let at = word.length + 1
  while (at < header.length && (header.charCodeAt(at) === SP || header.charCodeAt(at) === HTAB)) at++
  return at
}

/**
 * Extracts the API key from an Authorization header value: `Bearer <key>` on every interface,
 * `Basic base64(api:<key>)` on feeds only (RFC 9110 §11.4, RFC 6750 §2.1, RFC 7617 §2). Basic
 * credentials must be well-formed base64 (RFC 4648 §4, padding included): anything after or
 * inside them that is not is refused, not skipped as Node's decoder would.
 */
export function extractKey (header: string, api: Api): string | null {
  if (header.length > MAX_HEADER_LENGTH) return null
  let at = credentialsAt(header, BEARER)
  if (at >= 0) {
    const key = header.slice(at).trimEnd()
    return key === '' ? null : key
  }
  at = api === 'feeds' ? credentialsAt(header, BASIC) : -1
  if (at >= 0) {
    const encoded = header.slice(at).trimEnd()
    if (encoded === '' || !BASE64.test(encoded)) return null
    const decoded = Buffer.from(encoded, 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    if (colon < 0 || decoded.slice(0, colon) !== 'api') return null
    const key = decoded.slice(colon + 1)
    return key === '' ? null : key
  }
  return null
}

/**
 * The positive cache's budget. Entries are live keys only, so it is reached only by more keys
 * polling at once than it holds (about 20,000); it is then emptied and refilled from the hashes.
 */
export const AUTH_CACHE_MAX_BYTES = 4 * 1024 * 1024
/** What one cached key costs beyond its text: a map entry and a string header, roughly. */
const ENTRY_OVERHEAD_BYTES = 96
/** Characters at the end of a header folded into its #byTail number: 7 × 7 = 49 bits, exact in a double. */
const TAIL_CHARS = 7

/**
 * The last TAIL_CHARS characters of `header` (7 bits each, all of ASCII) as one number under
 * 2^49. Of a generated key (base64url) that is 42 random bits.
 */
function tailOf (header: string): number {
  const n = header.length
  let v = 0
  for (let i = n > TAIL_CHARS ? n - TAIL_CHARS : 0; i < n; i++) v = v * 128 + (header.charCodeAt(i) & 0x7f)
  return v
}

const unauthorized = (): ThreatfeedError => new ThreatfeedError('TF_ERR_UNAUTHORIZED')

/** Least time between two reloads caused by unknown keys. */
export const MISS_RECHECK_MS = 100

/**
 * The one place that turns "who is calling" into an outcome.
 * v1 and feeds: unknown/revoked key or deleted workspace → 401, missing scope → 403, inactive
 * subscription → 402. v2: the spec allows only 200/206/400/401, so every failure is 401 with a
 * message that says which. `granted`: the object to answer with when access is granted (the
 * Authenticator's cached one, so a poll allocates no decision).
 */
export function decideAccess (principal: Principal | null, scope: Scope, api: Api, granted?: AccessDecision): AccessDecision {
  if (principal === null || principal.key.revokedAt !== null || principal.workspace.deletedAt !== null) {
    return { ok: false, error: unauthorized() }
  }
  if (!holdsScope(principal.key.scopes, scope)) {
    return { ok: false, error: new ThreatfeedError(api === 'v2' ? 'TF_ERR_UNAUTHORIZED_SCOPE' : 'TF_ERR_FORBIDDEN', [scope]), principal }
  }
  // Administration goes on with the subscription inactive, so that it can be reactivated (issue 22).
  if (principal.workspace.subscription !== 'active' && !ADMIN_SCOPES.has(scope)) {
    return { ok: false, error: new ThreatfeedError(api === 'v2' ? 'TF_ERR_UNAUTHORIZED_SUBSCRIPTION' : 'TF_ERR_PAYMENT_REQUIRED') }
  }
  return granted ?? { ok: true, principal }
}

/** Scopes a key's scope grants besides itself: `admin:all` is `admin` everywhere, and both read
 *  rules (the console explains addresses with its admin key). */
const IMPLIED_BY: Partial<Record<Scope, readonly Scope[]>> = {
  admin: ['admin:all'],
  'rules:read': ['admin', 'admin:all'],
}
const ADMIN_SCOPES: ReadonlySet<Scope> = new Set(['admin', 'admin:all'])

/** Whether `scopes` grant `scope`, itself or through a scope that implies it. */
export function holdsScope (scopes: readonly Scope[], scope: Scope): boolean {
  if (scopes.includes(scope)) return true
  const by = IMPLIED_BY[scope]
  return by !== undefined && by.some((s) => scopes.includes(s))
}

/** The live keys of a view, by hash. */
function principalsOf (view: CatalogView): Map<string, Principal> {
  const byHash = new Map<string, Principal>()
  for (const key of view.keys) {
    const workspace = view.workspaces.get(key.workspaceId)
    if (workspace !== undefined && key.revokedAt === null && workspace.deletedAt === null) byHash.set(key.hash, { key, workspace })
  }
  return byHash
}

/**
 * A cached key: its principal, the one `ok` decision every hit returns, and the last scope and
 * interface it was granted for. A view is immutable and the cache is dropped with it, so a grant
 * holds until the next reload: a fleet polling feeds skips decideAccess after its first poll.
 */
interface Cached {
  /** The canonical header of the key, `Bearer <key>`. */
  readonly header: string
  readonly principal: Principal
  readonly ok: AccessDecision
  grantedScope: Scope | null
  grantedApi: Api | null
}

/** decideAccess for a cached principal, answering with its shared `ok` when access is granted. */
function decideCached (entry: Cached, scope: Scope, api: Api): AccessDecision {
  if (entry.grantedScope === scope && entry.grantedApi === api) return entry.ok
  const decision = decideAccess(entry.principal, scope, api, entry.ok)
  if (decision === entry.ok) {
    entry.grantedScope = scope
    entry.grantedApi = api
  }
  return decision
}

export class Authenticator {
  readonly #catalog: CatalogReader
  /** The catalog this Authenticator made for itself (given a store), started and stopped with it. */
  readonly #own: StoreCatalog | null
  /** The view #byHash was built from. */
  #view: CatalogView | null = null
  #byHash = new Map<string, Principal>()
  /** API key → principal, for keys that authenticated (positive cache; see the file comment). */
  #byKey = new Map<string, Cached>()
  /** `Bearer <key>` → the same entry as #byKey's, for the cached keys. */
  #byHeader = new Map<string, Cached>()
  /**
   * The same entries by the number tailOf folds from their header's end: a candidate found by a
   * number, then one string compare, costs a poll ~0.1 µs less than #byHeader, whose lookup
   * hashes the whole fresh header string uWS hands over (that hash alone was 1.8 % of a 304's
   * CPU). The compare may stop at the first differing word, but only a header that already ends
   * in a cached key's last 42 random bits reaches it, and then the words it could time are the
   * fixed prefix and whole blocks of random key text: nothing a guesser can climb character by
   * character. Two keys with one tail: the later one is found through #byHeader.
   */
  #byTail = new Map<number, Cached>()
  #cacheBytes = 0
  #recheck: Promise<void> | null = null
  #lastRecheck = 0
  readonly #onError: (e: unknown) => void

  /** `source`: the shared catalog, or a store to poll every `pollMs` with a catalog of its own. */
  constructor (source: CatalogReader | CatalogStore, options: { pollMs: number, onError?: (e: unknown) => void }) {
    this.#onError = options.onError ?? (() => {})
    this.#own = 'revisions' in source ? new StoreCatalog(source, { pollMs: options.pollMs, onError: this.#onError }) : null
    this.#catalog = this.#own ?? source as CatalogReader
  }

  /** Resolves once the keys are loaded (rejects when the first load fails). */
  async start (): Promise<void> {
    if (this.#own !== null) await this.#own.start()
    else if (this.#catalog.view === null) await this.#catalog.refresh()
  }

  stop (): void {
    this.#own?.stop()
  }

  /** Reloads when the admin revision moved (or always when forced). Concurrent calls share one load. */
  async refresh (force = false): Promise<void> {
    await this.#catalog.refresh(force)
  }

  /** Synchronous: answers from memory. `header` is the raw Authorization value ('' when absent). */
  authenticate (header: string, scope: Scope, api: Api): AccessDecision {
    if (this.#catalog.view !== this.#view) this.#index()
    // A canonical Bearer header is valid on every interface, so a hit needs no parsing. A map
    // lookup, not a compare with the last header seen: an early-exit compare against another
    // client's key would time how much of it a guess got right.
    const candidate = this.#byTail.get(tailOf(header))
    if (candidate !== undefined && candidate.header === header) return decideCached(candidate, scope, api)
    const hit = this.#byHeader.get(header)
    if (hit !== undefined) return decideCached(hit, scope, api)
    const key = extractKey(header, api)
    if (key === null) return decideAccess(null, scope, api)
    let entry = this.#byKey.get(key)
    if (entry === undefined) {
      const principal = this.#byHash.get(hashApiKey(key))
      if (principal === undefined) return { ok: false, error: unauthorized(), unknownKey: true }
      entry = this.#remember(key, principal)
    }
    return decideCached(entry, scope, api)
  }

  /**
   * authenticate(), and for an unknown key a second decision after the keys were reloaded if the
   * store's admin revision moved. Callers take it on the failure path only.
   *
   * @example
   *   let decision = auth.authenticate(header, 'feeds:read', 'feeds')
   *   if (!decision.ok && decision.unknownKey === true) decision = await auth.authenticateFresh(header, 'feeds:read', 'feeds')
   */
  async authenticateFresh (header: string, scope: Scope, api: Api): Promise<AccessDecision> {
    const first = this.authenticate(header, scope, api)
    if (first.ok || first.unknownKey !== true) return first
    try {
      await this.#recheckSoon()
    } catch (e) {
      this.#onError(e)
      return first
    }
    return this.authenticate(header, scope, api)
  }

  /** One shared reload for every unknown key arriving meanwhile, no sooner than MISS_RECHECK_MS after the last. */
  #recheckSoon (): Promise<void> {
    if (this.#recheck !== null) return this.#recheck
    const wait = Math.max(0, this.#lastRecheck + MISS_RECHECK_MS - Date.now())
    const recheck = new Promise<void>((resolve) => setTimeout(resolve, wait)).then(() => {
      // Keys unknown from here on wait for the next reload: this one may have read the revision already.
      this.#recheck = null
      this.#lastRecheck = Date.now()
      return this.refresh()
    })
    this.#recheck = recheck
    return recheck
  }

  /** Bytes the positive cache holds, as estimated against AUTH_CACHE_MAX_BYTES (a metric). */
  get cacheBytes (): number {
    return this.#cacheBytes
  }

  #remember (key: string, principal: Principal): Cached {
    const header = `Bearer ${key}`
    const bytes = (key.length + header.length) * 2 + 3 * ENTRY_OVERHEAD_BYTES
    if (this.#cacheBytes + bytes > AUTH_CACHE_MAX_BYTES) this.#forget()
    const entry: Cached = { header, principal, ok: { ok: true, principal }, grantedScope: null, grantedApi: null }
    this.#byKey.set(key, entry)
    this.#byHeader.set(header, entry)
    const tail = tailOf(header)
    if (!this.#byTail.has(tail)) this.#byTail.set(tail, entry)
    this.#cacheBytes += bytes
    return entry
  }

  #index (): void {
    const view = this.#catalog.view
    this.#byHash = view === null ? new Map() : principalsOf(view)
    this.#view = view
    this.#forget()
  }

  #forget (): void {
    this.#byKey = new Map()
    this.#byHeader = new Map()
    this.#byTail = new Map()
    this.#cacheBytes = 0
  }
}
