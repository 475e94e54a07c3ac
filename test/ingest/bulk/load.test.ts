import t from 'tap'
import { Readable } from 'node:stream'
import { loadEntries } from '../../../src/ingest/bulk/load.js'
import { readEntries, type SourceEntry } from '../../../src/ingest/bulk/read-entries.js'
import { startScriptedServer } from './scripted-server.js'

const ndjson = (n: number, f: (i: number) => string = (i) => `{"type":"access_rules","action":"block","ip":"10.0.${i >> 8 & 255}.${i & 255}"}`) =>
  Readable.from([Buffer.from(Array.from({ length: n }, (_, i) => f(i)).join('\n') + '\n')])

t.test('1000-entry batches, bounded concurrency, entries sent byte for byte', async (t) => {
  const srv = await startScriptedServer(() => ({ status: 200, body: { success: true }, delayMs: 20 }))
  t.teardown(() => srv.close())
  const progress: number[] = []
  const summary = await loadEntries(readEntries(ndjson(5500, (i) => `{ "type":"access_rules", "action":"block", "ip":"10.1.${i >> 8 & 255}.${i & 255}" }`)), {
    url: srv.url, key: 'k', concurrency: 3, onProgress: (p) => progress.push(p.accepted),
  })
  t.match(summary, { entries: 5500, accepted: 5500, failed: 0, batches: 6, retries: 0, stopped: null })
  t.same(srv.bodies.map((b) => (JSON.parse(b) as unknown[]).length).sort((a, b) => a - b), [500, 1000, 1000, 1000, 1000, 1000])
  t.ok(srv.maxInFlight <= 3 && srv.maxInFlight >= 2, `at most 3 in flight (saw ${srv.maxInFlight})`)
  t.ok(srv.bodies[0]!.startsWith('[{ "type":"access_rules", "action":"block", "ip":"10.1.0.'), 'the entry text is not re-serialized')
  t.equal(progress.at(-1), 5500)
})

t.test('per-entry outcomes: local JSON errors, 206, 400', async (t) => {
  const srv = await startScriptedServer((n, body) => {
    const size = (JSON.parse(body) as unknown[]).length
    if (n === 0) return { status: 206, body: { success: false, message: `Processed ${size} entries, 1 failed`, errors: ['Entry 1: ip: not an IP address'] } }
    return { status: 400, body: { error: 'BadRequestError', message: 'batch must contain 1 to 1000 entries (got 2000)', code: 400 } }
  })
  t.teardown(() => srv.close())
  const failed: Array<[number, string]> = []
  const summary = await loadEntries(readEntries(ndjson(4, (i) => i === 2 ? '{"broken"' : `{"i":${i}}`)), {
    url: srv.url, key: 'k', concurrency: 1, batchSize: 2, onFailed: (e: SourceEntry, reason) => failed.push([e.index, reason]),
  })
  t.match(summary, { entries: 4, accepted: 1, failed: 3, batches: 2 })
  t.same(failed.sort((a, b) => a[0] - b[0]), [[1, 'ip: not an IP address'], [2, 'not valid JSON'], [3, 'batch rejected: batch must contain 1 to 1000 entries (got 2000)']])
  t.same(srv.bodies, ['[{"i":0},{"i":1}]', '[{"i":3}]'], 'the broken entry is never sent')
})

t.test('a fatal answer stops the import; the rest is reported as not sent', async (t) => {
  const srv = await startScriptedServer((n) => n === 0 ? { status: 200, body: {} } : { status: 401, body: { message: 'invalid or missing API key' } })
  t.teardown(() => srv.close())
  const reasons = new Map<string, number>()
  const summary = await loadEntries(readEntries(ndjson(10)), {
    url: srv.url, key: 'k', concurrency: 1, batchSize: 3, onFailed: (_e, reason) => reasons.set(reason, (reasons.get(reason) ?? 0) + 1),
  })
  t.match(summary, { entries: 10, accepted: 3, failed: 7, batches: 2, stopped: 'HTTP 401: invalid or missing API key' })
  t.same([...reasons], [
    ['not sent: HTTP 401: invalid or missing API key', 3],
    ['not sent: import stopped (HTTP 401: invalid or missing API key)', 4],
  ])
  t.equal(srv.bodies.length, 2)
})

t.test('a byte cap splits batches before 1000 entries', async (t) => {
  const srv = await startScriptedServer(() => ({ status: 200, body: {} }))
  t.teardown(() => srv.close())
  const summary = await loadEntries(readEntries(ndjson(10, (i) => `{"i":${i},"pad":"${'x'.repeat(90)}"}`)), { url: srv.url, key: 'k', concurrency: 2, maxBatchBytes: 350 })
  t.equal(summary.accepted, 10)
  t.ok(srv.bodies.every((b) => Buffer.byteLength(b) <= 350), 'every body under the cap')
  t.equal(srv.bodies.length, 4)
})
