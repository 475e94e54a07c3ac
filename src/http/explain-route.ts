/**
 * GET and HEAD /v1/threat/explain?ip=ADDR[&list=NAME|UUID]: why an address is, or is not, in the
 * workspace's feeds (src/feed/explain.ts). Not under /v1/threat/feeds/, where it would shadow a
 * list named `explain`.
 *
 * It shows rule metadata (rule_refs, labels, reasons) that a fleet's shared feed key must not
 * reveal, so it takes a key with the `rules:read` scope: `feeds:read` alone is a 403. Errors use
 * the feed error body (SPEC 2.9), as on the feed routes, and authentication comes before the
 * parameters, so nothing about a list leaks to a caller without access.
 *
 * The answer comes from the snapshots the feed routes serve and a few point reads of the rule
 * store; nothing here touches a poll's path. The list asked for (`list=`) is built when it has no
 * snapshot, as a poll would; explaining every feed builds none: a feed nobody polled lately says
 * `not_built` (feed/explain.ts), so one request cannot make the server build every list.
 */
import { ThreatfeedError } from '../errors.js'
import { explainAddress, type Explanation, type ExplainSources } from '../feed/explain.js'
import { parseExplainAddress } from '../feed/explain-lookup.js'
import type { ExplainGeo } from '../feed/explain-geo.js'
import type { GeoIndex } from '../geo/geo-index.js'
import type { GeoPaths } from '../geo/load.js'
import { GeoLookup } from '../geo/lookup.js'
import { WORKSPACE_FEED, type FeedId, type FeedSnapshot } from '../feed/snapshot-types.js'
import type { AccessList, Store, Workspace } from '../store/types.js'
import type { HttpContext, RouteModule } from './app.js'
import type { FeedSource } from './feed-routes.js'
import { decodeListRef, type ListDirectory } from './list-resolve.js'
import { sendJson, type Exchange } from './respond.js'

export const EXPLAIN_PATH = '/v1/threat/explain'

export interface ExplainRouteDeps {
  /** peekSnapshot: the current snapshot, if any, without building it or counting as a poll. */
  readonly feeds: FeedSource & { peekSnapshot?: (workspaceId: string, feedId: FeedId, now: number) => FeedSnapshot | null }
  readonly lists: ListDirectory
  /** The geo databases in use now (they can be reloaded). */
  readonly geo: () => ExplainGeo
  /** Publish guards' holds (feed/explain.ts FeedHold). */
  readonly heldBy?: ExplainSources['heldBy']
}

const PARAMETERS = ['ip', 'list'] as const

/** `ip` and `list` from the query; unknown parameters are ignored, a repeated one is a 400. */
export function parseExplainQuery (raw: string): { ip: string, list: string | null } {
  const q = new URLSearchParams(raw)
  for (const p of PARAMETERS) {
    if (q.getAll(p).length > 1) throw new ThreatfeedError('TF_ERR_INVALID_ARGUMENT', [`repeated parameter: ${p}`], { details: { parameter: p } })
  }
  const list = q.get('list')
  return { ip: q.get('ip') ?? '', list: list === null ? null : decodeListRef(list) ?? '' }
}

/**
 * @example
 *   startHttpServer(ctx, [feedRoutes({ feeds, lists }), explainRoutes({ feeds, lists, geo: () => ({ index, lookup }) })])
 */
export function explainRoutes (deps: ExplainRouteDeps): RouteModule {
  return (router, ctx) => {
    router.on('get', EXPLAIN_PATH, 'explain', 'feed', (ex, req) => {
      const authorization = req.getHeader('authorization')
      const query = req.getQuery() ?? ''
      return answer(ex, ctx, deps, authorization, query)
    })
    router.onlyAllow(EXPLAIN_PATH, 'explain', 'feed', 'GET, HEAD')
  }
}

async function answer (ex: Exchange, ctx: HttpContext, deps: ExplainRouteDeps, authorization: string, rawQuery: string): Promise<void> {
  const decision = await ctx.auth.authenticateFresh(authorization, 'rules:read', 'feeds')
  if (!decision.ok) throw decision.error
  // A key explains its own workspace: one named here is refused rather than silently not used
  // (issue 35), which would answer for another workspace than the caller meant.
  if (new URLSearchParams(rawQuery).has('workspace')) {
    throw new ThreatfeedError('TF_ERR_INVALID_ARGUMENT', ['workspace is not a parameter of /v1/threat/explain: a key explains its own workspace (an admin key names one at /v1/admin/explain)'], { details: { parameter: 'workspace' } })
  }
  const explanation = await explainIn(ctx.store, deps, decision.principal.workspace, parseExplainQuery(rawQuery))
  sendJson(ex, 200, explanation, NO_STORE)
}

/**
 * The explanation of `query.ip` in `workspace`'s feeds: this route's answer for the key's own
 * workspace, and /v1/admin/explain's for the workspace an admin key names (admin-explain.ts).
 */
export async function explainIn (store: Store, deps: ExplainRouteDeps, workspace: Workspace, query: { ip: string, list: string | null }): Promise<Explanation> {
  const address = parseExplainAddress(query.ip)
  let feeds: Array<AccessList | null>
  if (query.list !== null) {
    if (query.list === '') throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
    feeds = [await deps.lists.resolveLoaded(workspace.id, query.list)]
  } else {
    const lists = await store.lists.list(workspace.id)
    feeds = [null, ...lists.sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id))]
  }
  const sources: ExplainSources = {
    rules: store.rules,
    geo: deps.geo(),
    snapshotOf: async (list) => {
      const id = list?.id ?? WORKSPACE_FEED
      const now = Date.now()
      if (query.list === null && deps.feeds.peekSnapshot !== undefined) return deps.feeds.peekSnapshot(workspace.id, id, now)
      const s = deps.feeds.getSnapshot(workspace.id, id, now)
      // A served copy (a restart) has no networks to look an address up in: the build has.
      return s !== null && s.restored !== true ? s : await deps.feeds.awaitSnapshot(workspace.id, id, now, true)
    },
    ...(deps.heldBy !== undefined ? { heldBy: deps.heldBy } : {}),
  }
  return await explainAddress(sources, workspace, feeds, address, Date.now())
}

const lookups = new WeakMap<GeoIndex, GeoLookup | null>()

/**
 * The geo databases for explain: the index in use and a point reader of the same files, opened
 * once per index. Opening validates the files (~70 ms for the default databases), so the server
 * calls this when it loads an index, off any request. Files that cannot be opened (replaced since
 * the index was loaded) leave geo rules unexplained.
 */
export function explainGeoOf (paths: GeoPaths, index: GeoIndex): ExplainGeo {
  let lookup = lookups.get(index)
  if (lookup === undefined) {
    try {
      lookup = GeoLookup.open(paths)
    } catch {
      lookup = null
    }
    lookups.set(index, lookup)
  }
  return { index, lookup }
}

/** An explanation is about this instant and shows rule metadata: no cache keeps it. */
const NO_STORE = [['Cache-Control', 'no-store']] as const
