/**
 * What a feed consumer's record says about it now (issue 20): stale or fresh, current or behind.
 * One implementation for the server (log lines and /metrics gauges) and for
 * `threatfeed consumers ls`, both reading the records and feed versions of the store.
 */
import { medianInterval } from '../store/consumer-record.js'
import { FEED_VERSION_HISTORY, type FeedConsumer, type FeedKey, type FeedVersion, type FeedVersionRecord, type Store } from '../store/types.js'

/** Consumers unseen this long are forgotten. */
export const CONSUMER_FORGET_MS = 30 * 86_400_000
/** THREATFEED_CONSUMER_STALE's default. */
export const DEFAULT_CONSUMER_STALE_MS = 15 * 60_000
/** A consumer whose last this many polls got 4xx or 5xx is stale however recently it polled. */
const FAILED_POLLS = 3
/** A consumer is silent after this many of its own median poll intervals without a poll. */
const SILENT_INTERVALS = 3

export type StaleReason = 'silent' | 'failing'

export interface Behind {
  /** False when the consumer holds the current version. */
  readonly behind: boolean
  /** How many versions it missed; null when it is behind by more than the record's history holds. */
  readonly versions: number | null
}

export interface ConsumerStatus {
  readonly stale: boolean
  readonly reason: StaleReason | null
  /** Silence longer than this makes the consumer stale: the larger of the setting and three median intervals. */
  readonly staleAfterMs: number
  /** The median of its poll intervals (within 25 %), null before its second poll. */
  readonly medianIntervalMs: number | null
  /** 3600 s over the median interval, rounded; null before the second poll. */
  readonly pollsPerHour: number | null
  /** Null when unknown: it never got a 200 or 304, or its feed has no version record. */
  readonly behind: Behind | null
}

/** The feed-version record a consumer's ETag belongs to. */
export function versionKeyOf (c: FeedConsumer): FeedKey {
  return { workspaceId: c.workspaceId, listId: c.listId, family: c.family, action: c.action }
}

/**
 * How far the version a consumer holds (its ETag and that version's Last-Modified, in ms) is
 * behind the feed's current version. Last-Modified has whole seconds, so versions are compared at
 * that precision; each version that started after the consumer's is one it missed, counted in the
 * record's history (the last FEED_VERSION_HISTORY runs). Behind by more than that history holds,
 * the count is null ("at least that many").
 *
 * @example
 *   versionsBehind({ etag: '"plain.v4…"', since: 1700000000000 }, { contentHash: 'h', since: 1700000100000, history: [] }) // { behind: true, versions: 1 }
 *   versionsBehind({ etag: '"plain.v4…"', since: 1700000000000 }, { contentHash: 'h', since: 1700000100000 }) // { behind: true, versions: null }
 */
export function versionsBehind (held: { readonly etag: string, readonly since: number } | null, current: FeedVersion | Pick<FeedVersionRecord, 'contentHash' | 'since' | 'history'> | null): Behind | null {
  if (held === null || current === null) return null
  const newer = (v: FeedVersion): boolean => Math.floor(v.since / 1000) * 1000 > held.since
  if (!newer(current)) return { behind: false, versions: 0 }
  // Without the record's history (a bare version), how many is not known.
  if (!('history' in current)) return { behind: true, versions: null }
  const history = current.history
  let versions = 1
  for (const v of history) {
    if (!newer(v)) return { behind: true, versions }
    versions++
  }
  // Every kept run is newer than the consumer's: it missed more than the history holds.
  return { behind: true, versions: history.length < FEED_VERSION_HISTORY ? versions : null }
}

/**
 * The consumer's status at `now` under THREATFEED_CONSUMER_STALE (`staleMs`): stale when it has
 * not polled for the larger of `staleMs` and three of its median intervals (an hourly EDL is
 * not stale after 15 minutes), or when its last three polls failed (4xx or 5xx).
 */
export function consumerStatus (c: FeedConsumer, current: FeedVersion | null, now: number, staleMs: number): ConsumerStatus {
  const median = medianInterval(c.intervals)
  const staleAfterMs = Math.max(staleMs, median === null ? 0 : SILENT_INTERVALS * median)
  const lastOk = c.held?.at ?? -Infinity
  const failing = c.recentFails.length >= FAILED_POLLS && c.recentFails[FAILED_POLLS - 1]! > lastOk
  const silent = now - c.lastSeen > staleAfterMs
  return {
    stale: silent || failing,
    // Failing polls say more than the silence that may follow them.
    reason: failing ? 'failing' : silent ? 'silent' : null,
    staleAfterMs,
    medianIntervalMs: median,
    pollsPerHour: median === null ? null : Math.round(3_600_000 / median),
    behind: versionsBehind(c.held, current),
  }
}

