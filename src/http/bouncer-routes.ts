/**
 * The CrowdSec bouncer API (issue 31, docs/bouncers.md): what CrowdSec's bouncers ask their
 * Local API, answered from the published networks of the key's set.
 *
 *   GET /v1/decisions/stream?startup=true|false[&scopes=ip,range][&origins=…]   stream mode
 *   GET /v1/decisions?ip=ADDR | range=CIDR                                      live mode
 *
 * Authenticated by `X-Api-Key` (a key with `feeds:read`) or the feed routes' Authorization forms.
 * Errors are LAPI's body, `{"message": …, "errors": CODE}`.
 *
 * A stream pull, decided in order:
 *
 *   startup, no cursor, or an announced duration about to run out ──► every decision as new
 *                                                (and what was deleted since a known cursor)
 *   cursor = the current version ──► {"new":null,"deleted":null}
 *   cursor a version the history holds ──► its change: added as new, removed as deleted
 *   cursor unknown here (older than the kept history, another node's, a restart) ──► every decision as new
 *
 * Duration: every decision's is min(THREATFEED_BOUNCER_MAX_DURATION, the set's earliest rule
 * expiry − now) in whole seconds, rounded down, so an appliance drops it no later than a rule
 * behind it lapses even when it cannot reach the service; a bouncer whose earliest announced
 * duration would run out within REFRESH_MARGIN of its next pull gets the whole set again with
 * fresh durations, so a live entry is not dropped by a bouncer that keeps polling.
 *
 * The main thread answers these (front-end threads forward them, app.ts): the history and the
 * cursors live here.
 */
import type { HttpRequest } from 'uWebSockets.js'
import { ThreatfeedError } from '../errors.js'
import { countDecisions, renderDecisions, type DecisionOptions } from '../feed/bouncer-decisions.js'
import type { BouncerRetimes } from '../feed/bouncer-retimes.js'
import { diffPrefixes } from '../feed/delta-history.js'
import { findV4, findV6, parseExplainAddress } from '../feed/explain-lookup.js'
import { gzipBytes } from '../feed/render/gzip.js'
import { WORKSPACE_FEED, type FeedId, type FeedSnapshot, type PublishedNetworks, type PublishedPrefixes } from '../feed/snapshot-types.js'
import { FIRST, INTERVAL_WORDS, PREFIX_LENGTH, scanCidr } from '../net/cidr.js'
import type { FeedAction, Store } from '../store/types.js'
import type { HttpContext, RouteModule, Router } from './app.js'
import { prefersGzip } from './accept-encoding.js'
import type { AddressKey, ClientAddresses } from './consumer-address.js'
import type { ConsumerTracker, PollFacts } from './consumers.js'
import type { DeltaSource } from './feed-delta.js'
import type { FeedSource } from './feed-routes.js'
import { BouncerCursors, type Cursor } from './bouncer-cursors.js'
import { addressText } from './consumer-address.js'
import { sendBody, type Exchange } from './respond.js'
import { uwsBytes } from './uws-bytes.js'

export const STREAM_PATH = '/v1/decisions/stream'
export const LIVE_PATH = '/v1/decisions'

/** A bouncer whose earliest announced duration runs out sooner than this after a pull gets every decision again. */
export const REFRESH_MARGIN_MS = 60_000
/** Bodies at least this long go gzip to a client that accepts it. */
const GZIP_MIN_BYTES = 1024
/** A rendered `new` list is reused this long: its durations were cut by as much, so none outlives its rule. */
const RENDER_VALID_MS = 1000
/** Rendered lists kept (one per version, scopes and duration second). */
const RENDERED_KEPT = 16

const X_API_KEY = uwsBytes('x-api-key')
const AUTHORIZATION = uwsBytes('authorization')
const ACCEPT_ENCODING = uwsBytes('accept-encoding')
const USER_AGENT = uwsBytes('user-agent')

