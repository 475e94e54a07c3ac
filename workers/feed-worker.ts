/**
 * Piscina entry point for feed building: a thin shell around src/feed/render/. It keeps the geo
 * index it was last sent (one SharedArrayBuffer-backed copy per worker and index version), turns
 * every failure into `{ ok: false, code, message }` (errors do not cross threads intact), and
 * moves result buffers back instead of cloning them.
 */
import { parentPort, threadId } from 'node:worker_threads'
import { GeoIndex } from '../src/geo/geo-index.js'
import { computeBuffers, computeNetworks, needsGeo } from '../src/feed/render/compute-networks.js'
import { renderStream } from '../src/feed/render/render-stream.js'
import {
  FAULTS_ENV, GEO_MISSING, transferOutcome,
  type ComputeResult, type ComputeTask, type Fault, type GeoRef, type RenderResult, type RenderTask, type TaskEnvelope, type TaskOutcome, type TaskStarted,
} from '../src/pool/protocol.js'

let geo: { version: number, index: GeoIndex } | null = null

/** The task's geo index: kept from an earlier task, or taken from this one; null when absent. */
function useGeo (ref: GeoRef): GeoIndex | null {
  if (geo !== null && geo.version === ref.version) return geo.index
  if (ref.data === undefined) return null
  geo = { version: ref.version, index: GeoIndex.fromTransferable(ref.data) }
  return geo.index
}

const faultsEnabled = process.env[FAULTS_ENV] === '1'

function injectFault (fault: Fault | undefined): void {
  if (fault === undefined || !faultsEnabled) return
  if (fault === 'throw') throw new Error('injected fault')
  if (fault === 'crash') {
    setImmediate(() => { throw new Error('injected crash') })
    return
  }
  if (fault === 'exit') process.exit(1)
  // 'hang': a worker stuck in a loop, as a pathological input could make it.
  for (;;) { /* until terminated */ }
}

/** Tells the pool the task runs now, so its timeout starts (see protocol.ts TaskStarted). */
function announce (task: Partial<TaskEnvelope>): void {
  if (typeof task.token === 'number') parentPort?.postMessage({ tfTaskStarted: task.token } satisfies TaskStarted)
}

function failure (e: unknown): { ok: false, code: string, message: string } {
  const err = e as { code?: unknown, message?: unknown }
  return {
    ok: false,
    code: typeof err?.code === 'string' ? err.code : 'TF_ERR_WORKER',
    message: typeof err?.message === 'string' ? err.message : String(e),
  }
}

export async function compute (task: ComputeTask & Partial<TaskEnvelope>): Promise<TaskOutcome<ComputeResult>> {
  announce(task)
  try {
    injectFault(task.fault)
    if (task.fault === 'crash' && faultsEnabled) await new Promise(() => {})
    let index: GeoIndex | null = null
    if (needsGeo(task)) {
      index = useGeo(task.geo)
      if (index === null) return { ok: false, code: GEO_MISSING, message: `geo index version ${task.geo.version} not held` }
    }
    const value = computeNetworks(task, index)
    return transferOutcome({ ok: true, value, held: { threadId, geoVersion: geo?.version ?? 0 } }, computeBuffers(value))
  } catch (e) {
    return failure(e)
  }
}

export async function render (task: RenderTask & Partial<TaskEnvelope>): Promise<TaskOutcome<RenderResult>> {
  announce(task)
  try {
    injectFault(task.fault)
    if (task.fault === 'crash' && faultsEnabled) await new Promise(() => {})
    const value = renderStream(task)
    return transferOutcome({ ok: true, value }, [value.arena, value.cache.bytes.buffer])
  } catch (e) {
    return failure(e)
  }
}
