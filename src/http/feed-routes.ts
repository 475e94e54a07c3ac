/**
 * GET and HEAD /v1/threat/feeds and /v1/threat/feeds/{list} (SPEC §4.3–4.5, §7.2; DECISIONS §2, §5).
 *
 * Order of decisions, each a throw that the router turns into the feed error body (SPEC 2.9):
 *
 *   authenticate (401/402/403) → list (404/409) → parameters (400) → snapshot → variant
 *     → 413, or conditional (304), or 200
 *
 * Authentication comes first so that neither a list's existence nor a 304 ever leaks to a caller
 * without access (DECISIONS §2), and conditionals are evaluated only for an answer that would be
 * 200 (RFC 9110 §13.2.1).
 *
 * The steady state of a poll is synchronous and allocation-light: the Authorization header hits
 * the Authenticator's cache, the query string hits the parameter memo, the list comes from the
 * in-memory directory, the snapshot from the FeedService, the header blocks from the per-variant
 * cache; then one ETag compare and one corked write. Only a feed that is not built yet (or has
 * expired) waits for a build.
 */
import type { HttpRequest } from 'uWebSockets.js'
import { ThreatfeedError, toThreatfeedError } from '../errors.js'
import { WORKSPACE_FEED, type FeedId, type FeedSnapshot, type Variant } from '../feed/snapshot-types.js'
import type { ListDefaults } from '../store/types.js'
import type { HttpContext, RouteModule, Router } from './app.js'
import type { Exchange } from './respond.js'
import { prefersGzip } from './accept-encoding.js'
import { isNotModified } from './conditional.js'
import { parseFeedQuery, resolveVariant, type FeedQuery, type ResolvedVariant } from './feed-params.js'
import { turnWallClock } from './turn-clock.js'
import { uwsBytes } from './uws-bytes.js'
import { prepareVariant, closesAfter, writeBody, writeHead, writeHeadError, writeNotModified } from './feed-write.js'
import { decodeListRef, ListDirectory } from './list-resolve.js'
import type { AddressKey, ClientAddresses } from './consumer-address.js'
import type { ConsumerTracker, PollFacts } from './consumers.js'
import { answerDelta, type DeltaDeps, type DeltaSource } from './feed-delta.js'

/**
 * How close to a snapshot's lapse a poll reads its own clock instead of its turn's: far longer
 * than any turn of a front-end thread's loop (a turn answers what one poll of the sockets
 * returned, tens of polls of microseconds each).
 */
const TURN_CLOCK_SLACK_MS = 1000

/** Least time between two polls of one representation told to the feed side (FeedSource#notePoll). */
const NOTE_MS = 1000

/** What the routes need from the snapshot side (src/feed/feed-service.ts implements it). */
export interface FeedSource {
  /** The current snapshot when it is built and not past its expiry; null otherwise. Synchronous. */
  getSnapshot (workspaceId: string, feedId: FeedId, now: number): FeedSnapshot | null
  /**
   * Builds (or joins a build of) the snapshot and resolves with it; `built`: not a served copy
   * restored at start (feed/served-copy.ts), which lacks what the caller needs.
   */
  awaitSnapshot (workspaceId: string, feedId: FeedId, now: number, built?: boolean): Promise<FeedSnapshot>
  /** A poll answered from one representation of the feed: what its served copy keeps. */
  notePoll? (workspaceId: string, feedId: FeedId, variantKey: string, gzip: boolean, at: number): void
  /** Resolves with a snapshot holding the shards of `of`, building them first when none does. */
  awaitShards? (workspaceId: string, feedId: FeedId, of: number): Promise<FeedSnapshot>
  /** A tag matched nothing in `snapshot`: the snapshot to answer from once this node caught up with newer content recorded by another. */
  fresher? (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot): Promise<FeedSnapshot>
}

