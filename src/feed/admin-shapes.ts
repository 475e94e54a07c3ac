/**
 * The admin API's JSON shapes (docs/admin-api.md): the store's records in snake_case with ISO
 * times, and the guards both ways. One place, so the routes, the CLI's --json and the OpenAPI
 * document agree.
 */
import { heldGuardsOf } from './guards.js'
import { FEED_ACTIONS, type AccessList, type ApiKey, type FeedVersionStore, type GuardSettings, type ListDefaults, type PublishState, type Workspace } from '../store/types.js'

const iso = (ms: number | null | undefined): string | null => ms === null || ms === undefined ? null : new Date(ms).toISOString()

/** The admin body's guards (src/json/admin-schemas.ts `admin-guards`). */
export interface GuardsBody {
  min_entries?: number
  max_shrink_pct?: number
  max_grow_pct?: number
  reject_special?: boolean
  mode?: 'hold' | 'drop'
  min_prefix_v4?: number
  min_prefix_v6?: number
}

const GUARD_FIELDS = [
  ['min_entries', 'minEntries'],
  ['max_shrink_pct', 'maxShrinkPct'],
  ['max_grow_pct', 'maxGrowPct'],
  ['reject_special', 'rejectSpecial'],
  ['mode', 'mode'],
  ['min_prefix_v4', 'minPrefixV4'],
  ['min_prefix_v6', 'minPrefixV6'],
] as const

export function guardsFromBody (b: GuardsBody): GuardSettings {
  const g: Record<string, unknown> = {}
  for (const [from, to] of GUARD_FIELDS) if (b[from] !== undefined) g[to] = b[from]
  return g as GuardSettings
}

/** A list's defaults: the body's field and the stored one (as GUARD_FIELDS for guards). */
const DEFAULT_FIELDS = [
  ['format', 'format'],
  ['family', 'family'],
  ['action', 'action'],
  ['max_entries', 'maxEntries'],
  ['confidence', 'confidence'],
  ['severity', 'severity'],
  ['shards', 'shards'],
] as const

export type DefaultsBody = { [K in (typeof DEFAULT_FIELDS)[number] as K[0]]?: ListDefaults[K[1]] }

/** The defaults a body sets, over `base`. */
export function defaultsFromBody (b: DefaultsBody, base: ListDefaults): ListDefaults {
  const d: Record<string, unknown> = { ...base }
  for (const [from, to] of DEFAULT_FIELDS) if (b[from] !== undefined) d[to] = b[from]
  return d as ListDefaults
}

export function showGuards (g: GuardSettings | undefined): Record<string, unknown> | null {
  if (g === undefined) return null
  const out: Record<string, unknown> = {}
  for (const [to, from] of GUARD_FIELDS) if (g[from] !== undefined) out[to] = g[from]
  out.accepted = g.accepted ?? null
  return out
}

/**
 * When the content a feed serves last changed (its Last-Modified, the latest over families and
 * actions, as every node records it), or null when it never published: never built, or held
 * before its first publish.
 */
export async function lastModifiedOf (versions: Pick<FeedVersionStore, 'get'>, workspaceId: string, listId: string, state: PublishState | undefined | null): Promise<number | null> {
  if (state?.held != null && state.publishedDigest === null) return null
  let last: number | null = null
  for (const family of ['v4', 'v6'] as const) {
    for (const action of FEED_ACTIONS) {
      const v = await versions.get({ workspaceId, listId, family, action })
      if (v !== null && (last === null || v.since > last)) last = v.since
    }
  }
  return last
}

/**
 * A feed's publish state: when what it serves last changed (null: never published), the build
 * published last and the one a guard holds, if any, with its diff against the published one.
 */
export function showPublish (state: PublishState | undefined, lastModified: number | null): Record<string, unknown> {
  const held = state?.held ?? null
  return {
    last_modified: iso(lastModified),
    published_digest: state?.publishedDigest ?? null,
    held: held === null
      ? null
      : {
          digest: held.digest,
          guards: heldGuardsOf(held.guards),
          since: iso(held.since),
          diff: Object.fromEntries(Object.entries(held.diff).map(([action, d]) => [action, { published: d.published, held: d.held, added: d.added, removed: d.removed, added_sample: d.addedSample, removed_sample: d.removedSample }])),
        },
  }
}

/**
 * `publish`: the workspace feed's publish state (null: none recorded), shown where the route reads
 * it (one workspace); undefined leaves the field out.
 */
export function showWorkspace (w: Workspace, publish?: { state: PublishState | null, lastModified: number | null }): Record<string, unknown> {
  const out: Record<string, unknown> = { id: w.id, name: w.name, subscription: w.subscription, created_at: iso(w.createdAt), guards: showGuards(w.feedGuards) }
  if (publish !== undefined) out.publish = showPublish(publish.state ?? undefined, publish.lastModified)
  return out
}

export function showKey (k: ApiKey): Record<string, unknown> {
  const out: Record<string, unknown> = { id: k.id, workspace: k.workspaceId, scopes: k.scopes, created_at: iso(k.createdAt), revoked_at: iso(k.revokedAt) }
  // Only when set: the default (the workspace feed's block networks) says nothing.
  if (k.bouncer !== undefined) out.bouncer = { list: k.bouncer.listId, action: k.bouncer.action }
  return out
}

export function showList (l: AccessList, lastModified: number | null): Record<string, unknown> {
  const d = l.defaults
  const defaults: Record<string, unknown> = {}
  for (const [to, from] of DEFAULT_FIELDS) if (d[from] !== undefined) defaults[to] = d[from]
  return {
    id: l.id,
    workspace: l.workspaceId,
    name: l.name,
    description: l.description,
    defaults,
    guards: showGuards(d.guards),
    selector: l.selector,
    created_at: iso(l.createdAt),
    updated_at: iso(l.updatedAt),
    publish: showPublish(l.publishState, lastModified),
  }
}
