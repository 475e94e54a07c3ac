/**
 * The operator console's built files (scripts/build-console.mjs → dist/console), read once at
 * start and held in memory with their gzip bodies, ETags and headers, so a request is a map
 * lookup and one write. Hashed asset names are immutable and cached for a year; index.html names
 * them and is revalidated on every load (no-cache), so a new build is picked up at once.
 */
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import type { Headers } from './respond.js'

/**
 * Sent with every console answer. No inline script or style (the build emits files only);
 * `connect-src 'self'` keeps the admin key from being sent anywhere but this origin.
 */
export const CONSOLE_SECURITY_HEADERS: Headers = [
  ['Content-Security-Policy', "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"],
  ['X-Content-Type-Options', 'nosniff'],
  ['Referrer-Policy', 'no-referrer'],
  ['X-Frame-Options', 'DENY'],
  ['Cross-Origin-Opener-Policy', 'same-origin'],
  ['Cross-Origin-Resource-Policy', 'same-origin'],
]

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.map': 'application/json',
}
const IMMUTABLE = 'public, max-age=31536000, immutable'
const REVALIDATE = 'no-cache'

export interface ConsoleAsset {
  readonly contentType: string
  readonly etag: string
  readonly identity: Buffer
  /** The gzip body, or null when gzip would not be smaller. */
  readonly gzip: Buffer | null
  readonly headers: Headers
}

export interface ConsoleAssets {
  /** The directory the files came from (for the log line when it is missing). */
  readonly dir: string
  readonly index: ConsoleAsset | null
  /** By file name under assets/ (`app-3F2K….js`). */
  readonly assets: ReadonlyMap<string, ConsoleAsset>
}

/** dist/console of this package, found from this module whether it runs from src/ (tsx) or dist/src/. */
export function defaultConsoleDir (): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir)
    if (up === dir) break
    dir = up
  }
  return join(dir, 'dist', 'console')
}

function toAsset (body: Buffer, name: string, cacheControl: string): ConsoleAsset {
  const contentType = CONTENT_TYPES[extname(name)] ?? 'application/octet-stream'
  const gz = gzipSync(body, { level: 9 })
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`
  return {
    contentType,
    etag,
    identity: body,
    gzip: gz.byteLength < body.byteLength ? gz : null,
    headers: [['Cache-Control', cacheControl], ['ETag', etag], ['Vary', 'Accept-Encoding'], ...CONSOLE_SECURITY_HEADERS],
  }
}

/** Reads a built console; a missing directory gives no assets (the routes then answer 404). */
export function loadConsoleAssets (dir = defaultConsoleDir()): ConsoleAssets {
  const indexPath = join(dir, 'index.html')
  if (!existsSync(indexPath)) return { dir, index: null, assets: new Map() }
  const assets = new Map<string, ConsoleAsset>()
  const assetDir = join(dir, 'assets')
  if (existsSync(assetDir)) {
    for (const name of readdirSync(assetDir)) assets.set(name, toAsset(readFileSync(join(assetDir, name)), name, IMMUTABLE))
  }
  return { dir, index: toAsset(readFileSync(indexPath), 'index.html', REVALIDATE), assets }
}