export interface FeedRouteDeps {
  readonly feeds: FeedSource
  /**
   * The list index. When absent, the module starts its own on ctx.store (polling every
   * ctx.config.pollMs); pass one to control its life cycle (stop it at shutdown).
   */
  readonly lists?: ListDirectory
  /** Counts every authenticated request for its consumer (issue 20); absent: tracking is off. */
  readonly consumers?: { readonly tracker: Pick<ConsumerTracker, 'count'>, readonly addresses: ClientAddresses }
  /**
   * Feed deltas (`?since=`, docs/deltas.md): the history on the main thread; a front-end thread,
   * which keeps none, answers the 304s and full answers itself and forwards the rest.
   */
  readonly deltas?: { readonly history: DeltaSource, readonly rendered?: () => void } | { readonly forward: (ex: Exchange, req: HttpRequest) => Promise<void> }
}

export const FEEDS_PATH = '/v1/threat/feeds'
export const FEED_LIST_PATH = '/v1/threat/feeds/:list'
const ALLOW = 'GET, HEAD'
// Header names as ArrayBuffers, the argument uWS reads cheapest (uws-bytes.ts).
const AUTHORIZATION = uwsBytes('authorization')
const IF_NONE_MATCH = uwsBytes('if-none-match')
const IF_MODIFIED_SINCE = uwsBytes('if-modified-since')
const ACCEPT_ENCODING = uwsBytes('accept-encoding')
const CONNECTION = uwsBytes('connection')
const USER_AGENT = uwsBytes('user-agent')

/**
 * The request fields a decision needs, copied out of uWS's stack-allocated request. A poll
 * answered within uWS's callback fills the handler's one scratch object; a request whose answer
 * outlives the callback keeps that object, and the next request gets a new one (`take`).
 */
interface FeedRequest extends PollFacts {
  head: boolean
  /** Set once the key is known (at once, or after authenticateFresh). */
  workspaceId: string
  rawQuery: string
  /** Set once the list is resolved ('*' for the workspace feed). */
  feedId: FeedId
  /** Set once the list's defaults are known. */
  variant: ResolvedVariant | null
  /** Set with the variant: the parsed query (its `delta` sends the answer to feed-delta.ts). */
  query: FeedQuery | null
  gzip: boolean
  ifNoneMatch: string
  ifModifiedSince: string
  /** uWS closes the connection after this answer (the client asked for it). */
  close: boolean
  address: AddressKey
  userAgent: string
}

function emptyRequest (): FeedRequest {
  return {
    head: false,
    workspaceId: '',
    rawQuery: '',
    feedId: WORKSPACE_FEED,
    variant: null,
    query: null,
    gzip: false,
    ifNoneMatch: '',
    ifModifiedSince: '',
    close: false,
    keyId: '',
    address: '',
    userAgent: '',
    client: '',
    listRef: WORKSPACE_FEED,
    at: 0,
  }
}

/**
 * The feed routes as a RouteModule for startHttpServer.
 *
 * @example
 *   const http = await startHttpServer(ctx, [signalRoutes(...), feedRoutes({ feeds: feedService })])
 */
export function feedRoutes (deps: FeedRouteDeps): RouteModule {
  return (router: Router, ctx: HttpContext): void => {
    let lists = deps.lists
    if (lists === undefined) {
      const own = new ListDirectory(ctx.store, {
        pollMs: ctx.config.pollMs,
        onError: (e) => { ctx.log.warn({ err: e }, 'list reload failed; serving the previous lists') },
      })
      own.start().catch((e: unknown) => { ctx.log.warn({ err: e }, 'initial list load failed; retrying on the next poll') })
      lists = own
    }
    const handler = createFeedHandler(deps, lists, ctx)
    const headError = (ex: Exchange, e: unknown, close: boolean): void => {
      const error = toThreatfeedError(e)
      if (error.fault !== 'caller') ctx.log.error({ err: error, cause: error.cause, code: error.code }, error.message)
      writeHeadError(ex, error, close)
    }
    for (const [path, route, isList] of [[FEEDS_PATH, 'feeds', false], [FEED_LIST_PATH, 'feeds_list', true]] as const) {
      router.on('get', path, route, 'feed', (ex, req) => handler(ex, req, false, isList))
      // HEAD errors are written here, without the body the router's error writer would send.
      router.on('head', path, route, 'feed', (ex, req) => {
        const close = closesAfter(req.getHeader(CONNECTION))
        try {
          const pending = handler(ex, req, true, isList)
          if (pending !== undefined) return pending.catch((e: unknown) => { headError(ex, e, close) })
        } catch (e) {
          headError(ex, e, close)
        }
      })
      router.onlyAllow(path, route, 'feed', ALLOW)
    }
  }
}

