/** Who polls which feed, stale and behind first, filtered by list. */
import { get } from '../api.js'
import { Status, useLoad } from '../load.js'
import { href } from '../route.js'
import type { Consumer, List, Page } from '../types.js'
import { describeVariant, formatTime } from '../variants.js'

function behind (c: Consumer): number {
  return c.behind === true ? Math.max(1, c.versions_behind ?? 1) : 0
}

/** Stale first, then behind (most versions first), then the most recently seen: the API's order, kept if it changes. */
export function orderConsumers (items: readonly Consumer[]): Consumer[] {
  return [...items].sort((a, b) =>
    Number(b.stale) - Number(a.stale) || behind(b) - behind(a) || b.last_seen.localeCompare(a.last_seen))
}

function state (c: Consumer): string {
  if (c.stale) return c.stale_reason !== null ? `stale (${c.stale_reason})` : 'stale'
  if (c.behind === true) return 'behind'
  return c.behind === null ? 'fresh (version unknown)' : 'fresh'
}

export function Consumers ({ workspace, list }: { workspace: string, list: string | null }) {
  const lists = useLoad(() => get<Page<List>>('/v1/admin/lists', { workspace }), [workspace])
  const loaded = useLoad(() => get<Page<Consumer>>('/v1/admin/consumers', { workspace, list }), [workspace, list])
  const names = new Map((lists.data?.items ?? []).map((l) => [l.id, l.name]))
  return (
    <section>
      <h1>Consumers</h1>
      <form class="inline" onSubmit={(e) => { e.preventDefault() }}>
        <label for="consumer-list">List</label>
        <select id="consumer-list" value={list ?? ''} onChange={(e) => { location.hash = href('consumers', undefined, e.currentTarget.value === '' ? undefined : { list: e.currentTarget.value }) }}>
          <option value="">every list</option>
          {(lists.data?.items ?? []).map((l) => <option key={l.id} value={l.id}>{l.name}</option>)}
        </select>
      </form>
      <Status loaded={loaded} />
      {loaded.data !== null && (loaded.data.items.length === 0
        ? <p class="muted">No consumer has polled{list === null ? '' : ' this list'} yet.</p>
        : (
          <table class="stack" data-testid="consumers">
            <thead><tr><th>State</th><th>Address</th><th>Client</th><th>List</th><th>Variant</th><th>Last seen</th><th>Status</th><th>Behind</th><th>Polls</th></tr></thead>
            <tbody>
              {orderConsumers(loaded.data.items).map((c, i) => (
                <tr key={i} class={c.stale ? 'stale' : ''}>
                  <td data-label="State" class="nowrap">{state(c)}</td>
                  <td data-label="Address" class="nowrap">{c.address}</td>
                  <td data-label="Client" class="words">{c.client !== null && <><span class="nowrap">{c.client}</span><br /></>}<span data-testid="user-agent">{c.user_agent === '' ? '—' : c.user_agent}</span></td>
                  <td data-label="List" class="words">{c.list === '*' ? 'workspace feed' : c.list_name ?? names.get(c.list) ?? c.list}</td>
                  <td data-label="Variant" class="words" title={c.variant}>{describeVariant(c.variant)}</td>
                  <td data-label="Last seen" class="words">{formatTime(c.last_seen)}</td>
                  <td data-label="Status" class="nowrap">{c.last_status}</td>
                  <td data-label="Behind" class="nowrap">{c.behind === true ? (c.versions_behind ?? 'yes') : c.behind === false ? 0 : '—'}</td>
                  <td data-label="Polls" class="nowrap">{c.polls.total.toLocaleString('en')}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}
    </section>
  )
}
