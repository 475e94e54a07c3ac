/**
 * GET/HEAD /openapi.json: the OpenAPI 3.1 document (src/ingest/openapi.ts), serialized once at
 * start; a request is one write of a precomputed buffer.
 */
import type { RouteModule } from './app.js'
import { sendBody } from './respond.js'

/**
 * @example
 *   startHttpServer(ctx, [openapiRoutes(buildOpenApiDocument())])
 */
export function openapiRoutes (doc: unknown): RouteModule {
  const body = Buffer.from(JSON.stringify(doc))
  const headers = [['Cache-Control', 'public, max-age=3600']] as const
  return (router) => {
    router.on('get', '/openapi.json', 'openapi', 'signal', (ex) => { sendBody(ex, 200, body, 'application/json', headers) })
    router.on('head', '/openapi.json', 'openapi', 'signal', (ex) => {
      if (ex.aborted) return
      ex.status = 200
      ex.res.cork(() => {
        ex.res.writeStatus('200 OK')
        ex.res.writeHeader('Content-Type', 'application/json')
        for (const [k, v] of headers) ex.res.writeHeader(k, v)
        // As a header, not endWithoutBody(length): uWS 20.51 would then wait for that many body
        // bytes and the keep-alive connection dies (see src/http/feed-write.ts).
        ex.res.writeHeader('Content-Length', String(body.byteLength))
        ex.res.endWithoutBody()
      })
    })
    router.onlyAllow('/openapi.json', 'openapi', 'signal', 'GET, HEAD')
  }
}
