/** One list: defaults, selector, shards, variants, guards (accept a held build, hold or drop mode), 30 days of entries and changes. */
import { Fragment } from 'preact'
import { useState } from 'preact/hooks'
import { call, get } from '../api.js'
import { HistoryChart } from '../components/chart.js'
import { HeldBuild } from '../components/held.js'
import { Status, useLoad } from '../load.js'
import type { History, List, Page, Point } from '../types.js'
import { describeVariant, effectiveDefaults, formatBytes, formatTime, guardName, guardValue, lastPoint, parseVariant, type Variant } from '../variants.js'
import { guardState, lastChangeOf } from './overview.js'

function Guards ({ list, onChanged }: { list: List, onChanged: () => void }) {
  const [error, setError] = useState<string | null>(null)
  const [note, setNote] = useState<string | null>(null)
  const held = list.publish?.held ?? null
  const act = async (what: () => Promise<unknown>, done: string): Promise<void> => {
    setError(null)
    try {
      await what()
      setNote(done)
      onChanged()
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e))
    }
  }
  const g = list.guards
  return (
    <section aria-labelledby="guards">
      <h2 id="guards">Guards</h2>
      <p data-testid="guard-state" class={held !== null ? 'held' : ''}>{guardState(list)}</p>
      {g !== null && (
        <dl class="grid">
          {Object.entries(g).filter(([k]) => k !== 'accepted').map(([k, v]) => <Fragment key={k}><dt title={k}>{guardName(k)}</dt><dd data-guard={k}>{guardValue(k, v)}</dd></Fragment>)}
        </dl>
      )}
      {held !== null && (
        <div class="held-box">
          <HeldBuild held={held} />
          <button type="button" onClick={() => { void act(() => call('POST', `/v1/admin/lists/${encodeURIComponent(list.id)}/accept`, { digest: held.digest }), 'Accepted: the held build is published at the next rebuild.') }}>Accept held build</button>
        </div>
      )}
      {g !== null && (
        <p>
          {g.mode === 'drop'
            ? <button type="button" onClick={() => { void act(() => call('PATCH', `/v1/admin/lists/${encodeURIComponent(list.id)}`, { guards: { mode: 'hold' } }), 'Mode set to hold.') }}>Hold on a trip (mode hold)</button>
            : <button type="button" onClick={() => { void act(() => call('PATCH', `/v1/admin/lists/${encodeURIComponent(list.id)}`, { guards: { mode: 'drop' } }), 'Mode set to drop.') }}>Drop on a trip (mode drop)</button>}
        </p>
      )}
      {note !== null && <p role="status">{note}</p>}
      {error !== null && <p class="error" role="alert">{error}</p>}
    </section>
  )
}

interface VariantRow { h: History, v: Variant, last: Point | undefined }

/** A variant and its shards as one row: a list of 64 shards is 64 lines only when asked for. */
function Variants ({ rows }: { rows: readonly VariantRow[] }) {
  if (rows.length === 0) return <p class="muted">No variant built yet: a variant is built when it is first polled.</p>
  const groups = new Map<string, VariantRow[]>()
  for (const r of rows) {
    const k = describeVariant(`${r.v.format}|${r.v.family}|${r.v.action}|${r.v.checksum ? 'md5' : ''}`)
    groups.set(k, [...(groups.get(k) ?? []), r])
  }
  const sum = (rs: readonly VariantRow[], f: (p: Point) => number | undefined): number | undefined =>
    rs.every((r) => r.last !== undefined && f(r.last) !== undefined) ? rs.reduce((n, r) => n + f(r.last!)!, 0) : undefined
  return (
    <table class="stack" data-testid="variants">
      <thead><tr><th>Variant</th><th>Shards</th><th>Entries</th><th>Bytes</th><th>Gzip</th><th>As of</th></tr></thead>
      <tbody>
        {[...groups].map(([name, rs]) => {
          const shards = rs.filter((r) => r.v.shard !== null).sort((a, b) => a.v.shard!.localeCompare(b.v.shard!, 'en', { numeric: true }))
          const whole = rs.find((r) => r.v.shard === null)
          const shown = whole !== undefined ? [whole] : shards
          const entries = sum(shown, (p) => p.entries)
          const bytes = sum(shown, (p) => p.bytes)
          const gzip = sum(shown, (p) => p.gzip_bytes)
          const asOf = shown.map((r) => r.last?.at ?? '').sort().pop()
          return (
            <tr key={name} data-variant={name}>
              <td data-label="Variant" title={rs.map((r) => r.h.variant).join(' ')}>{name}</td>
              <td data-label="Shards">
                {shards.length === 0
                  ? '—'
                  : (
                    <details>
                      <summary>{shards.length} polled{whole === undefined ? ' (sum)' : ''}</summary>
                      <ul class="shards">{shards.map((r) => <li key={r.h.variant}>shard {r.v.shard!.replace('/', ' of ')}: <span data-testid="variant-entries">{r.last?.entries.toLocaleString('en') ?? '—'}</span> entries, {r.last === undefined ? '—' : formatBytes(r.last.bytes)}</li>)}</ul>
                    </details>
                    )}
              </td>
              <td data-label="Entries" data-testid={whole !== undefined ? 'variant-entries' : undefined}>{entries?.toLocaleString('en') ?? '—'}</td>
              <td data-label="Bytes">{bytes === undefined ? '—' : formatBytes(bytes)}</td>
              <td data-label="Gzip">{gzip === undefined ? '—' : formatBytes(gzip)}</td>
              <td data-label="As of">{formatTime(asOf)}</td>
            </tr>
          )
        })}
      </tbody>
    </table>
  )
}