export interface BouncerRouteDeps {
  readonly feeds: FeedSource
  readonly history: DeltaSource
  /** THREATFEED_BOUNCER_MAX_DURATION. */
  readonly maxDurationMs: number
  /** Counts each pull for its consumer and keeps the cursor's version in the store; absent: cursors live in memory only. */
  readonly consumers?: { readonly tracker: Pick<ConsumerTracker, 'count'>, readonly addresses: ClientAddresses }
  /** THREATFEED_CONSUMERS_PER_KEY: cursors one key may have. */
  readonly perKey: number
  /** Cursors all keys together (tests lower it). */
  readonly total?: number
  /** Networks whose lapse moved later (main thread, fed by the swaps); absent: every pull near a lapse refreshes. */
  readonly retimes?: Pick<BouncerRetimes, 'since' | 'position'>
}

/** The stream query, as go-cs-bouncer sends it (other parameters, e.g. community_pull, are ignored as LAPI's own bouncer API does). */
interface StreamQuery {
  readonly startup: boolean
  readonly ip: boolean
  readonly range: boolean
  /** origins / scenarios_(not_)containing select this set (its origin and scenario are fixed). */
  readonly origins: readonly string[] | null
  readonly containing: readonly string[] | null
  readonly notContaining: readonly string[] | null
}

function bad (parameter: string, message: string): ThreatfeedError {
  return new ThreatfeedError('TF_ERR_BAD_REQUEST', [message], { details: { parameter } })
}

/** A comma list (LAPI splits on commas), without empty items; null when absent. */
function list (params: URLSearchParams, name: string): string[] | null {
  const v = params.get(name)
  if (v === null) return null
  return v.split(',').map((s) => s.trim()).filter((s) => s !== '')
}

const WORD = /^[A-Za-z][A-Za-z0-9_-]{0,31}$/

function parseStreamQuery (raw: string): StreamQuery {
  const params = new URLSearchParams(raw)
  const startup = params.get('startup')
  if (startup !== null && startup !== 'true' && startup !== 'false') throw bad('startup', `startup must be true or false, not ${JSON.stringify(startup.slice(0, 32))}`)
  const scopes = list(params, 'scopes')
  let ip = true
  let range = true
  if (scopes !== null) {
    // LAPI selects the decisions whose scope is listed: a scope it knows but this set never has
    // (country, as, …) selects none, as there.
    ip = range = false
    for (const s of scopes) {
      if (!WORD.test(s)) throw bad('scopes', `scopes: ${JSON.stringify(s.slice(0, 32))} is not a scope (ip, range)`)
      const lower = s.toLowerCase()
      if (lower === 'ip') ip = true
      else if (lower === 'range') range = true
    }
  }
  return { startup: startup === 'true', ip, range, origins: list(params, 'origins'), containing: list(params, 'scenarios_containing'), notContaining: list(params, 'scenarios_not_containing') }
}

/** Whether the filters of `q` let this set's decisions through. */
function selects (q: StreamQuery, scenario: string): boolean {
  if (q.origins !== null && !q.origins.includes('threatfeed')) return false
  if (q.containing !== null && q.containing.length > 0 && !q.containing.some((s) => scenario.includes(s))) return false
  if (q.notContaining !== null && q.notContaining.some((s) => scenario.includes(s))) return false
  return true
}

/** The set a key's bouncers receive: the workspace feed's block networks unless the key says otherwise. */
interface BouncerSet {
  readonly feedId: FeedId
  readonly action: FeedAction
}

const DEFAULT_SET: BouncerSet = { feedId: WORKSPACE_FEED, action: 'block' }

const EMPTY: PublishedPrefixes = { v4: new Uint32Array(0), v6: new Uint32Array(0) }

/** What one stream pull reads of its request: copied out of uWS's request before any await. */
interface Pull {
  readonly workspaceId: string
  readonly keyId: string
  readonly address: AddressKey
  readonly userAgent: string
  readonly gzip: boolean
  readonly query: string
}

/**
 * The bouncer routes as a RouteModule (main thread only).
 *
 * @example
 *   startHttpServer(ctx, [bouncerRoutes({ feeds, history, maxDurationMs: 86_400_000, perKey: 1000 })])
 */
