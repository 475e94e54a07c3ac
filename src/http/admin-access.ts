/**
 * Who may use the admin API (issue 22, docs/admin-api.md): a key with `admin` for its own
 * workspace, `admin:all` for every workspace; the headers every admin answer carries; failed
 * authentication limited per client address; the workspace a request means.
 *
 * Another workspace's objects answer 404 to an `admin` key, as unknown ones do (DECISIONS §2).
 */
import type { HttpRequest, HttpResponse } from 'uWebSockets.js'
import { ThreatfeedError } from '../errors.js'
import type { ApiKey, Scope, Store, Workspace } from '../store/types.js'
import type { Authenticator } from './auth.js'
import { addressText, type ClientAddresses } from './consumer-address.js'
import { RateLimiter } from './rate-limit.js'
import type { Headers } from './respond.js'

/** No script, style or frame may come from an admin answer; it is data, never a page. */
export const ADMIN_HEADERS: Headers = [
  ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"],
  ['X-Content-Type-Options', 'nosniff'],
  ['Referrer-Policy', 'no-referrer'],
  ['X-Frame-Options', 'DENY'],
  ['Cache-Control', 'no-store'],
]

export interface AdminCaller {
  readonly key: ApiKey
  readonly workspace: Workspace
  /** `admin:all`: every workspace. */
  readonly all: boolean
  /** The client's address as text (audit lines). */
  readonly address: string
}

/** What an admin request needs from uWS's request, copied before any await. */
export interface AdminRequestFacts {
  readonly authorization: string
  readonly address: string
}

export interface FailureLimit {
  /** Failed authentications an address may make at once. */
  readonly burst: number
  /** Then this many per second. */
  readonly perSecond: number
}

export const DEFAULT_FAILURE_LIMIT: FailureLimit = { burst: 10, perSecond: 1 }

/**
 * Failures are counted per address and key prefix, so that ten bad keys from an address do not
 * lock out a good key from it — behind a proxy without THREATFEED_TRUSTED_PROXIES every admin
 * shares the proxy's address (issue 35). Keys guessed at random each have a prefix of their own,
 * so the address as a whole has a budget too, this many times larger.
 */
export const ADDRESS_BURST_FACTOR = 10
/** Characters of the presented key that make its prefix: `tf_` and 8 of its random part. */
const KEY_PREFIX_LENGTH = 11

/** The limiter's buckets of a request: its address with its key's prefix, and its address. */
function failureBuckets (facts: AdminRequestFacts): [string, string] {
  const auth = facts.authorization
  const space = auth.indexOf(' ')
  const prefix = (space < 0 ? auth : auth.slice(space + 1).trimStart()).slice(0, KEY_PREFIX_LENGTH)
  return [`k ${facts.address} ${prefix}`, `a ${facts.address}`]
}

export class AdminGate {
  readonly #auth: Authenticator
  readonly #addresses: ClientAddresses
  /** One token per failed authentication, per address and key prefix (see failureBuckets). */
  readonly #failures: RateLimiter
  /** One token per failed authentication, per address: ADDRESS_BURST_FACTOR times the burst. */
  readonly #addressFailures: RateLimiter
  /** Bucket → when (performance.now()) it may try again, once its tokens ran out. */
  readonly #blockedUntil = new Map<string, number>()

  constructor (auth: Authenticator, addresses: ClientAddresses, limit: FailureLimit = DEFAULT_FAILURE_LIMIT) {
    this.#auth = auth
    this.#addresses = addresses
    this.#failures = new RateLimiter(limit.perSecond, limit.burst)
    this.#addressFailures = new RateLimiter(limit.perSecond, limit.burst * ADDRESS_BURST_FACTOR)
  }

  /** Reloads keys, workspaces and lists now: a change made here holds on this node when answered. */
  changed (): Promise<void> {
    return this.#auth.refresh(true)
  }

  /** Reads `req`: call it first, before any await. */
  facts (res: HttpResponse, req: HttpRequest): AdminRequestFacts {
    return { authorization: req.getHeader('authorization'), address: addressText(this.#addresses.of(res, req)) }
  }

  /**
   * The caller, or a 429 (an address over its failures, before its key is even looked at), 401
   * or 403. `needAll`: the route needs `admin:all`.
   */
  async check (facts: AdminRequestFacts, needAll = false): Promise<AdminCaller> {
    const now = performance.now()
    const [keyBucket, addressBucket] = failureBuckets(facts)
    for (const bucket of [keyBucket, addressBucket]) {
      const until = this.#blockedUntil.get(bucket)
      if (until === undefined) continue
      if (now < until) throw rateLimited(Math.ceil((until - now) / 1000))
      this.#blockedUntil.delete(bucket)
    }
    const scope: Scope = needAll ? 'admin:all' : 'admin'
    const decision = await this.#auth.authenticateFresh(facts.authorization, scope, 'v1')
    if (decision.ok) {
      const { key, workspace } = decision.principal
      return { key, workspace, all: key.scopes.includes('admin:all'), address: facts.address }
    }
    if (decision.error.status === 401) {
      const keyWait = this.#failures.take(keyBucket, now)
      const addressWait = this.#addressFailures.take(addressBucket, now)
      if (keyWait > 0 || addressWait > 0) {
        if (this.#blockedUntil.size > 100_000) this.#blockedUntil.clear()
        // Only the bucket that ran out is blocked: a prefix's failures leave the address's other keys alone.
        if (keyWait > 0) this.#blockedUntil.set(keyBucket, now + keyWait * 1000)
        if (addressWait > 0) this.#blockedUntil.set(addressBucket, now + addressWait * 1000)
        throw rateLimited(Math.max(keyWait, addressWait))
      }
    }
    if (decision.principal !== undefined) {
      refusedKeys.set(decision.error, { keyId: decision.principal.key.id, workspaceId: decision.principal.workspace.id })
    }
    throw decision.error
  }
}

/** The live key behind a refusal thrown by AdminGate#check (its scope fell short), for the audit. */
const refusedKeys = new WeakMap<ThreatfeedError, { readonly keyId: string, readonly workspaceId: string }>()

export function refusedKeyOf (e: unknown): { readonly keyId: string, readonly workspaceId: string } | null {
  return e instanceof ThreatfeedError ? refusedKeys.get(e) ?? null : null
}

function rateLimited (seconds: number): ThreatfeedError {
  return new ThreatfeedError('TF_ERR_RATE_LIMITED', [seconds], { details: { retryAfter: seconds } })
}

/**
 * The live workspace a request means: `requested`, or the caller's own when absent. An `admin`
 * key naming another workspace gets the 404 of an unknown one.
 */
export async function workspaceFor (store: Store, caller: AdminCaller, requested: string | undefined): Promise<Workspace> {
  if (requested === undefined || requested === caller.workspace.id) return caller.workspace
  if (!caller.all) throw new ThreatfeedError('TF_ERR_WORKSPACE_NOT_FOUND', [requested])
  const w = await store.workspaces.get(requested)
  if (w === null || w.deletedAt !== null) throw new ThreatfeedError('TF_ERR_WORKSPACE_NOT_FOUND', [requested])
  return w
}

/** Whether the caller may see objects of `workspaceId`. */
export function mayAccess (caller: AdminCaller, workspaceId: string): boolean {
  return caller.all || caller.workspace.id === workspaceId
}
