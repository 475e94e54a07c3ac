/** API keys of the workspace: create with scopes (the key shown once), revoke. */
import { useState } from 'preact/hooks'
import { call, get } from '../api.js'
import { Status, useLoad } from '../load.js'
import type { CreatedKey, Key, Page } from '../types.js'
import { formatTime } from '../variants.js'

const SCOPES = ['feeds:read', 'signals:write', 'rules:read', 'admin'] as const

function CreateKey ({ workspace, onCreated }: { workspace: string, onCreated: () => void }) {
  const [scopes, setScopes] = useState<string[]>(['feeds:read'])
  const [created, setCreated] = useState<CreatedKey | null>(null)
  const [error, setError] = useState<string | null>(null)
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault()
    setError(null)
    try {
      setCreated(await call<CreatedKey>('POST', '/v1/admin/keys', { workspace, scopes }))
      onCreated()
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err))
    }
  }
  return (
    <form onSubmit={(e) => { void submit(e) }} aria-labelledby="create-key">
      <h2 id="create-key">Create a key</h2>
      <fieldset>
        <legend>Scopes</legend>
        {SCOPES.map((s) => (
          <label key={s} class="check">
            <input type="checkbox" name="scope" value={s} checked={scopes.includes(s)} onChange={(e) => { const on = e.currentTarget.checked; setScopes((cur) => on ? [...cur, s] : cur.filter((x) => x !== s)) }} /> {s}
          </label>
        ))}
      </fieldset>
      <button type="submit" disabled={scopes.length === 0}>Create key</button>
      {error !== null && <p class="error" role="alert">{error}</p>}
      {created !== null && (
        <div class="created" role="status" data-testid="created-key">
          <p>Key <code>{created.id}</code> created with {created.scopes.join(', ')}. Copy it now: it is not shown again.</p>
          <p><code class="secret">{created.key}</code></p>
        </div>
      )}
    </form>
  )
}

function RevokeButton ({ k, onRevoked }: { k: Key, onRevoked: () => void }) {
  const [armed, setArmed] = useState(false)
  const [error, setError] = useState<string | null>(null)
  if (k.revoked_at !== null) return <span class="muted">revoked {formatTime(k.revoked_at)}</span>
  const revoke = async (): Promise<void> => {
    try {
      await call('DELETE', `/v1/admin/keys/${encodeURIComponent(k.id)}`)
      onRevoked()
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e))
    }
  }
  // Two steps instead of confirm(): a dialog would take the focus away from the keyboard flow.
  return (
    <>
      {armed
        ? <><button type="button" class="danger" onClick={() => { void revoke() }}>Confirm revoke</button> <button type="button" onClick={() => { setArmed(false) }}>Cancel</button></>
        : <button type="button" onClick={() => { setArmed(true) }} aria-label={`Revoke key ${k.id}`}>Revoke</button>}
      {error !== null && <span class="error" role="alert"> {error}</span>}
    </>
  )
}

export function Keys ({ workspace, me }: { workspace: string, me: string | null }) {
  const loaded = useLoad(() => get<Page<Key>>('/v1/admin/keys', { workspace }), [workspace])
  return (
    <section>
      <h1>API keys</h1>
      <CreateKey workspace={workspace} onCreated={loaded.reload} />
      <h2>Keys</h2>
      <Status loaded={loaded} />
      {loaded.data !== null && (
        <table class="stack" data-testid="keys">
          <thead><tr><th>Id</th><th>Scopes</th><th>Created</th><th>State</th></tr></thead>
          <tbody>
            {[...loaded.data.items].sort((a, b) => Number(a.revoked_at !== null) - Number(b.revoked_at !== null) || b.created_at.localeCompare(a.created_at)).map((k) => (
              <tr key={k.id} data-key={k.id} class={k.id === me ? 'you' : ''}>
                <td data-label="Id"><code>{k.id}</code>{k.id === me && <> <strong class="you" data-testid="this-key">this session's key</strong></>}</td>
                <td data-label="Scopes">{k.scopes.join(', ')}</td>
                <td data-label="Created">{formatTime(k.created_at)}</td>
                <td data-label="State"><RevokeButton k={k} onRevoked={loaded.reload} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}
