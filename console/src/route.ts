/** Hash routes (`#/lists/ID`), so the server serves one page for every view. */
import { useEffect, useState } from 'preact/hooks'

export interface Route { page: string, param: string | null, query: URLSearchParams }

export function parseRoute (hash: string): Route {
  const [path = '', q = ''] = hash.replace(/^#\/?/, '').split('?')
  const [page = '', param] = path.split('/')
  return { page: page === '' ? 'overview' : page, param: param === undefined ? null : decodeURIComponent(param), query: new URLSearchParams(q) }
}

export function useRoute (): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash))
  useEffect(() => {
    const f = (): void => { setRoute(parseRoute(location.hash)) }
    addEventListener('hashchange', f)
    return () => { removeEventListener('hashchange', f) }
  }, [])
  return route
}

export function href (page: string, param?: string, query?: Record<string, string>): string {
  const q = query === undefined ? '' : new URLSearchParams(query).toString()
  return `#/${page}${param === undefined ? '' : `/${encodeURIComponent(param)}`}${q === '' ? '' : `?${q}`}`
}
