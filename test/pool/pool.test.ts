import { fileURLToPath } from 'node:url'
import t from 'tap'
import { createPool } from '../../src/pool/pool.js'
import { loadGeoIndex } from '../../src/geo/load.js'
import { computeNetworks } from '../../src/feed/render/compute-networks.js'
import { renderStream } from '../../src/feed/render/render-stream.js'
import type { ComputeTask, RenderTask, TargetGroup } from '../../src/pool/protocol.js'
import { ThreatfeedError } from '../../src/errors.js'
import { FAULTY_WORKER, clearFaults, injectFault } from '../fixtures/pool/faults.js'

const FIXTURES = fileURLToPath(new URL('../fixtures/geo/maxmind', import.meta.url))
const geo = await loadGeoIndex({ countryDb: `${FIXTURES}/GeoLite2-Country-Test.mmdb`, asnDb: `${FIXTURES}/GeoLite2-ASN-Test.mmdb` })

const group = (ips: string[], extra: Partial<TargetGroup> = {}): TargetGroup =>
  ({ confidence: 'high', severity: 'high', ips: ips.map((i) => i + '\n').join(''), asns: [], countries: [], ...extra })
const input: Omit<ComputeTask, 'geo'> = { block: [group(['192.0.2.0/24'], { countries: ['SE'], asns: [71] })], allow: [], carve: group(['192.0.2.7']), meta: 'x' }

function renderTask (networks: RenderTask['networks']): RenderTask {
  return { stream: 'lines', action: 'block', networks, name: 'n', description: 'd', generated: { v4: 0, v6: 0, both: 0 }, limit: 131072, listFeed: false, gzipLevel: 6, cache: null }
}

const pool = createPool({ workers: 2, taskTimeoutMs: 1500, filename: FAULTY_WORKER })
t.teardown(() => pool.destroy())
t.teardown(clearFaults)
pool.setGeo(geo.toTransferable())

t.test('compute and render in workers give what they give in-process', async (t) => {
  const remote = await pool.compute(input)
  const local = computeNetworks({ ...input, geo: { version: 0 } }, geo)
  t.same(Array.from(remote.block.total.v4), Array.from(local.block.total.v4))
  t.same(Array.from(remote.block.total.v6), Array.from(local.block.total.v6))
  t.same(remote.block.hash, local.block.hash)
  t.ok(remote.block.total.v4.buffer instanceof SharedArrayBuffer, 'networks come back in shared memory: render tasks get them without a copy')
  const r = await pool.render(renderTask(remote.block))
  const l = renderStream(renderTask(local.block))
  t.ok(r.text instanceof SharedArrayBuffer)
  t.ok(r.local instanceof ArrayBuffer)
  t.same(Buffer.from(r.text), Buffer.from(l.text))
  t.same(Buffer.from(r.local), Buffer.from(l.local))
  t.same(Buffer.from(r.fresh.bytes), Buffer.from(l.fresh.bytes))
  t.same([r.textKey, r.chunkKeys, r.textPieces], [l.textKey, l.chunkKeys, l.textPieces])
  t.same(r.variants, l.variants)
})

t.test('the geo index reaches each worker once per version, not with every task', async (t) => {
  const round = async (): Promise<void> => { await Promise.all([pool.compute(input), pool.compute(input)]) }
  const settle = async (): Promise<number> => {
    // Until every thread has reported the version, tasks carry the index.
    const before = pool.stats.geoAttached
    for (let i = 0; i < 50; i++) {
      const mark = pool.stats.geoAttached
      await round()
      if (pool.stats.geoAttached === mark && i > 0) break
    }
    return pool.stats.geoAttached - before
  }
  await settle()
  const attached = pool.stats.geoAttached
  const resent = pool.stats.geoResends
  for (let i = 0; i < 15; i++) await round()
  t.equal(pool.stats.geoAttached, attached, 'once every worker holds the index, 30 tasks carry only its version')
  t.equal(pool.stats.geoResends, resent)
  pool.setGeo(geo.toTransferable())
  const sent = await settle()
  t.ok(sent >= pool.threads, `a new version is sent again (${sent} tasks carried it)`)
  t.ok(sent <= 4 * pool.threads, 'a few tasks per worker, not every task')
  const settled = pool.stats.geoAttached
  for (let i = 0; i < 15; i++) await round()
  t.equal(pool.stats.geoAttached, settled)
  const noGeo = await pool.compute({ ...input, block: [group(['192.0.2.1'])] })
  t.equal(noGeo.block.total.v4.length, 2, 'tasks without ASNs or countries need no index')
})

async function rejection (p: Promise<unknown>): Promise<ThreatfeedError | null> {
  try {
    await p
    return null
  } catch (e) {
    return e instanceof ThreatfeedError ? e : null
  }
}

t.test('a failing, crashing, exiting or hanging worker rejects its task with a registry error; the pool recovers', async (t) => {
  // Each death costs a worker start-up (seconds under tsx), so each kind dies once, on one of the two task types.
  const cases = [
    { fault: 'throw', task: 'compute', code: 'TF_ERR_WORKER', message: /injected fault/ },
    { fault: 'throw', task: 'render', code: 'TF_ERR_WORKER', message: /injected fault/ },
    { fault: 'crash', task: 'compute', code: 'TF_ERR_WORKER', message: /injected crash/ },
    { fault: 'exit', task: 'render', code: 'TF_ERR_WORKER', message: /exited/ },
    { fault: 'hang', task: 'compute', code: 'TF_ERR_WORKER_TIMEOUT', message: /timed out after 1500 ms/ },
  ] as const
  const networks = (await pool.compute(input)).block
  for (const c of cases) {
    injectFault(c.fault)
    const started = Date.now()
    const e = await rejection(c.task === 'compute' ? pool.compute(input) : pool.render(renderTask(networks)))
    t.equal(e?.code, c.code, `${c.fault} in ${c.task}`)
    t.match(e?.message, c.message)
    if (c.fault === 'hang') t.ok(Date.now() - started >= 1500, 'the timeout counts the run')
    const ok = await pool.render(renderTask(networks))
    t.ok(ok.variants.length > 0, `${c.fault}: the next task succeeds`)
  }
  t.equal(pool.stats.timedOut, 1)
})

t.test('a task naming countries or ASNs with no geo index loaded fails with TF_ERR_GEO_MISSING', async (t) => {
  const bare = createPool({ workers: 1, taskTimeoutMs: 1000 })
  t.teardown(() => bare.destroy())
  const e = await rejection(bare.compute(input))
  t.equal(e?.code, 'TF_ERR_GEO_MISSING')
  t.equal(e?.message, 'no geo index for a task that names ASNs or countries: none is loaded')
  t.equal(e?.status, 500)
  const plain = await bare.compute({ ...input, block: [group(['192.0.2.1'])] })
  t.equal(plain.block.total.v4.length, 2, 'tasks without ASNs or countries still run')
})

t.test('the production worker has no fault hook: a waiting fault does not touch its tasks', async (t) => {
  const plain = createPool({ workers: 1, taskTimeoutMs: 1000 })
  t.teardown(() => plain.destroy())
  injectFault('exit')
  const r = await plain.compute({ ...input, block: [group(['192.0.2.1'])] })
  t.same(Array.from(r.block.total.v4), [0xc0000201, 32])
  t.equal(plain.stats.failed, 0)
  clearFaults()
})