export function bouncerRoutes (deps: BouncerRouteDeps): RouteModule {
  return (router: Router, ctx: HttpContext): void => {
    const cursors = new BouncerCursors({ perKey: deps.perKey, total: deps.total ?? 100_000 })
    const restorer = deps.consumers === undefined ? null : new CursorRestorer(ctx.store)
    const rendered = new Map<string, { at: number, seconds: number, json: string }>()

    const authenticate = async (req: HttpRequest): Promise<{ workspaceId: string, keyId: string, set: BouncerSet }> => {
      const apiKey = req.getHeader(X_API_KEY)
      const header = apiKey !== '' ? `Bearer ${apiKey}` : req.getHeader(AUTHORIZATION)
      let decision = ctx.auth.authenticate(header, 'feeds:read', 'feeds')
      if (!decision.ok && decision.unknownKey === true) decision = await ctx.auth.authenticateFresh(header, 'feeds:read', 'feeds')
      if (!decision.ok) throw decision.error
      const b = decision.principal.key.bouncer
      return { workspaceId: decision.principal.workspace.id, keyId: decision.principal.key.id, set: b === undefined ? DEFAULT_SET : { feedId: b.listId ?? WORKSPACE_FEED, action: b.action } }
    }

    const snapshotOf = async (workspaceId: string, set: BouncerSet): Promise<FeedSnapshot> => {
      const now = Date.now()
      return deps.feeds.getSnapshot(workspaceId, set.feedId, now) ?? await deps.feeds.awaitSnapshot(workspaceId, set.feedId, now)
    }

    /**
     * The longest duration announced now: the cap — or, for a snapshot built without lapses,
     * the cap cut to its earliest rule expiry, which no network outlives.
     */
    const capSeconds = (snapshot: FeedSnapshot, set: BouncerSet, now: number): number => {
      const ms = snapshot.published[set.action].lapse === undefined ? Math.min(deps.maxDurationMs, snapshot.expiresAt - now) : deps.maxDurationMs
      return Math.max(0, Math.floor(ms / 1000))
    }

    /** Every decision of the version, rendered once per second and shared by the pulls of that second. */
    const allDecisions = (snapshot: FeedSnapshot, set: BouncerSet, o: Omit<DecisionOptions, 'seconds'>, now: number): { json: string, seconds: number } => {
      const key = `${snapshot.builtAt}|${set.feedId}|${set.action}|${o.ip ? 1 : 0}${o.range ? 1 : 0}|${o.scenario}`
      const hit = rendered.get(key)
      if (hit !== undefined && now >= hit.at && now - hit.at < RENDER_VALID_MS) return hit
      // Durations as seen from the end of the entry's life, so that none is longer when sent later.
      const from = now + RENDER_VALID_MS
      const seconds = capSeconds(snapshot, set, from)
      const published = snapshot.published[set.action]
      const json = renderDecisions(published.total, { ...o, seconds, lapse: published.lapse ?? null, now: from })
      if (rendered.size >= RENDERED_KEPT) rendered.delete(rendered.keys().next().value!)
      const entry = { at: now, seconds, json }
      rendered.set(key, entry)
      return entry
    }

    /**
     * What a bouncer holds of the set its cursor names (another set than its key's now): that
     * set's version `cursor.tag`, rebuilt from the set's current networks and the history's change
     * since; the current networks when the history no longer has it (docs/bouncers.md).
     */
    const heldOf = async (cursor: Cursor): Promise<PublishedPrefixes | null> => {
      const [workspaceId, feedId, action] = cursor.set.split('\n') as [string, FeedId, FeedAction]
      let snapshot: FeedSnapshot
      try {
        snapshot = await snapshotOf(workspaceId, { feedId, action })
      } catch {
        // The old set is gone (a deleted list): nothing of it can be named any more.
        return null
      }
      const current = snapshot.published[action].total
      const since = deps.history.changes(workspaceId, feedId, action, cursor.tag, Date.now())
      return since === null ? current : mergePrefixes(diffPrefixes(current, since.added).removed, since.removed)
    }

    const send = (ex: Exchange, gzip: boolean, body: string): void => {
      const bytes = Buffer.from(body)
      if (gzip && bytes.byteLength >= GZIP_MIN_BYTES) sendBody(ex, 200, gzipBytes(bytes), 'application/json', [['Content-Encoding', 'gzip'], ['Vary', 'Accept-Encoding']])
      else sendBody(ex, 200, bytes, 'application/json', [['Vary', 'Accept-Encoding']])
    }

    const stream = async (ex: Exchange, req: HttpRequest): Promise<void> => {
      const p: Pull = {
        workspaceId: '',
        keyId: '',
        address: deps.consumers === undefined ? '' : deps.consumers.addresses.of(ex.res, req),
        userAgent: req.getHeader(USER_AGENT),
        gzip: prefersGzip(req.getHeader(ACCEPT_ENCODING)),
        query: req.getQuery() ?? '',
      }
      const { set, ...who } = await authenticate(req)
      const pull: Pull = { ...p, ...who }
      const q = parseStreamQuery(pull.query)
      const snapshot = await snapshotOf(pull.workspaceId, set)
      const variant = snapshot.variants.get(`plain|both|${set.action}|`)
      if (variant === undefined) throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error('snapshot without its plain|both variant') })
      if (variant.status === 413) throw new ThreatfeedError('TF_ERR_FEED_TOO_LARGE')
      const tag = unquote(variant.identity.etag)
      const setKey = `${pull.workspaceId}\n${set.feedId}\n${set.action}`
      const bouncer = `${addressText(pull.address)}\n${pull.userAgent}`
      let cursor = cursors.get(pull.keyId, bouncer)
      if (cursor === undefined && restorer !== null) {
        const held = await restorer.held(pull, set)
        // Its retimes and durations are unknown here: the first answer sends everything again.
        if (held !== null) cursor = { set: setKey, tag: held, until: 0, at: 0, epoch: 0, retime: 0 }
      }
      if (ex.aborted) return
      const now = Date.now()
      const scenario = `threatfeed:${snapshot.name}`
      const o = { scenario, ip: q.ip, range: q.range }
      const on = selects(q, scenario)
      // A cursor of another set (the key's setting changed) holds that set's networks: they go
      // as deleted, the new set's as new (setChange).
      const moved = cursor !== undefined && cursor.set !== setKey ? await heldOf(cursor) : null
      if (ex.aborted) return
      const known = cursor !== undefined && cursor.set === setKey
      const changes = !known ? null : cursor!.tag === tag ? { removed: EMPTY, added: EMPTY } : deps.history.changes(pull.workspaceId, set.feedId, set.action, cursor!.tag, now)
      const retimed = !known || deps.retimes === undefined ? null : deps.retimes.since(pull.workspaceId, set.feedId, set.action, cursor!.epoch, cursor!.retime)
      const refresh = q.startup || changes === null || retimed === null || now + Math.max(REFRESH_MARGIN_MS, 3 * (now - cursor!.at)) >= cursor!.until
      const published = snapshot.published[set.action]
      let body: string
      let until: number
      if (refresh) {
        const all = allDecisions(snapshot, set, o, now)
        const removed = moved !== null ? diffPrefixes(moved, published.total).removed : changes?.removed ?? null
        const deleted = removed === null || !on ? 'null' : renderDecisions(removed, { ...o, seconds: 0 })
        body = `{"new":${on ? all.json : 'null'},"deleted":${deleted}}`
        until = now + all.seconds * 1000
      } else {
        // What changed, and what stayed but lapses later than this bouncer was told: both as new.
        const fresh = presentIn(published, [changes.added, ...retimed!])
        const seconds = capSeconds(snapshot, set, now)
        const added = on ? renderDecisions(fresh.prefixes, { ...o, seconds, lapse: fresh.lapse, now }) : 'null'
        const deleted = on ? renderDecisions(changes.removed, { ...o, seconds: 0 }) : 'null'
        body = `{"new":${added},"deleted":${deleted}}`
        until = countDecisions(fresh.prefixes, o) > 0 ? Math.min(cursor!.until, now + seconds * 1000) : cursor!.until
      }
      send(ex, pull.gzip, body)
      if (ex.aborted) return
      const position = deps.retimes?.position(pull.workspaceId, set.feedId, set.action) ?? { epoch: 0, seq: 0 }
      cursors.set(pull.keyId, bouncer, { set: setKey, tag, until, at: now, epoch: position.epoch, retime: position.seq } satisfies Cursor)
      deps.consumers?.tracker.count(pollFacts(pull, set, now), 200, variant.identity.etag, variant.lastModified)
    }

    const live = async (ex: Exchange, req: HttpRequest): Promise<void> => {
      const gzip = prefersGzip(req.getHeader(ACCEPT_ENCODING))
      const raw = req.getQuery() ?? ''
      const who = await authenticate(req)
      const params = new URLSearchParams(raw)
      const contains = params.get('contains')
      if (contains !== null && contains !== 'true') throw bad('contains', 'contains: only true (the decisions holding the address or range) is answered')
      const set = who.set
      const snapshot = await snapshotOf(who.workspaceId, set)
      if (ex.aborted) return
      const now = Date.now()
      const published = snapshot.published[set.action]
      const found = presentIn(published, [matching(published.total, params.get('ip'), params.get('range'))])
      const scenario = `threatfeed:${snapshot.name}`
      send(ex, gzip, renderDecisions(found.prefixes, { scenario, ip: true, range: true, seconds: capSeconds(snapshot, set, now), lapse: found.lapse, now }))
    }

    const head = async (ex: Exchange, req: HttpRequest): Promise<void> => {
      // LAPI answers HEAD with an empty 200 and leaves the cursor alone (its last pull too).
      await authenticate(req)
      sendBody(ex, 200, '', 'application/json')
    }

    router.on('get', STREAM_PATH, 'decisions_stream', 'bouncer', stream)
    router.on('head', STREAM_PATH, 'decisions_stream', 'bouncer', head)
    router.onlyAllow(STREAM_PATH, 'decisions_stream', 'bouncer', 'GET, HEAD')
    router.on('get', LIVE_PATH, 'decisions', 'bouncer', live)
    router.onlyAllow(LIVE_PATH, 'decisions', 'bouncer', 'GET, HEAD')
  }
}

