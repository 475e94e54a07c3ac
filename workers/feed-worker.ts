/**
 * Piscina entry point for feed building: a thin shell around src/feed/render/. It keeps the geo
 * index it was last sent (one SharedArrayBuffer-backed copy per worker and index version), turns
 * every failure into `{ ok: false, code, message }` (errors do not cross threads intact), and
 * answers with buffers that are shared (networks, text) or moved (the rest), never cloned.
 */
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { parentPort, threadId, workerData } from 'node:worker_threads'
import { GeoIndex } from '../src/geo/geo-index.js'
import { computeNetworks, needsGeo, networksKey, shareResult, withMeta } from '../src/feed/render/compute-networks.js'
import { renderStream } from '../src/feed/render/render-stream.js'
import { renderDelta } from '../src/feed/render/delta-text.js'
import { gzipBytes } from '../src/feed/render/gzip.js'
import { niceThisThread } from '../src/pool/thread-priority.js'
import {
  GEO_MISSING, transferOutcome,
  type ComputeResult, type ComputeTask, type DeltaResult, type DeltaTask, type GeoRef, type PoolWorkerData, type RenderResult, type RenderTask, type TaskEnvelope, type TaskOutcome, type TaskStarted,
} from '../src/pool/protocol.js'

let geo: { version: number, index: GeoIndex } | null = null

// Builds run niced (src/pool/thread-priority.ts), so the threads answering polls get a core first
// when builds fill them: on 2 cores a rebuild of millions of rules otherwise delays every poll by
// the OS scheduler's slices.
niceThisThread((workerData as PoolWorkerData | null)?.nice ?? null)

/** The task's geo index: kept from an earlier task, or taken from this one; null when absent. */
function useGeo (ref: GeoRef): GeoIndex | null {
  if (geo !== null && geo.version === ref.version) return geo.index
  if (ref.data === undefined) return null
  geo = { version: ref.version, index: GeoIndex.fromTransferable(ref.data) }
  return geo.index
}

/**
 * The last few networks computed here, by networksKey and geo index: lists selecting the same
 * rules (or a rebuild that changed only a list's name) take them instead of expanding, coalescing
 * and carving again — 40 ms of a 131,072-entry feed for the ~3 ms of hashing the task. The arrays
 * are shared memory, so answering with them again copies nothing either.
 */
const computed: Array<{ key: string, geo: GeoIndex | null, value: ComputeResult }> = []
const COMPUTED_KEPT = 2

function computeOnce (task: ComputeTask, index: GeoIndex | null): ComputeResult {
  const key = networksKey(task)
  const i = computed.findIndex((c) => c.key === key && c.geo === index)
  const hit = i >= 0 ? computed.splice(i, 1)[0]! : null
  const value = hit !== null ? withMeta(hit.value, task.meta) : shareResult(computeNetworks(task, index))
  computed.push({ key, geo: index, value })
  if (computed.length > COMPUTED_KEPT) computed.shift()
  return value
}

/**
 * A task leaves several MB of dead buffers behind (its cloned input, the text before it was
 * packed, zlib's output). V8 frees a buffer only when a GC finds it dead, and a worker allocates
 * too few JS objects to run one often: during a burst of builds the dead buffers piled up to the
 * external-memory limit (~50 MB per worker), and glibc keeps a thread's peak mapped after the
 * buffers are freed. So after every task a minor GC frees the task's young buffers (they die
 * young), and once the worker is idle a full GC takes the rest. Both run after the answer is
 * posted, so they are not on the task's path.
 */
const IDLE_GC_MS = 50
setFlagsFromString('--expose-gc')
const collect = runInNewContext('gc') as (options?: { type: 'minor' | 'major' }) => void
let idleTimer: NodeJS.Timeout | null = null

function collectAfterTask (): void {
  setImmediate(() => collect({ type: 'minor' }))
  if (idleTimer !== null) clearTimeout(idleTimer)
  idleTimer = setTimeout(() => { idleTimer = null; collect() }, IDLE_GC_MS)
  idleTimer.unref()
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
    let index: GeoIndex | null = null
    if (needsGeo(task)) {
      index = useGeo(task.geo)
      if (index === null) return { ok: false, code: GEO_MISSING, message: `geo index version ${task.geo.version} not held` }
    }
    const value = computeOnce(task, index)
    collectAfterTask()
    return { ok: true, value, held: { threadId, geoVersion: geo?.version ?? 0 } }
  } catch (e) {
    return failure(e)
  }
}

export async function render (task: RenderTask & Partial<TaskEnvelope>): Promise<TaskOutcome<RenderResult>> {
  announce(task)
  try {
    const value = renderStream(task)
    collectAfterTask()
    return transferOutcome({ ok: true, value }, [value.text, value.local, value.fresh.bytes.buffer])
  } catch (e) {
    return failure(e)
  }
}

/** Delta bodies of one build (src/http/feed-delta.ts prerenderDeltas): small, many, one task. */
export async function deltas (task: DeltaTask & Partial<TaskEnvelope>): Promise<TaskOutcome<DeltaResult>> {
  announce(task)
  try {
    const bodies = task.jobs.map((job) => {
      // Copies into buffers of their own: a small Buffer is a view of Node's shared pool, which
      // must not be transferred.
      const identity = new Uint8Array(renderDelta(job.format, job.removed, job.added, job.names))
      return { identity, gzip: new Uint8Array(gzipBytes(identity)) }
    })
    return transferOutcome({ ok: true, value: { bodies } }, bodies.flatMap((b) => [b.identity.buffer, b.gzip.buffer]))
  } catch (e) {
    return failure(e)
  }
}
