/**
 * The HTTP front end of the foundation: health, readiness, metrics, unknown routes, and the
 * revocation path — a key revoked by the CLI in another process is refused by the running server
 * within 1 s (DECISIONS §1).
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer } from '../../src/main.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'

const exec = promisify(execFile)
const dir = mkdtempSync(join(tmpdir(), 'tf-app-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

const config = loadConfig({ HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: dir, THREATFEED_LOG_LEVEL: 'silent', THREATFEED_POLL_MS: '100', THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB, THREATFEED_GEO_ASN_DB: ASN_TEST_DB })
const server = await startServer(config, createLogger('silent'))
t.teardown(() => server.stop())
const base = `http://127.0.0.1:${server.port}`

t.test('healthz and readyz', async (t) => {
  const h = await fetch(`${base}/healthz`)
  t.equal(h.status, 200)
  t.same(await h.json(), { status: 'ok' })
  const r = await fetch(`${base}/readyz`)
  const body = await r.json() as { status: string, checks: Record<string, unknown> }
  t.equal(body.checks.store, true)
  t.equal(body.checks.geo, true)
  t.equal(r.status, body.status === 'ready' ? 200 : 503)
  // The first snapshot is built shortly after start; then the service is ready.
  let ready = r.status === 200
  for (let i = 0; i < 200 && !ready; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    ready = (await fetch(`${base}/readyz`)).status === 200
  }
  t.ok(ready, 'ready once the first snapshot is built')
})

t.test('readyz?for=PART: what each part of the node can do; another part is refused', async (t) => {
  const all = await (await fetch(`${base}/readyz`)).json() as { can: { signals: boolean, feeds: boolean } }
  t.same(Object.keys(all.can), ['signals', 'feeds'], 'the answer says what the node can do')
  for (const part of ['signals', 'feeds'] as const) {
    const r = await fetch(`${base}/readyz?for=${part}`)
    t.equal(r.status, all.can[part] ? 200 : 503, part)
  }
  const cases = [
    { description: 'an unknown part', query: 'for=nodes', value: 'nodes' },
    { description: 'upper case', query: 'for=SIGNALS', value: 'SIGNALS' },
  ]
  for (const c of cases) {
    const r = await fetch(`${base}/readyz?${c.query}`)
    t.equal(r.status, 400, c.description)
    t.same(await r.json(), { error: 'ValidationError', message: 'Validation failed', code: 400, details: [{ field: 'for', message: 'must be signals or feeds', value: c.value }] }, c.description)
  }
})

t.test('unknown routes answer 404 JSON', async (t) => {
  for (const [method, path] of [['GET', '/nope'], ['POST', '/v3/signal'], ['GET', '/v1/threat']] as const) {
    const r = await fetch(`${base}${path}`, { method })
    t.equal(r.status, 404, `${method} ${path}`)
    t.match(r.headers.get('content-type'), /^application\/json/)
    t.same(await r.json(), { error: 'NotFoundError', message: 'not found', code: 404 })
  }
})

t.test('GET / says where the console, the OpenAPI document and the docs are (issue 36)', async (t) => {
  const r = await fetch(`${base}/`)
  t.equal(r.status, 200)
  t.match(await r.json(), { service: 'threatfeed', console: '/console', openapi: '/openapi.json', health: '/healthz', docs: /README\.md and docs\// })
  const head = await fetch(`${base}/`, { method: 'HEAD' })
  t.equal(head.status, 200)
  t.equal(await head.text(), '')
  const del = await fetch(`${base}/`, { method: 'DELETE' })
  t.equal(del.status, 405)
  t.equal(del.headers.get('allow'), 'GET, HEAD')
  // Each link answers.
  for (const path of ['/console', '/openapi.json', '/healthz']) t.not((await fetch(`${base}${path}`)).status, 404, path)
})

t.test('HEAD of an unknown route: 404 headers, no body, connection kept', async (t) => {
  const r = await fetch(`${base}/nope`, { method: 'HEAD' })
  t.equal(r.status, 404)
  t.equal(r.headers.get('content-length'), String(JSON.stringify({ error: 'NotFoundError', message: 'not found', code: 404 }).length))
  t.equal(await r.text(), '')
  const again = await fetch(`${base}/healthz`)
  t.equal(again.status, 200)
})

t.test('metrics in Prometheus text format count requests by route and status', async (t) => {
  await fetch(`${base}/healthz`)
  await fetch(`${base}/nope`)
  const r = await fetch(`${base}/metrics`)
  t.equal(r.status, 200)
  t.match(r.headers.get('content-type'), /^text\/plain/)
  const text = await r.text()
  t.match(text, /threatfeed_http_requests_total\{route="healthz",status="200"\} \d+/)
  t.match(text, /threatfeed_http_requests_total\{route="unknown",status="404"\} \d+/)
  t.match(text, /threatfeed_http_request_duration_seconds_bucket\{le="0\.001",route="healthz"\} \d+/)
  t.match(text, /threatfeed_http_request_duration_seconds_bucket\{le="\+Inf",route="healthz"\} [1-9]\d*/)
  t.match(text, /threatfeed_http_request_duration_seconds_count\{route="healthz"\} [1-9]\d*/)
  // Buckets are cumulative: each is at least the one before.
  const buckets = [...text.matchAll(/threatfeed_http_request_duration_seconds_bucket\{le="[^"]+",route="healthz"\} (\d+)/g)].map((m) => Number(m[1]))
  t.same(buckets, [...buckets].sort((a, b) => a - b), 'cumulative buckets')
  t.match(text, /threatfeed_process_resident_memory_bytes \d+/)
})

t.test('metric names pass promtool check metrics: no gauge ends in _total, every counter does (issue 36)', async (t) => {
  const text = await (await fetch(`${base}/metrics`)).text()
  const types = [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => ({ name: m[1]!, type: m[2]! }))
  t.ok(types.length > 20, `${types.length} metrics`)
  t.same(types.filter((m) => m.type !== 'counter' && m.name.endsWith('_total')).map((m) => m.name), [], 'non-counters ending in _total')
  t.same(types.filter((m) => m.type === 'counter' && !m.name.endsWith('_total')).map((m) => m.name), [], 'counters without _total')
  // The handles by type are there; their sum is PromQL's to take.
  t.match(text, /^# TYPE threatfeed_nodejs_active_handles gauge$/m)
})

t.test('a key revoked from the CLI in another process is refused by the running server within 1 s', async (t) => {
  const ws = await server.store.workspaces.create({ name: 'acme', subscription: 'active' })
  const key = generateApiKey()
  const stored = await server.store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
  const poll = async (): Promise<number> => (await fetch(`${base}/v1/threat/feeds`, { headers: { Authorization: `Bearer ${key}` } })).status
  // The server picks up the new key within its poll interval too.
  let before = 0
  for (let i = 0; i < 100 && before !== 200; i++) {
    before = await poll()
    if (before !== 200) await new Promise((resolve) => setTimeout(resolve, 20))
  }
  t.equal(before, 200, 'accepted before revocation')

  await exec(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'key', 'revoke', '--id', stored.id], { env: { ...process.env, THREATFEED_DATA_DIR: dir } })
  const revokedAt = Date.now()
  let refusedAfter = -1
  while (Date.now() - revokedAt < 2000) {
    const status = await poll()
    if (status !== 200) { refusedAfter = Date.now() - revokedAt; t.equal(status, 401); break }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  t.ok(refusedAfter >= 0 && refusedAfter <= 1000, `refused ${refusedAfter} ms after the CLI exited`)
})
