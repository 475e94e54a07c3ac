/**
 * GET/HEAD /openapi.json: the OpenAPI 3.1 document (src/ingest/openapi.ts), serialized once at
 * start; a request is one write of a precomputed buffer. HEAD is answered by the router through
 * the GET handler (same headers, no body).
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
    router.onlyAllow('/openapi.json', 'openapi', 'signal', 'GET, HEAD')
  }
}
