/**
 * The docs describe the whole interface: every path and method of /openapi.json is named in a
 * docs/ page (`GET /v1/admin/lists/{id}` as written there), so a route cannot be added without
 * its page.
 */
import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { buildOpenApiDocument } from '../../src/ingest/openapi.js'

const dir = new URL('../../docs/', import.meta.url)
const docs = readdirSync(dir).filter((f) => f.endsWith('.md')).map((f) => readFileSync(new URL(f, dir), 'utf8')).join('\n')
// A page may name a path parameter by what it holds ({id}, {list}) or write the path's query.
const said = docs.replace(/\{[a-z_]+\}/g, '{}')

t.test('every operation of /openapi.json is named in docs/', async (t) => {
  const doc = buildOpenApiDocument() as { paths: Record<string, Record<string, unknown>> }
  const operations = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).filter((m) => ['get', 'head', 'post', 'put', 'patch', 'delete'].includes(m)).map((m) => ({ path, method: m.toUpperCase() })))
  t.ok(operations.length > 20, `${operations.length} operations`)
  for (const { path, method } of operations) {
    const p = path.replace(/\{[a-zA-Z_]+\}/g, '{}')
    const named = said.includes(`${method} ${p}`) || (method === 'HEAD' && said.includes(`HEAD ${p}`)) || said.includes(`\`${method} ${p}?`) || said.includes(`${method} ${p}[`)
    t.ok(named, `${method} ${path}`)
  }
})
