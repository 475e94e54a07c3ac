/**
 * GET/HEAD /console (the operator console's index.html) and /console/assets/{name} (its hashed
 * bundles), from memory (console-assets.ts). The page routes with `#/…`, so the server knows only
 * these two shapes of path, under one metrics label (`console`). Every answer carries the
 * console's security headers.
 */
import type { RouteModule } from './app.js'
import type { Exchange } from './respond.js'
import type { HttpRequest } from 'uWebSockets.js'
import { prefersGzip } from './accept-encoding.js'
import { CONSOLE_SECURITY_HEADERS, loadConsoleAssets, type ConsoleAsset, type ConsoleAssets } from './console-assets.js'
import { sendBody, sendError, statusLine, writeCorked } from './respond.js'
import { ThreatfeedError } from '../errors.js'

function send (ex: Exchange, req: HttpRequest, asset: ConsoleAsset): void {
  if (req.getHeader('if-none-match') === asset.etag) {
    ex.status = 304
    ex.ended = true
    writeCorked(ex, () => {
      ex.res.writeStatus(statusLine(304))
      for (const [k, v] of asset.headers) ex.res.writeHeader(k, v)
      ex.res.endWithoutBody()
    })
    return
  }
  const gzip = asset.gzip !== null && prefersGzip(req.getHeader('accept-encoding'))
  const headers = gzip ? [...asset.headers, ['Content-Encoding', 'gzip'] as const] : asset.headers
  sendBody(ex, 200, gzip ? asset.gzip! : asset.identity, asset.contentType, headers)
}

/**
 * @example
 *   startHttpServer(ctx, [..., consoleRoutes(loadConsoleAssets())])
 */
export function consoleRoutes (files: ConsoleAssets = loadConsoleAssets()): RouteModule {
  return (router, ctx) => {
    if (files.index === null) ctx.log.warn({ dir: files.dir }, 'console not built (npm run build): /console answers 404')
    const notFound = (ex: Exchange): void => {
      sendError(ex, new ThreatfeedError('TF_ERR_NOT_FOUND'), 'signal', (e) => { ctx.log.error({ err: e }, e.message) }, CONSOLE_SECURITY_HEADERS)
    }
    for (const pattern of ['/console', '/console/']) {
      router.on('get', pattern, 'console', 'signal', (ex, req) => {
        if (files.index === null) notFound(ex)
        else send(ex, req, files.index)
      })
      router.onlyAllow(pattern, 'console', 'signal', 'GET, HEAD')
    }
    router.on('get', '/console/assets/:name', 'console', 'signal', (ex, req) => {
      const asset = files.assets.get(req.getParameter(0) ?? '')
      if (asset === undefined) notFound(ex)
      else send(ex, req, asset)
    })
    router.onlyAllow('/console/assets/:name', 'console', 'signal', 'GET, HEAD')
    // Any other path under /console (index.html, a typo): the 404 carries the console's headers
    // too (nosniff among them), not the plain 404 of an unknown path.
    router.on('any', '/console/*', 'console', 'signal', notFound)
    router.on('head', '/console/*', 'console', 'signal', notFound)
  }
}
