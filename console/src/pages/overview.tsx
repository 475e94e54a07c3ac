/** Every list of the workspace (and the workspace feed): size per family and action, bytes per format, last change, guard state, a sparkline. */
import { useState } from 'preact/hooks'
import { call, get } from '../api.js'
import { Sparkline } from '../components/chart.js'
import { HeldBuild } from '../components/held.js'
import { Status, useLoad } from '../load.js'
import { href } from '../route.js'
import type { History, List, Page, Publish, WorkspaceDetail } from '../types.js'
import { describeHeldGuards, effectiveDefaults, formatBytes, formatTime, lastPoint, parseVariant } from '../variants.js'

export interface FeedSummary {
  /** `family action` → entries, of the list's default format, whole (unsharded, no checksum) variants. */
  entries: Map<string, number>
  /** format → bytes of its default family and action. */
  bytes: Map<string, number>
  /** The default variant's history, for the sparkline. */
  trend: History | undefined
}

export function summarize (histories: readonly History[], defaults: { format: string, family: string, action: string } | null): FeedSummary {
  const whole = histories.map((h) => ({ h, v: parseVariant(h.variant) })).filter(({ v }) => v.shard === null && !v.checksum)
  const format = defaults?.format ?? whole[0]?.v.format ?? 'plain'
  const entries = new Map<string, number>()
  const bytes = new Map<string, number>()
  for (const { h, v } of whole) {
    const last = lastPoint(h.points)
    if (last === undefined) continue
    if (v.format === format) entries.set(`${v.family} ${v.action}`, last.entries)
    if (defaults === null || (v.family === defaults.family && v.action === defaults.action)) bytes.set(v.format, Math.max(bytes.get(v.format) ?? 0, last.bytes))
  }
  const trend = whole.find(({ v }) => defaults !== null && v.format === defaults.format && v.family === defaults.family && v.action === defaults.action)?.h ??
    whole.find(({ v }) => v.format === format)?.h
  return { entries, bytes, trend }
}

/**
 * A list's, or the workspace feed's (its workspace's `guards` and `publish`): held, published or
 * not yet, from the server's publish state (last_modified null: never published).
 */
export function guardState (list: Pick<List, 'guards' | 'publish'>): string {
  if (list.publish?.held) return `held (${describeHeldGuards(list.publish.held.guards)})`
  const guarded = list.guards === null || list.guards === undefined ? 'no guards' : `guarded, ${list.guards.mode ?? 'hold'} mode`
  if (list.publish?.last_modified === null || list.publish === undefined) return `not published yet (built when first polled); ${guarded}`
  return `published; ${guarded}`
}

/** When what the feed serves last changed (its Last-Modified), not when it was last sampled. */
export function lastChangeOf (publish: Publish | undefined): string {
  if (publish === undefined || publish.last_modified === null) return 'never published'
  return formatTime(publish.last_modified)
}

function Pairs ({ map, render }: { map: Map<string, number>, render?: (n: number) => string }) {
  if (map.size === 0) return <span class="muted">—</span>
  return (
    <ul class="pairs">
      {[...map].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => <li key={k}><span class="muted">{k}</span> {render === undefined ? n.toLocaleString('en') : render(n)}</li>)}
    </ul>
  )
}

export function Overview ({ workspace }: { workspace: string }) {
  const [note, setNote] = useState<string | null>(null)
  const [error, setError] = useState<string | null>(null)
  const loaded = useLoad(async () => {
    const [lists, history, ws] = await Promise.all([
      get<Page<List>>('/v1/admin/lists', { workspace }),
      get<Page<History>>('/v1/admin/feed-versions', { workspace }),
      get<WorkspaceDetail>(`/v1/admin/workspaces/${encodeURIComponent(workspace)}`),
    ])
    return { lists: lists.items, history: history.items, ws }
  }, [workspace])
  const held = loaded.data?.ws.publish?.held ?? null
  // The workspace feed's guards are the workspace's; its held build is accepted by digest, as a list's.
  const accept = async (digest: string): Promise<void> => {
    setNote(null)
    setError(null)
    try {
      await call('POST', `/v1/admin/workspaces/${encodeURIComponent(workspace)}/accept`, { digest })
      setNote('Accepted: the workspace feed\'s held build is published at the next rebuild.')
      loaded.reload()
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e))
    }
  }
  const rows = loaded.data === null
    ? []
    : [
        { id: '*', name: 'workspace feed', list: null as List | null, s: summarize(loaded.data.history.filter((h) => h.list === '*'), null) },
        ...loaded.data.lists.map((l) => ({ id: l.id, name: l.name, list: l as List | null, s: summarize(loaded.data!.history.filter((h) => h.list === l.id), effectiveDefaults(l.defaults)) })),
      ]
  return (
    <section>
      <h1>Overview</h1>
      <Status loaded={loaded} />
      {loaded.data !== null && (
        <table class="stack" data-testid="overview">
          <thead><tr><th>List</th><th>Entries (family, action)</th><th>Bytes per format</th><th>Last change</th><th>Guards</th><th>Entries over time</th></tr></thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.id} data-list={r.id}>
                <td data-label="List">{r.list === null ? <span>{r.name}</span> : <a href={href('lists', r.id)}>{r.name}</a>}</td>
                <td data-label="Entries"><Pairs map={r.s.entries} /></td>
                <td data-label="Bytes"><Pairs map={r.s.bytes} render={formatBytes} /></td>
                <td data-label="Last change" data-testid="last-change">{lastChangeOf(r.list === null ? loaded.data!.ws.publish : r.list.publish)}</td>
                {r.list !== null
                  ? <td data-label="Guards" class={r.list.publish?.held ? 'held' : ''}>{guardState(r.list)}</td>
                  : (
                    <td data-label="Guards" class={held !== null ? 'held' : ''}>
                      {guardState(loaded.data!.ws)}
                      {held !== null && <><HeldBuild held={held} /><button type="button" onClick={() => { void accept(held.digest) }}>Accept held build</button></>}
                    </td>
                    )}
                <td data-label="Trend"><Sparkline points={r.s.trend?.points ?? []} label={`entries of ${r.name} over time`} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {note !== null && <p role="status">{note}</p>}
      {error !== null && <p class="error" role="alert">{error}</p>}
    </section>
  )
}