type FeedHandler = (ex: Exchange, req: HttpRequest, head: boolean, isList: boolean) => void | Promise<void>

function createFeedHandler (deps: FeedRouteDeps, lists: ListDirectory, ctx: HttpContext): FeedHandler {
  const feeds = deps.feeds
  const notePoll = feeds.notePoll === undefined ? null : feeds.notePoll.bind(feeds)
  const counters = feedCounters(ctx)
  const consumers = deps.consumers ?? null
  const polled = (ex: Exchange, r: FeedRequest, status: number, etag: string | null, since: number): void => {
    // A list that did not resolve ('' until serve) is nobody's: a name that names nothing creates nothing.
    if (consumers !== null && !ex.aborted && r.listRef !== '') consumers.tracker.count(r, status, etag, since)
  }

  const answer = (ex: Exchange, r: FeedRequest, snapshot: FeedSnapshot, retried = false, checked = false): void | Promise<void> => {
    const variant = snapshot.variants.get(r.variant!.key)
    if (variant === undefined) {
      // A served copy holds the variants polled before the restart; another waits for the build.
      if (snapshot.restored === true) return built(ex, r)
      // A shard count this feed has not built yet: its first request waits for one build.
      const shard = r.variant!.params.shard
      if (shard == null || retried || feeds.awaitShards === undefined) throw missingVariant(r)
      return feeds.awaitShards(r.workspaceId, r.feedId, shard.of).then((s) => ex.aborted ? undefined : answer(ex, r, s, true, checked))
    }
    const prepared = prepareVariant(variant)
    const rep = r.gzip ? prepared.gzip : prepared.identity
    if (notePoll !== null && r.at - rep.notedAt >= NOTE_MS) {
      rep.notedAt = r.at
      notePoll(r.workspaceId, r.feedId, r.variant!.key, r.gzip, r.at)
    }
    if (r.query!.delta) return delta(ex, r, snapshot, variant, retried, checked)
    if (rep.notModified !== null && isNotModified(r.ifNoneMatch, r.ifModifiedSince, rep.etag, variant.lastModifiedHttp, variant.lastModified)) {
      writeNotModified(ex, rep.notModified, r.close)
      polled(ex, r, 304, rep.etag, variant.lastModified)
      return
    }
    // A tag from another node that switched first: a node hop must not cost a download. A served
    // copy is the newest version the store recorded (served-copy.ts): nothing fresher to wait for.
    if (!checked && r.ifNoneMatch !== '' && rep.notModified !== null && feeds.fresher !== undefined && snapshot.restored !== true) {
      return feeds.fresher(r.workspaceId, r.feedId, snapshot).then((s) => ex.aborted ? undefined : answer(ex, r, s, retried, true))
    }
    polled(ex, r, rep.status, rep.status === 200 ? rep.etag : null, variant.lastModified)
    if (r.head) {
      writeHead(ex, rep, r.close)
      return
    }
    counters.bytes(r.gzip, rep.length)
    return writeBody(ex, rep, r.close)
  }

  const history = deps.deltas !== undefined && 'history' in deps.deltas ? deps.deltas.history : null
  const rendered = deps.deltas !== undefined && 'history' in deps.deltas ? deps.deltas.rendered ?? noop : noop
  const forwardDelta = deps.deltas !== undefined && 'forward' in deps.deltas ? deps.deltas.forward : null
  /** The request being answered within uWS's callback, for a forward (null outside it). */
  let syncRequest: HttpRequest | null = null
  const delta = (ex: Exchange, r: FeedRequest, snapshot: FeedSnapshot, variant: Variant, retried: boolean, checked: boolean): void | Promise<void> => {
    // A served copy has no networks: an answer format waits for the build; a `since` answers
    // full from the copy (X-Feed-Delta: full), or 304 when it names the copy's own tag.
    const restored = snapshot.restored === true
    if (restored && r.query!.answer !== null) return built(ex, r)
    const req = syncRequest
    const deltaDeps: DeltaDeps = {
      history: restored ? null : history,
      // Past an await `req` is gone: such a request (rare: a key or list loaded a moment ago) answers full.
      elsewhere: restored || forwardDelta === null || req === null ? null : () => forwardDelta(ex, req),
      rendered,
      polled: (status, etag, since) => { polled(ex, r, status, etag, since) },
      sent: counters.bytes,
    }
    const fresher = checked || restored || feeds.fresher === undefined
      ? null
      : () => feeds.fresher!(r.workspaceId, r.feedId, snapshot).then((s) => ex.aborted ? undefined : answer(ex, r, s, retried, true))
    return answerDelta(ex, r, r.query!, snapshot, variant, deltaDeps, fresher)
  }

  /** The feed's own build, not its served copy (which lacks the variant or the networks asked for). */
  const built = async (ex: Exchange, r: FeedRequest): Promise<void> => {
    counters.waits.inc()
    const snapshot = await feeds.awaitSnapshot(r.workspaceId, r.feedId, Date.now(), true)
    if (ex.aborted) return
    await answer(ex, r, snapshot)
  }

  const wait = async (ex: Exchange, r: FeedRequest): Promise<void> => {
    counters.waits.inc()
    const snapshot = await feeds.awaitSnapshot(r.workspaceId, r.feedId, Date.now())
    if (ex.aborted) return
    await answer(ex, r, snapshot)
  }

  const serve = (ex: Exchange, r: FeedRequest, feedId: FeedId, defaults: ListDefaults | null): void | Promise<void> => {
    r.feedId = r.listRef = feedId
    const query = parseFeedQuery(r.rawQuery)
    r.query = query
    r.client = query.client
    r.variant = resolveVariant(query, defaults)
    // One wall-clock read per turn of the event loop, not per poll (turn-clock.ts) — except near
    // the snapshot's lapse, where the turn's reading may be a turn late: the poll's own clock
    // decides, so a lapsed rule is never served (DECISIONS §5).
    r.at = turnWallClock()
    let snapshot = feeds.getSnapshot(r.workspaceId, feedId, r.at)
    if (snapshot !== null && snapshot.expiresAt - r.at < TURN_CLOCK_SLACK_MS) {
      r.at = Date.now()
      snapshot = feeds.getSnapshot(r.workspaceId, feedId, r.at)
    }
    return snapshot === null ? wait(ex, r) : answer(ex, r, snapshot)
  }

  // One object for every request answered within uWS's callback (the steady state of a poll):
  // no allocation per poll. An answer that goes async keeps it; the next request gets a new one.
  let scratch = emptyRequest()

  // No closure is created per request: under tsx (keepNames) every named closure costs a
  // defineProperty call, and in any build it is garbage a 304 does not need.
  return (ex, req, head, isList) => {
    const authorization = req.getHeader(AUTHORIZATION)
    const decision = ctx.auth.authenticate(authorization, 'feeds:read', 'feeds')
    if (!decision.ok && decision.unknownKey !== true) throw decision.error
    // Everything the answer needs is copied out of `req` now: it is invalid after any await.
    // If-Modified-Since is not read beside an If-None-Match, which overrides it (RFC 9110 §13.1.3).
    const ifNoneMatch = req.getHeader(IF_NONE_MATCH)
    const r = scratch
    r.head = head
    r.workspaceId = decision.ok ? decision.principal.workspace.id : ''
    r.rawQuery = req.getQuery() ?? ''
    r.feedId = WORKSPACE_FEED
    r.variant = null
    r.query = null
    r.gzip = prefersGzip(req.getHeader(ACCEPT_ENCODING))
    r.ifNoneMatch = ifNoneMatch
    r.ifModifiedSince = ifNoneMatch === '' ? req.getHeader(IF_MODIFIED_SINCE) : ''
    r.close = closesAfter(req.getHeader(CONNECTION))
    r.keyId = decision.ok ? decision.principal.key.id : ''
    r.address = consumers === null ? '' : consumers.addresses.of(ex.res, req)
    r.userAgent = consumers === null ? '' : req.getHeader(USER_AGENT)
    r.client = ''
    // Set once the list resolves (serve); until then the request counts for no consumer.
    r.listRef = isList ? '' : WORKSPACE_FEED
    r.at = 0
    const listParam = isList ? req.getParameter(0) ?? '' : null
    // A front-end thread keeps no delta history: a delta it cannot answer itself (anything but a
    // 304 or a full answer) is forwarded to the main thread, with `req`, valid only until return.
    syncRequest = forwardDelta !== null ? req : null
    try {
      const pending = !decision.ok ? afterRecheck(ex, r, authorization, listParam) : consumers === null ? route(ex, r, listParam) : tracked(ex, r, listParam)
      // The continuations of a pending answer hold `r`: it is theirs now.
      if (pending !== undefined) scratch = emptyRequest()
      return pending
    } finally {
      syncRequest = null
    }
  }

  /** route(), counting an answer that is an error for the consumer too. */
  function tracked (ex: Exchange, r: FeedRequest, listParam: string | null): void | Promise<void> {
    try {
      const pending = route(ex, r, listParam)
      return pending === undefined ? undefined : pending.catch((e: unknown) => failed(ex, r, e))
    } catch (e) {
      failed(ex, r, e)
    }
  }

  function failed (ex: Exchange, r: FeedRequest, e: unknown): never {
    polled(ex, r, toThreatfeedError(e).status, null, 0)
    throw e
  }

  /** A key this node does not hold yet (created a moment ago elsewhere): decided again after a reload. */
  async function afterRecheck (ex: Exchange, r: FeedRequest, authorization: string, listParam: string | null): Promise<void> {
    const decision = await ctx.auth.authenticateFresh(authorization, 'feeds:read', 'feeds')
    if (!decision.ok) throw decision.error
    if (ex.aborted) return
    r.workspaceId = decision.principal.workspace.id
    r.keyId = decision.principal.key.id
    await (consumers === null ? route(ex, r, listParam) : tracked(ex, r, listParam))
  }

  function route (ex: Exchange, r: FeedRequest, listParam: string | null): void | Promise<void> {
    if (listParam === null) return serve(ex, r, WORKSPACE_FEED, null)
    const ref = decodeListRef(listParam)
    if (ref === null || ref === '') throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
    if (lists.loaded) {
      const list = lists.resolve(r.workspaceId, ref)
      return serve(ex, r, list.id, list.defaults)
    }
    // Only right after start-up, before the first list load finished.
    return lists.resolveLoaded(r.workspaceId, ref).then((list) => ex.aborted ? undefined : serve(ex, r, list.id, list.defaults))
  }
}

