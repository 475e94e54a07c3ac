/**
 * The threatfeed operator console: sign-in with an admin key, a workspace picker for `admin:all`
 * keys, and the pages. Preact renders every API string as text (never as HTML), which is what
 * keeps a rule or list named `<img src=x onerror=…>` inert.
 */
import { render } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { ApiError, call, forgetKey, get, keepKey, storedKey, whenUnauthorized } from './api.js'
import { href, useRoute } from './route.js'
import type { Page, Whoami, Workspace } from './types.js'
import { Overview } from './pages/overview.js'
import { ListPage } from './pages/list.js'
import { Consumers } from './pages/consumers.js'
import { Explain } from './pages/explain.js'
import { Batches } from './pages/batches.js'
import { Keys } from './pages/keys.js'
import './style.css'

const PAGES = [
  ['overview', 'Overview'],
  ['consumers', 'Consumers'],
  ['explain', 'Explain'],
  ['batches', 'Batches'],
  ['keys', 'Keys'],
] as const

function SignIn ({ onSignedIn }: { onSignedIn: () => void }) {
  const [key, setKey] = useState('')
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault()
    setBusy(true)
    setError(null)
    try {
      await call('GET', '/v1/admin/workspaces', undefined, key.trim())
      keepKey(key.trim())
      onSignedIn()
    } catch (err) {
      setError(err instanceof ApiError && err.status === 403 ? 'This key has no admin scope.' : err instanceof Error ? err.message : String(err))
    } finally {
      setBusy(false)
    }
  }
  return (
    <main class="signin">
      <h1>threatfeed console</h1>
      <form onSubmit={(e) => { void submit(e) }}>
        <label for="key">Admin key</label>
        <input id="key" name="key" type="password" autocomplete="off" spellcheck={false} required value={key} onInput={(e) => { setKey(e.currentTarget.value) }} />
        <p class="muted">Kept in this tab's session storage only, and sent in the Authorization header.</p>
        <button type="submit" disabled={busy}>Sign in</button>
        {error !== null && <p class="error" role="alert">{error}</p>}
      </form>
    </main>
  )
}

function Shell ({ onSignOut }: { onSignOut: () => void }) {
  const route = useRoute()
  const [workspaces, setWorkspaces] = useState<Workspace[]>([])
  const [workspace, setWorkspace] = useState<string | null>(null)
  const [me, setMe] = useState<Whoami | null>(null)
  useEffect(() => { get<Whoami>('/v1/admin/whoami').then(setMe, () => {}) }, [])
  useEffect(() => {
    get<Page<Workspace>>('/v1/admin/workspaces').then((p) => {
      setWorkspaces(p.items)
      setWorkspace((w) => w ?? p.items[0]?.id ?? null)
    }, () => {})
  }, [])
  const active = route.page === 'lists' ? 'overview' : route.page
  let page
  if (workspace === null) page = <p class="muted">Loading…</p>
  else if (route.page === 'lists' && route.param !== null) page = <ListPage workspace={workspace} id={route.param} />
  else if (route.page === 'consumers') page = <Consumers workspace={workspace} list={route.query.get('list')} />
  else if (route.page === 'explain') page = <Explain key={`${route.query.get('ip') ?? ''} ${route.query.get('list') ?? ''}`} workspace={workspace} ip={route.query.get('ip')} list={route.query.get('list')} />
  else if (route.page === 'batches') page = <Batches workspace={workspace} />
  else if (route.page === 'keys') page = <Keys workspace={workspace} me={me?.key_id ?? null} />
  else page = <Overview workspace={workspace} />
  return (
    <>
      <header>
        <a class="brand" href={href('overview')}>threatfeed</a>
        <nav aria-label="Pages">
          {PAGES.map(([id, title]) => <a key={id} href={href(id)} aria-current={active === id ? 'page' : undefined}>{title}</a>)}
        </nav>
        {workspaces.length > 1 && (
          <label class="workspace">Workspace{' '}
            <select value={workspace ?? ''} onChange={(e) => { setWorkspace(e.currentTarget.value) }}>
              {workspaces.map((w) => <option key={w.id} value={w.id}>{w.name}</option>)}
            </select>
          </label>
        )}
        {workspaces.length === 1 && <span class="workspace">{workspaces[0]!.name}</span>}
        {me !== null && <span class="session" data-testid="session-key" title={`Signed in with key ${me.key_id} (${me.scopes.join(', ')})`}>key <code>{me.key_id.slice(0, 8)}</code> · {me.scopes.join(', ')}</span>}
        <button type="button" class="link" onClick={onSignOut}>Sign out</button>
      </header>
      <main>{page}</main>
    </>
  )
}

function App () {
  const [signedIn, setSignedIn] = useState(storedKey() !== null)
  useEffect(() => { whenUnauthorized(() => { forgetKey(); setSignedIn(false) }) }, [])
  if (!signedIn) return <SignIn onSignedIn={() => { setSignedIn(true) }} />
  return <Shell onSignOut={() => { forgetKey(); setSignedIn(false) }} />
}

render(<App />, document.getElementById('app')!)