function unquote (etag: string): string {
  return etag.length >= 2 && etag.charCodeAt(0) === 0x22 ? etag.slice(1, -1) : etag
}

/** What consumer tracking counts for a pull: the bouncer as a consumer of its set's `bouncer|both|ACTION` variant. */
function pollFacts (pull: Pull, set: BouncerSet, at: number): PollFacts {
  const key = `bouncer|both|${set.action}|`
  return {
    workspaceId: pull.workspaceId,
    keyId: pull.keyId,
    address: pull.address,
    userAgent: pull.userAgent,
    client: '',
    listRef: set.feedId,
    variant: { key, params: { format: 'plain', family: 'both', action: set.action, checksum: false } },
    at,
  }
}

/**
 * The live-mode match: the published network holding `ip`, or holding the whole of `range`
 * (LAPI's default `contains=true`); every network when neither is given, as LAPI answers every
 * decision then.
 */
function matching (total: PublishedPrefixes, ip: string | null, range: string | null): PublishedPrefixes {
  if (ip !== null && range !== null) throw bad('ip', 'give ip or range, not both')
  if (ip === null && range === null) return total
  let family: 'v4' | 'v6'
  let first: Uint32Array
  let len: number
  if (ip !== null) {
    const a = parseExplainAddress(ip)
    family = a.family
    first = a.family === 'v4' ? Uint32Array.of(a.v4) : a.v6
    len = a.family === 'v4' ? 32 : 128
  } else {
    const out = new Uint32Array(INTERVAL_WORDS)
    const f = range!.length > 64 ? 0 : scanCidr(range!, 0, range!.length, out)
    if (f === 0) throw bad('range', `range: ${JSON.stringify(range!.slice(0, 64))} is not a CIDR network`)
    family = f === 4 ? 'v4' : 'v6'
    first = f === 4 ? out.slice(FIRST, FIRST + 1) : out.slice(FIRST, FIRST + 4)
    len = out[PREFIX_LENGTH]!
  }
  if (family === 'v4') {
    const i = findV4(total.v4, first[0]!)
    return i >= 0 && total.v4[i * 2 + 1]! <= len ? { v4: total.v4.slice(i * 2, i * 2 + 2), v6: EMPTY.v6 } : EMPTY
  }
  const i = findV6(total.v6, first)
  return i >= 0 && total.v6[i * 5 + 4]! <= len ? { v4: EMPTY.v4, v6: total.v6.slice(i * 5, i * 5 + 5) } : EMPTY
}

