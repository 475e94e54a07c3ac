/**
 * GET /openapi.json: an OpenAPI 3.1 document whose schemas are the very ones the ingest path
 * enforces (src/ingest/schemas.ts), describing both signal endpoints and the feed endpoints with
 * their parameters, headers and statuses (SPEC 4.1–4.4, 7.1, 7.2).
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { createConfig, lintFromString } from '@redocly/openapi-core'
import { startTestServer } from '../helpers/server.js'
import { feedModule } from '../helpers/feed-module.js'
import { buildOpenApiDocument } from '../../src/ingest/openapi.js'
import { schemas } from '../../src/ingest/schemas.js'

const feeds = feedModule()
const srv = await startTestServer({ modules: feeds.modules })
t.teardown(async () => { await feeds.stop(); await srv.close() })

interface Doc {
  openapi: string
  info: { license?: { identifier?: string } }
  servers?: Array<{ url: string, variables?: Record<string, { default: string }> }>
  paths: Record<string, Record<string, { parameters?: Array<{ name: string, in: string }>, responses: Record<string, { headers?: Record<string, { schema: { const?: string } }> }>, requestBody?: { content: Record<string, { schema: unknown }> } }>>
  components: { schemas: Record<string, unknown>, securitySchemes: Record<string, unknown> }
}

const res = await fetch(`${srv.url}/openapi.json`)
const served = await res.text()
const doc = JSON.parse(served) as Doc

t.test('the served document passes an OpenAPI 3.1 linter (Redocly, recommended rules) without a problem', async (t) => {
  const config = await createConfig({ extends: ['recommended'] })
  const problems = await lintFromString({ source: served, absoluteRef: `${srv.url}/openapi.json`, config })
  // Warnings count too: none is accepted today, so a new one is a decision to write down here.
  t.same(problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? '?'}`), [])
})

t.test('servers, and the licence of package.json', async (t) => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { license: string }
  t.equal(doc.info.license?.identifier, pkg.license)
  const server = doc.servers?.[0]
  t.ok(server, 'a server')
  const url = server!.url.replace(/\{(\w+)\}/g, (_, name: string) => server!.variables![name]!.default)
  t.equal(url, 'http://localhost:8080', 'its defaults are what npm start serves')
})

t.test('the documented Allow and WWW-Authenticate are what the server sends', async (t) => {
  const documented = (path: string, method: string, status: string, header: string) => doc.paths[path]![method]!.responses[status]!.headers![header]!.schema.const
  const cases: Array<{ path: string, url: string, method: string, status: string, header: string, request: RequestInit }> = [
    { path: '/v1/signal', url: '/v1/signal', method: 'post', status: '405', header: 'Allow', request: { method: 'GET' } },
    { path: '/v2/signal', url: '/v2/signal', method: 'post', status: '405', header: 'Allow', request: { method: 'HEAD' } },
    { path: '/v1/signal', url: '/v1/signal', method: 'post', status: '401', header: 'WWW-Authenticate', request: { method: 'POST', body: '[]' } },
    { path: '/v2/signal', url: '/v2/signal', method: 'post', status: '401', header: 'WWW-Authenticate', request: { method: 'POST', body: '[]' } },
    { path: '/v1/threat/feeds', url: '/v1/threat/feeds', method: 'get', status: '405', header: 'Allow', request: { method: 'DELETE' } },
    { path: '/v1/threat/feeds/{list}', url: '/v1/threat/feeds/x', method: 'head', status: '405', header: 'Allow', request: { method: 'POST' } },
    { path: '/v1/threat/feeds', url: '/v1/threat/feeds', method: 'get', status: '401', header: 'WWW-Authenticate', request: { method: 'GET' } },
    { path: '/v1/threat/feeds/{list}', url: '/v1/threat/feeds/x', method: 'head', status: '401', header: 'WWW-Authenticate', request: { method: 'HEAD' } },
  ]
  for (const c of cases) {
    const r = await fetch(`${srv.url}${c.url}`, c.request)
    await r.arrayBuffer()
    const name = `${c.request.method} ${c.url}`
    t.equal(String(r.status), c.status, name)
    t.equal(r.headers.get(c.header), documented(c.path, c.method, c.status, c.header), `${name}: ${c.header} as documented`)
  }
})

t.test('served as JSON, exactly the built document', async (t) => {
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^application\/json/)
  t.same(doc, JSON.parse(JSON.stringify(buildOpenApiDocument())))
  t.equal(doc.openapi, '3.1.0')
  const head = await fetch(`${srv.url}/openapi.json`, { method: 'HEAD' })
  t.equal(head.status, 200)
  t.equal(head.headers.get('content-length'), String(Buffer.byteLength(JSON.stringify(doc))))
  t.equal(await head.text(), '')
  const post = await fetch(`${srv.url}/openapi.json`, { method: 'POST' })
  t.equal(post.status, 405)
  t.equal(post.headers.get('allow'), 'GET, HEAD')
})

t.test('the component schemas are the enforced schemas', async (t) => {
  for (const [name, schema] of Object.entries(schemas)) {
    const { $id: _id, ...rest } = schema as Record<string, unknown>
    // Less the expression body's `type`, which the batch check requires before the schema is applied.
    if (name === 'ExpressionRuleBody') {
      const { required, properties, ...others } = doc.components.schemas[name] as { required: string[], properties: Record<string, Record<string, unknown>> }
      const type = { ...properties.type, description: String(properties.type!.description).replace(/\. Required: .*$/, '') }
      t.same({ ...others, required: required.filter((r) => r !== 'type'), properties: { ...properties, type } }, rest, name)
    } else t.same(doc.components.schemas[name], rest, name)
  }
})

t.test('issue 36: rule.type is required, and https is the server\'s own listener', async (t) => {
  const body = doc.components.schemas.ExpressionRuleBody as { required: string[], properties: { type: { description: string } } }
  t.ok(body.required.includes('type'), 'ExpressionRuleBody requires type')
  t.match(body.properties.type.description, /rejects the whole batch/)
  const scheme = doc.servers?.[0]?.variables?.scheme as { description?: string } | undefined
  t.match(scheme?.description, /the server's own TLS listener \(THREATFEED_TLS_CERT/)
  t.notMatch(scheme?.description, /^https through a TLS-terminating proxy/)
})

t.test('every $ref resolves', async (t) => {
  const refs: string[] = []
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk)
    else if (typeof v === 'object' && v !== null) {
      for (const [k, x] of Object.entries(v)) {
        if (k === '$ref' && typeof x === 'string') refs.push(x)
        else walk(x)
      }
    }
  }
  walk(doc)
  t.ok(refs.length > 10)
  for (const ref of new Set(refs)) {
    const name = ref.replace('#/components/schemas/', '')
    t.ok(ref.startsWith('#/components/schemas/') && name in doc.components.schemas, ref)
  }
})

t.test('statuses, parameters and headers of every endpoint', async (t) => {
  const statuses = (path: string, method: string) => Object.keys(doc.paths[path]![method]!.responses).sort()
  t.same(statuses('/v1/signal', 'post'), ['200', '206', '400', '401', '402', '403', '405', '429', '500'])
  t.same(statuses('/v2/signal', 'post'), ['200', '206', '400', '401', '405', '429', '500'])
  for (const method of ['get', 'head']) {
    t.same(statuses('/v1/threat/feeds', method), ['200', '304', '400', '401', '402', '403', '405', '413', '500'])
    t.same(statuses('/v1/threat/feeds/{list}', method), ['200', '304', '400', '401', '402', '403', '404', '405', '409', '413', '500'])
    const params = doc.paths['/v1/threat/feeds/{list}']![method]!.parameters!.map((p) => `${p.in}:${p.name}`)
    t.same(params, ['path:list', 'query:format', 'query:family', 'query:action', 'query:checksum', 'query:since', 'query:table', 'query:set', 'header:If-None-Match', 'header:If-Modified-Since', 'header:Accept-Encoding'])
    t.same(Object.keys(doc.paths['/v1/threat/feeds']![method]!.responses['200']!.headers!), ['ETag', 'Last-Modified', 'Cache-Control', 'Vary', 'X-Feed-Entry-Count', 'X-Feed-Entry-Limit'])
  }
  t.same(Object.keys(doc.paths['/v1/threat/feeds']!.get!.responses['304']!.headers!), ['ETag', 'Last-Modified', 'Cache-Control', 'Vary'])
  t.ok(doc.paths['/v1/signal']!.post!.responses['429']!.headers!['Retry-After'])
  t.ok(doc.paths['/v2/signal']!.post!.responses['405']!.headers!.Allow)
  t.same(Object.keys(doc.components.securitySchemes).sort(), ['basic', 'bearer'])
})

t.test('the documented request bodies accept and refuse what the server does', async (t) => {
  const ajv = new Ajv2020({ strict: false, allowUnionTypes: true })
  for (const [name, schema] of Object.entries(doc.components.schemas)) ajv.addSchema(schema as object, `#/components/schemas/${name}`)
  const v1 = ajv.compile({ ...doc.paths['/v1/signal']!.post!.requestBody!.content['application/json']!.schema as object, components: doc.components })
  const v2 = ajv.compile({ ...doc.paths['/v2/signal']!.post!.requestBody!.content['application/json']!.schema as object, components: doc.components })
  t.ok(v1([{ type: 'access_rules', action: 'block', ip: '192.0.2.1' }]))
  t.notOk(v1([]), '0 entries')
  t.notOk(v1(Array(1001).fill({ type: 'access_rules', action: 'block', ip: '192.0.2.1' })), '1001 entries')
  t.notOk(v1([{ type: 'access_rules', action: 'ban' }]))
  t.ok(v2([{ kind: 'access_rule', op: 'upsert', rule: { target: { ip: '192.0.2.1' }, action: 'Allow' } }]))
  t.ok(v2([{ kind: 'waf_rule', op: 'upsert', rule_ref: 'r', rule: { type: 'CUSTOM', expression: 'x', action: 'block' } }]))
  t.notOk(v2([{ kind: 'waf_rule', op: 'upsert', rule_ref: 'r', rule: { target: { ip: '192.0.2.1' } } }]), 'a waf rule with an access body')
  t.notOk(v2([{ kind: 'access_rule', op: 'upsert', rule: { expression: 'x', action: 'block' } }]), 'an access rule with an expression body')
})