function noop (): void {}

function missingVariant (r: FeedRequest): ThreatfeedError {
  // A snapshot holds every variant (SPEC: all formats, families, actions and checksum), so this
  // is a bug on the building side, not something the caller can fix.
  return new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error(`snapshot ${r.workspaceId}/${r.feedId} has no variant ${r.variant?.key}`) })
}

interface FeedCounters {
  readonly waits: { inc: () => void }
  bytes (gzip: boolean, n: number): void
}

/**
 * Operator metrics beyond the router's requests-by-route-and-status (which already counts 200 and
 * 304 per feed route): body bytes sent per encoding (what gzip saves), and polls that had to wait
 * for a snapshot build (a cold or expired feed). Registered once per registry.
 */
function feedCounters (ctx: HttpContext): FeedCounters {
  const registry = ctx.metrics.registry
  const bytesName = 'threatfeed_feed_body_bytes_total'
  const waitsName = 'threatfeed_feed_snapshot_waits_total'
  const bytes = registry.getSingleMetric(bytesName) as ReturnType<typeof ctx.metrics.counter> | undefined ??
    ctx.metrics.counter(bytesName, 'Feed body bytes sent, by content encoding', ['encoding'])
  const waits = registry.getSingleMetric(waitsName) as ReturnType<typeof ctx.metrics.counter> | undefined ??
    ctx.metrics.counter(waitsName, 'Feed requests that waited for a snapshot build')
  const gzipBytes = bytes.labels('gzip')
  const identityBytes = bytes.labels('identity')
  return {
    waits,
    bytes: (gzip, n) => { (gzip ? gzipBytes : identityBytes).inc(n) },
  }
}
