import { fileURLToPath } from 'node:url'
import t from 'tap'
import { loadGeoIndex } from '../../src/geo/load.js'
import { GEO_MISSING, type ComputeResult, type ComputeTask, type RenderResult, type TargetGroup, type TaskOutcome } from '../../src/pool/protocol.js'
import * as worker from '../../workers/feed-worker.js'
import { throwingTask } from '../fixtures/pool/faults.js'

const FIXTURES = fileURLToPath(new URL('../fixtures/geo/maxmind', import.meta.url))
const geo = await loadGeoIndex({ countryDb: `${FIXTURES}/GeoLite2-Country-Test.mmdb`, asnDb: `${FIXTURES}/GeoLite2-ASN-Test.mmdb` })
const group = (ips: string, extra: Partial<TargetGroup> = {}): TargetGroup => ({ confidence: 'high', severity: 'high', ips, asns: [], countries: [], ...extra })
const TRANSFERABLE = Symbol.for('Piscina.transferable')
const VALUE = Symbol.for('Piscina.valueOf')

/** A moved answer is a box holding the value and its transfer list; unwrap it as Piscina does. */
function unwrap<T> (answer: TaskOutcome<T>): { outcome: TaskOutcome<T>, transfer: ArrayBuffer[] } {
  const box = answer as unknown as Record<symbol, unknown>
  if (TRANSFERABLE in box) return { outcome: box[VALUE] as TaskOutcome<T>, transfer: box[TRANSFERABLE] as ArrayBuffer[] }
  return { outcome: answer, transfer: [] }
}

function task (over: Partial<ComputeTask> = {}): ComputeTask {
  return { geo: { version: 7 }, block: [group('192.0.2.0/24\n', { countries: ['SE'] })], allow: [], carve: group(''), meta: '', ...over }
}

t.test('a task naming an unknown geo version is answered GEO_MISSING; with the index it is kept for later tasks', async (t) => {
  const missing = unwrap(await worker.compute(task()))
  t.same(missing.outcome, { ok: false, code: GEO_MISSING, message: 'geo index version 7 not held' })
  const first = unwrap(await worker.compute(task({ geo: { version: 7, data: geo.toTransferable() } })))
  t.equal(first.outcome.ok, true)
  const again = unwrap(await worker.compute(task()))
  t.equal(again.outcome.ok, true, 'the version alone suffices now')
  const r = (again.outcome as { value: ComputeResult }).value
  t.ok(r.block.total.v4.length > 2, 'the country expanded')
  t.ok(r.block.total.v4.buffer instanceof SharedArrayBuffer, 'result arrays are shared, not cloned')
  t.equal(r.block.groups[0]!.v4, r.block.total.v4, "one group's arrays are the total's, shared once")
  t.equal(unwrap(await worker.compute(task({ geo: { version: 8 } }))).outcome.ok, false, 'a newer version is asked for')
})

t.test('networks computed once serve the next task with the same targets, under its own meta', async (t) => {
  const ips = Array.from({ length: 300 }, (_, i) => `10.${i >> 8}.${i & 255}.1\n`).join('')
  const first = unwrap(await worker.compute(task({ block: [group(ips)], meta: 'list a' })))
  const second = unwrap(await worker.compute(task({ block: [group(ips)], meta: 'list b' })))
  const a = (first.outcome as { value: ComputeResult }).value
  const b = (second.outcome as { value: ComputeResult }).value
  t.equal(b.block.total.v4, a.block.total.v4, 'the same shared arrays, not computed again')
  t.not(b.block.hash.v4, a.block.hash.v4, 'the content hash covers the meta')
  const other = unwrap(await worker.compute(task({ block: [group(ips + '192.0.2.1\n')], meta: 'list a' })))
  t.not((other.outcome as { value: ComputeResult }).value.block.total.v4, a.block.total.v4, 'other targets, other networks')
})

t.test('render shares its text and moves its other buffers', async (t) => {
  const ips = Array.from({ length: 500 }, (_, i) => `10.${i >> 8}.${i & 255}.1\n`).join('')
  const c = unwrap(await worker.compute(task({ block: [group(ips)] })))
  const networks = (c.outcome as { value: ComputeResult }).value.block
  const r = unwrap<RenderResult>(await worker.render({ stream: 'rows', action: 'block', networks, name: '', description: '', generated: { v4: 0, v6: 0, both: 0 }, limit: 1000, listFeed: true, gzipLevel: 6, cache: null }))
  t.equal(r.outcome.ok, true)
  const value = (r.outcome as { value: RenderResult }).value
  t.ok(value.text instanceof SharedArrayBuffer)
  t.notOk(r.transfer.includes(value.text as unknown as ArrayBuffer), 'shared memory is not transferred')
  t.ok(r.transfer.includes(value.local))
  t.ok(r.transfer.includes(value.fresh.bytes.buffer as ArrayBuffer))
  t.equal(new Set(r.transfer).size, r.transfer.length, 'no buffer listed twice')
})

t.test('errors do not cross the boundary: a failing task answers { ok: false, code, message }', async (t) => {
  t.same(unwrap(await worker.compute(throwingTask(task()))).outcome, { ok: false, code: 'TF_ERR_WORKER', message: 'injected fault' })
  const bad = unwrap(await worker.render({ stream: 'lines', action: 'block', networks: null } as never))
  t.equal(bad.outcome.ok, false)
  t.match((bad.outcome as { message: string }).message, /null|undefined/)
})