/** The prefixes of two sorted lists, in order (a prefix in both once). */
function mergePrefixes (a: PublishedPrefixes, b: PublishedPrefixes): PublishedPrefixes {
  const extra = diffPrefixes(a, b).added
  const family = (x: Uint32Array, y: Uint32Array, w: number): Uint32Array => {
    const out = new Uint32Array(x.length + y.length)
    let i = 0
    let j = 0
    let o = 0
    while (i < x.length || j < y.length) {
      let takeX = j >= y.length
      if (!takeX && i < x.length) {
        let c = 0
        for (let k = 0; k < w && c === 0; k++) c = x[i + k]! - y[j + k]!
        takeX = c < 0
      }
      if (takeX) { out.set(x.subarray(i, i + w), o); i += w } else { out.set(y.subarray(j, j + w), o); j += w }
      o += w
    }
    return out
  }
  return { v4: family(a.v4, extra.v4, 2), v6: family(a.v6, extra.v6, 5) }
}

/**
 * The prefixes of `lists` (sorted, each maybe repeated across lists) that `published` holds, each
 * once and in feed order, with their lapses aligned (null when the snapshot has none).
 */
function presentIn (published: PublishedNetworks, lists: readonly PublishedPrefixes[]): { prefixes: PublishedPrefixes, lapse: Float64Array | null } {
  const total = published.total
  const n4 = total.v4.length >> 1
  const at4 = new Set<number>()
  const at6 = new Set<number>()
  for (const p of lists) {
    for (let i = 0; i < p.v4.length; i += 2) {
      const k = findV4(total.v4, p.v4[i]!)
      if (k >= 0 && total.v4[k * 2] === p.v4[i] && total.v4[k * 2 + 1] === p.v4[i + 1]) at4.add(k)
    }
    for (let i = 0; i < p.v6.length; i += 5) {
      const w = p.v6.subarray(i, i + 4)
      const k = findV6(total.v6, w)
      if (k >= 0 && total.v6[k * 5 + 4] === p.v6[i + 4] && total.v6[k * 5] === w[0] && total.v6[k * 5 + 1] === w[1] && total.v6[k * 5 + 2] === w[2] && total.v6[k * 5 + 3] === w[3]) at6.add(k)
    }
  }
  const k4 = [...at4].sort((a, b) => a - b)
  const k6 = [...at6].sort((a, b) => a - b)
  const v4 = new Uint32Array(k4.length * 2)
  const v6 = new Uint32Array(k6.length * 5)
  k4.forEach((k, n) => { v4.set(total.v4.subarray(k * 2, k * 2 + 2), n * 2) })
  k6.forEach((k, n) => { v6.set(total.v6.subarray(k * 5, k * 5 + 5), n * 5) })
  const lapse = published.lapse === undefined ? null : Float64Array.from([...k4, ...k6.map((k) => n4 + k)], (k) => published.lapse![k]!)
  return { prefixes: { v4, v6 }, lapse }
}

