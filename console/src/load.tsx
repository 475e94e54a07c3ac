/** Loading an API answer into a component, with its error shown as text. */
import { useCallback, useEffect, useState } from 'preact/hooks'

export interface Loaded<T> { data: T | null, error: string | null, loading: boolean, reload: () => void }

export function useLoad<T> (load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | null, error: string | null, loading: boolean }>({ data: null, error: null, loading: true })
  const [tick, setTick] = useState(0)
  useEffect(() => {
    let live = true
    setState((s) => ({ ...s, loading: true }))
    load().then(
      (data) => { if (live) setState({ data, error: null, loading: false }) },
      (e: unknown) => { if (live) setState({ data: null, error: e instanceof Error ? e.message : String(e), loading: false }) },
    )
    return () => { live = false }
  }, [...deps, tick])
  const reload = useCallback(() => { setTick((t) => t + 1) }, [])
  return { ...state, reload }
}

export function Status ({ loaded }: { loaded: Loaded<unknown> }) {
  if (loaded.error !== null) return <p class="error" role="alert">{loaded.error}</p>
  if (loaded.loading && loaded.data === null) return <p class="muted" aria-busy="true">Loading…</p>
  return null
}
