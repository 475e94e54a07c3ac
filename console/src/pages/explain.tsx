/** Why an address is (not) in a feed, as a tree: feed → action → network → rules → expansion. */
import { useState } from 'preact/hooks'
import { get } from '../api.js'
import { Status, useLoad } from '../load.js'
import { href } from '../route.js'
import type { List, Page } from '../types.js'
import { formatTime } from '../variants.js'

interface Rule {
  id: string
  target: { type: string, value: string }
  rule_ref: string | null
  action: string
  name: string | null
  reason: string | null
  labels: Record<string, unknown>
  confidence: string | null
  severity: string | null
  expires_at: string | null
  updated_at: string
  stream_seq: number
  expansion?: Record<string, string | null>
}
interface Format { format: string, family: string, status: number, entries: number, limit: number, published: boolean, network?: string | null, rows?: Array<{ row: string, network: string }> }
interface Action { published: boolean, default: { format: string, family: string }, formats: Format[], rules: Rule[], reasons: Array<{ code: string, message: string }> }
interface Feed { feed: string, name: string, built_at: string, held?: { reason: string, since: string }, actions: Record<string, Action> }
interface Explanation { ip: string, family: string, workspace: { id: string, name: string }, at: string, feeds: Feed[] }

function RuleNode ({ r }: { r: Rule }) {
  return (
    <li>
      <span class="node">rule</span> {r.action} {r.target.type} <code>{r.target.value}</code>
      {r.rule_ref !== null && <> · ref <code>{r.rule_ref}</code></>}
      {r.name !== null && <> · name <q>{r.name}</q></>}
      {r.reason !== null && <> · reason <q>{r.reason}</q></>}
      <span class="muted"> · confidence {r.confidence ?? '—'}, severity {r.severity ?? '—'}, labels {JSON.stringify(r.labels)}, updated {formatTime(r.updated_at)}, expires {r.expires_at === null ? 'never' : formatTime(r.expires_at)}, stream seq {r.stream_seq}</span>
      {r.expansion !== undefined && (
        <ul><li><span class="node">expansion</span> {Object.entries(r.expansion).filter(([, v]) => v !== null).map(([k, v]) => `${k} ${v}`).join(' · ')}</li></ul>
      )}
    </li>
  )
}

function ActionNode ({ name, a }: { name: string, a: Action }) {
  const networks = [...new Set(a.formats.flatMap((f) => f.network !== undefined && f.network !== null ? [f.network] : (f.rows ?? []).map((r) => r.network)))]
  return (
    <li data-action={name}>
      <span class="node">{name}</span> <strong class={a.published ? 'published' : 'not-published'}>{a.published ? 'published' : 'not published'}</strong>
      <span class="muted"> (default {a.default.format}, {a.default.family})</span>
      <ul>
        {networks.map((n) => (
          <li key={n}>
            <span class="node">network</span> <code>{n}</code>
            <span class="muted"> in {a.formats.filter((f) => f.network === n || (f.rows ?? []).some((r) => r.network === n)).map((f) => `${f.format}/${f.family}`).join(', ')}</span>
            <ul>{a.rules.map((r) => <RuleNode key={r.id} r={r} />)}</ul>
          </li>
        ))}
        {networks.length === 0 && a.rules.length > 0 && <li><span class="node">network</span> none<ul>{a.rules.map((r) => <RuleNode key={r.id} r={r} />)}</ul></li>}
        {a.reasons.map((r, i) => <li key={i} class="reason"><span class="node">why</span> {r.message}</li>)}
      </ul>
    </li>
  )
}

export function Explain ({ workspace, ip, list }: { workspace: string, ip: string | null, list: string | null }) {
  const [input, setInput] = useState(ip ?? '')
  const [which, setWhich] = useState(list ?? '')
  const lists = useLoad(() => get<Page<List>>('/v1/admin/lists', { workspace }), [workspace])
  // /v1/admin/explain takes the workspace: any for an admin:all key (the picker), the own for admin.
  const loaded = useLoad(async () => ip === null ? null : await get<Explanation>('/v1/admin/explain', { workspace, ip, list }), [workspace, ip, list])
  return (
    <section>
      <h1>Explain an address</h1>
      <form class="inline" onSubmit={(e) => { e.preventDefault(); location.hash = href('explain', undefined, which === '' ? { ip: input.trim() } : { ip: input.trim(), list: which }) }}>
        <label for="explain-ip">Address</label>
        <input id="explain-ip" name="ip" required placeholder="203.0.113.7" value={input} onInput={(e) => { setInput(e.currentTarget.value) }} />
        <label for="explain-list">List</label>
        <select id="explain-list" value={which} onChange={(e) => { setWhich(e.currentTarget.value) }}>
          <option value="">every feed</option>
          {(lists.data?.items ?? []).map((l) => <option key={l.id} value={l.id}>{l.name}</option>)}
        </select>
        <button type="submit">Explain</button>
      </form>
      {ip !== null && <Status loaded={loaded} />}
      {loaded.data !== null && loaded.data !== undefined && (
        <div data-testid="explain">
          <p>{loaded.data.ip} ({loaded.data.family}) in workspace <q>{loaded.data.workspace.name}</q> at {formatTime(loaded.data.at)}</p>
          <ul class="tree">
            {loaded.data.feeds.map((f) => (
              <li key={f.feed} data-feed={f.feed}>
                <span class="node">feed</span> <strong>{f.name}</strong> <span class="muted">built {formatTime(f.built_at)}</span>
                {f.held !== undefined && <span class="held"> · held since {formatTime(f.held.since)}: {f.held.reason}</span>}
                <ul>{Object.entries(f.actions).map(([name, a]) => <ActionNode key={name} name={name} a={a} />)}</ul>
              </li>
            ))}
          </ul>
        </div>
      )}
    </section>
  )
}