/** How long the consumer records read for restoring cursors are reused (one store read per workspace per this). */
const RESTORE_READ_MS = 2000

/**
 * A cursor this node does not hold (a restart, another node served the bouncer before): the
 * version the consumer's stored record says it holds. One read of a workspace's records serves
 * every unknown bouncer arriving within RESTORE_READ_MS.
 */
class CursorRestorer {
  readonly #store: Store
  readonly #reads = new Map<string, { at: number, records: Promise<Map<string, string>> }>()

  constructor (store: Store) {
    this.#store = store
  }

  async held (pull: Pull, set: BouncerSet): Promise<string | null> {
    const now = Date.now()
    let read = this.#reads.get(pull.workspaceId)
    if (read === undefined || now - read.at > RESTORE_READ_MS) {
      const records = this.#store.consumers.list(pull.workspaceId).then((all) => {
        const byBouncer = new Map<string, string>()
        for (const c of all) {
          if (!c.variant.startsWith('bouncer|') || c.held === null) continue
          byBouncer.set(`${c.keyId}\n${c.address}\n${c.userAgent}\n${c.listId}\n${c.action}`, unquote(c.held.etag))
        }
        return byBouncer
      })
      read = { at: now, records }
      this.#reads.set(pull.workspaceId, read)
      if (this.#reads.size > 1024) this.#reads.delete(this.#reads.keys().next().value!)
    }
    try {
      const records = await read.records
      return records.get(`${pull.keyId}\n${addressText(pull.address)}\n${pull.userAgent.slice(0, 256)}\n${set.feedId}\n${set.action}`) ?? null
    } catch {
      // The store is down: answered as a bouncer without a cursor (every decision; harmless).
      this.#reads.delete(pull.workspaceId)
      return null
    }
  }
}