/** The id of the feed-version record a consumer's ETag belongs to, as currentVersions keys it. */
export function versionId (c: FeedConsumer): string {
  return `${c.workspaceId} ${c.listId} ${c.family} ${c.action}`
}

/** The current version of every feed the consumers hold a version of, one read per feed. */
export async function currentVersions (store: Store, consumers: readonly FeedConsumer[]): Promise<Map<string, FeedVersion | null>> {
  const out = new Map<string, FeedVersion | null>()
  for (const c of consumers) {
    if (c.held === null) continue
    const id = versionId(c)
    if (!out.has(id)) out.set(id, await store.feedVersions.record(versionKeyOf(c)))
  }
  return out
}

/**
 * One consumer as the admin API (GET /v1/admin/consumers) and `consumers ls --json` both show
 * it: the same fields, spelled as every JSON answer of threatfeed is (snake_case), so a script
 * written against one reads the other.
 */
export interface ConsumerView {
  readonly id: string
  readonly workspace: string
  readonly key_id: string
  readonly address: string
  readonly user_agent: string
  /** The `?client=` name; null when none was given. */
  readonly client: string | null
  /** A list id, or '*' for the workspace feed. */
  readonly list: string
  /** The list's name; null for the workspace feed and for a list deleted since. */
  readonly list_name: string | null
  /** The variant key polled last (`format|family|action|checksum[|shard/of]`); '' when none was answered. */
  readonly variant: string
  readonly stale: boolean
  readonly stale_reason: StaleReason | null
  readonly first_seen: string
  readonly last_seen: string
  readonly last_status: number
  readonly last_200: string | null
  readonly polls_per_hour: number | null
  readonly median_interval_seconds: number | null
  /** Null when unknown (no 200 or 304 yet, or no version record). */
  readonly behind: boolean | null
  readonly versions_behind: number | null
  readonly polls: { readonly total: number, readonly ok: number, readonly not_modified: number, readonly client_errors: number, readonly server_errors: number }
}

const isoSeconds = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')

export function consumerView (c: FeedConsumer, s: ConsumerStatus, listName: string | null): ConsumerView {
  return {
    id: c.id,
    workspace: c.workspaceId,
    key_id: c.keyId,
    address: c.address,
    user_agent: c.userAgent,
    client: c.client === '' ? null : c.client,
    list: c.listId,
    list_name: listName,
    variant: c.variant,
    stale: s.stale,
    stale_reason: s.reason,
    first_seen: isoSeconds(c.firstSeen),
    last_seen: isoSeconds(c.lastSeen),
    last_status: c.last.status,
    last_200: c.last200At === null ? null : isoSeconds(c.last200At),
    polls_per_hour: s.pollsPerHour,
    median_interval_seconds: s.medianIntervalMs === null ? null : s.medianIntervalMs / 1000,
    behind: s.behind?.behind ?? null,
    versions_behind: s.behind?.versions ?? null,
    polls: { total: c.polls, ok: c.ok, not_modified: c.notModified, client_errors: c.clientErrors, server_errors: c.serverErrors },
  }
}

/**
 * The consumers of a workspace (or of all, `workspaceId` undefined) seen in the last 30 days,
 * with their status at `now`, in one order: stale first, then behind (most versions first), then
 * the most recently seen, then by id.
 */
export async function consumerViews (store: Store, workspaceId: string | undefined, now: number, staleMs: number, keep: (c: FeedConsumer) => boolean = () => true): Promise<ConsumerView[]> {
  // Records a server has not forgotten yet (none ran for a while) are left out all the same.
  const consumers = (await store.consumers.list(workspaceId)).filter((c) => now - c.lastSeen <= CONSUMER_FORGET_MS && keep(c))
  const versions = await currentVersions(store, consumers)
  const names = new Map<string, string | null>()
  for (const c of consumers) {
    if (c.listId === '*' || names.has(c.listId)) continue
    names.set(c.listId, (await store.lists.get(c.listId))?.name ?? null)
  }
  const views = consumers.map((c) => consumerView(c, consumerStatus(c, versions.get(versionId(c)) ?? null, now, staleMs), c.listId === '*' ? null : names.get(c.listId) ?? null))
  const behind = (v: ConsumerView): number => v.behind === true ? Math.max(1, v.versions_behind ?? 1) : 0
  return views.sort((a, b) => Number(b.stale) - Number(a.stale) || behind(b) - behind(a) || b.last_seen.localeCompare(a.last_seen) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}
