/**
 * The admin API from the browser. The key lives in sessionStorage only (gone when the tab
 * closes) and goes out in the Authorization header, never in a cookie or a URL.
 */
const KEY_ITEM = 'threatfeed.admin-key'

export function storedKey (): string | null {
  return sessionStorage.getItem(KEY_ITEM)
}

export function forgetKey (): void {
  sessionStorage.removeItem(KEY_ITEM)
}

export function keepKey (key: string): void {
  sessionStorage.setItem(KEY_ITEM, key)
}

/** An answer other than 2xx, with the SPEC 2.6 / 2.9 body's message when there is one. */
export class ApiError extends Error {
  readonly status: number
  constructor (status: number, message: string) {
    super(message)
    this.status = status
  }
}

/** Called on a 401 so the shell can return to the sign-in form. */
let onUnauthorized: () => void = () => {}
export function whenUnauthorized (f: () => void): void {
  onUnauthorized = f
}

type Query = Record<string, string | number | boolean | null | undefined>

export function withQuery (path: string, query: Query = {}): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== '') q.set(k, String(v))
  const s = q.toString()
  return s === '' ? path : `${path}?${s}`
}

export async function call<T> (method: string, path: string, body?: unknown, key = storedKey()): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' }
  if (key !== null) headers.Authorization = `Bearer ${key}`
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'omit', cache: 'no-store' })
  const text = await res.text()
  const parsed: unknown = text === '' ? null : JSON.parse(text)
  if (!res.ok) {
    if (res.status === 401 && key === storedKey()) onUnauthorized()
    throw new ApiError(res.status, messageOf(parsed) ?? `${res.status} ${res.statusText}`)
  }
  return parsed as T
}

function messageOf (body: unknown): string | null {
  if (typeof body !== 'object' || body === null) return null
  const b = body as { message?: unknown, error?: unknown, details?: unknown }
  const main = typeof b.message === 'string' ? b.message : typeof b.error === 'string' ? b.error : null
  if (main === null) return null
  if (Array.isArray(b.details) && b.details.length > 0) {
    const parts = b.details.map((d: { field?: string, message?: string }) => `${d.field ?? ''} ${d.message ?? ''}`.trim())
    return `${main}: ${parts.join('; ')}`
  }
  return main
}

export const get = <T>(path: string, query?: Query): Promise<T> => call<T>('GET', withQuery(path, query))