export function ListPage ({ workspace, id }: { workspace: string, id: string }) {
  const loaded = useLoad(async () => {
    const [list, history] = await Promise.all([
      get<List>(`/v1/admin/lists/${encodeURIComponent(id)}`, { workspace }),
      get<Page<History>>('/v1/admin/feed-versions', { workspace, list: id }),
    ])
    return { list, history: history.items }
  }, [workspace, id])
  if (loaded.data === null) return <section><h1>List</h1><Status loaded={loaded} /></section>
  const { list, history } = loaded.data
  const d = effectiveDefaults(list.defaults)
  const set = (k: keyof List['defaults']): string => list.defaults[k] === undefined ? ' (server default)' : ''
  const variants = history.map((h) => ({ h, v: parseVariant(h.variant), last: lastPoint(h.points) }))
  const shards = [...new Set(variants.map(({ v }) => v.shard).filter((s): s is string => s !== null))].sort()
  const main = variants.find(({ v }) => v.format === d.format && v.family === d.family && v.action === d.action && v.shard === null && !v.checksum)
  return (
    <section>
      <h1 data-testid="list-name">{list.name}</h1>
      {list.description !== '' && <p>{list.description}</p>}
      <Status loaded={loaded} />
      <h2>Defaults</h2>
      <dl class="grid">
        <dt>format</dt><dd>{d.format}{set('format')}</dd>
        <dt>family</dt><dd>{d.family}{set('family')}</dd>
        <dt>action</dt><dd>{d.action}{set('action')}</dd>
        <dt>max entries</dt><dd>{d.max_entries.toLocaleString('en')}{set('max_entries')}</dd>
        <dt>confidence</dt><dd>{list.defaults.confidence ?? '—'}</dd>
        <dt>severity</dt><dd>{list.defaults.severity ?? '—'}</dd>
        <dt>shards</dt><dd data-testid="shards">{list.defaults.shards ?? 1}{shards.length > 0 ? ` (${shards.length} polled; see Variants)` : ''}</dd>
        <dt>selector</dt><dd>{list.selector === null || Object.keys(list.selector).length === 0 ? 'every rule' : Object.entries(list.selector).map(([k, v]) => `${k}=${v}`).join(', ')}</dd>
        <dt>updated</dt><dd>{formatTime(list.updated_at)}</dd>
        <dt>last change</dt><dd data-testid="list-last-change">{lastChangeOf(list.publish)}</dd>
      </dl>
      <Guards list={list} onChanged={loaded.reload} />
      <h2>Entries and changes, 30 days</h2>
      <HistoryChart points={main?.h.points ?? variants[0]?.h.points ?? []} label={`entries and changes of ${list.name}`} />
      <h2>Variants</h2>
      <Variants rows={variants} />
    </section>
  )
}
