/**
 * The worker pool: Piscina behind typed task functions. What the rest of the service sees is
 * `compute(task)` and `render(task)` resolving with results, or rejecting with registry errors:
 *
 * - a worker's `{ ok: false, code, message }` → ThreatfeedError TF_ERR_WORKER;
 * - a task running past `taskTimeoutMs` (counted from when a worker starts it, not from when it
 *   was queued) → TF_ERR_WORKER_TIMEOUT; Piscina terminates that worker (the only way to stop a
 *   thread stuck in a loop) and starts a fresh one;
 * - a worker that dies (uncaught exception, process.exit) → TF_ERR_WORKER; replaced likewise.
 *
 * The geo index reaches each worker about once per version. Piscina routes a task to any idle
 * worker, so the pool cannot tell in advance which worker runs it; instead each worker reports the
 * version it holds with its answers, the index rides along with tasks (its arrays are
 * SharedArrayBuffers: shared, not copied) until every live thread has reported it, and from then
 * on tasks carry the version number only. A worker that lacks it all the same (one just started
 * to replace a dead one) answers GEO_MISSING and gets the task again with the index.
 */
import { Piscina } from 'piscina'
import { ThreatfeedError } from '../errors.js'
import type { GeoIndexData } from '../geo/geo-index.js'
import {
  GEO_MISSING, isTaskStarted,
  type ComputeResult, type ComputeTask, type DeltaResult, type DeltaTask, type PoolWorkerData, type RenderResult, type RenderTask, type TaskOutcome,
} from './protocol.js'
import { threadEntry } from '../threads/entry.js'

export interface PoolOptions {
  /** Worker threads (THREATFEED_WORKERS). */
  workers: number
  /** A task running longer is abandoned and its worker terminated. */
  taskTimeoutMs: number
  /**
   * The worker entry: by default workers/feed-worker beside the running code. Tests point it at a
   * worker of their own that exports the same tasks (test/fixtures/pool/), as piscina's do.
   */
  filename?: string
  /**
   * The nice value each worker gives its thread (thread-priority.ts: `backgroundNice`), so builds
   * yield the cores to the threads answering polls; null or absent: the creator's.
   */
  nice?: number | null
}

/** Task input without the geo reference: the pool fills it in. */
export type ComputeInput = Omit<ComputeTask, 'geo'>

export interface PoolStats {
  completed: number
  failed: number
  timedOut: number
  /** Tasks sent with the geo index attached, up front or again after GEO_MISSING. */
  geoAttached: number
  /** Tasks sent again with the index after a worker answered GEO_MISSING. */
  geoResends: number
}

export interface FeedPool {
  /** Makes `index` the geo index of every later compute task. */
  setGeo (index: GeoIndexData): void
  compute (task: ComputeInput): Promise<ComputeResult>
  render (task: RenderTask): Promise<RenderResult>
  /** Delta bodies rendered ahead of requests (feed deltas, docs/deltas.md). */
  renderDeltas (task: DeltaTask): Promise<DeltaResult>
  readonly stats: Readonly<PoolStats>
  readonly threads: number
  destroy (): Promise<void>
}

/** The worker entry beside the running code (dist/workers/feed-worker.js, or its .ts source). */
const worker = threadEntry(import.meta.url, '../../workers/feed-worker')

function isAbort (e: unknown): boolean {
  return (e as { name?: string } | null)?.name === 'AbortError'
}

/**
 * @example
 *   const pool = createPool({ workers: 2, taskTimeoutMs: 30_000 })
 *   pool.setGeo(geoIndex.toTransferable())
 *   const networks = await pool.compute({ block, allow, carve, meta })
 */
export function createPool (opts: PoolOptions): FeedPool {
  const piscina = new Piscina({
    filename: opts.filename ?? worker.file,
    minThreads: opts.workers,
    maxThreads: opts.workers,
    // Builds are bursty (a change, then quiet for a rebuild interval); keep the threads warm.
    idleTimeout: 60_000,
    workerData: { nice: opts.nice ?? null } satisfies PoolWorkerData,
    // From the TypeScript sources, workers load tsx and none of the parent's --import hooks, which
    // cost seconds per worker start under a test runner.
    ...(worker.loader.length > 0 ? { execArgv: [...worker.loader] } : {}),
  })
  // A worker dying between tasks is reported here; the tasks it ran are rejected on their own.
  piscina.on('error', () => {})
  let geo: { version: number, data: GeoIndexData } | null = null
  const stats: PoolStats = { completed: 0, failed: 0, timedOut: 0, geoAttached: 0, geoResends: 0 }
  /** Geo index version each thread reported holding (threadId → version). */
  const holders = new Map<number, number>()
  /** True once every live thread holds the current index: tasks then name its version only. */
  const everyThreadHolds = (version: number): boolean => piscina.threads.every((w) => holders.get(w.threadId) === version)
  // Timeouts start when a worker announces the task (protocol.ts TaskStarted), not on submission.
  const starts = new Map<number, () => void>()
  let nextToken = 1
  piscina.on('message', (m: unknown) => {
    if (isTaskStarted(m)) starts.get(m.tfTaskStarted)?.()
  })

  async function run<T> (name: 'compute' | 'render' | 'deltas', task: object): Promise<T> {
    const token = nextToken++
    const ac = new AbortController()
    let timer: NodeJS.Timeout | undefined
    const arm = (ms: number): void => {
      clearTimeout(timer)
      timer = setTimeout(() => ac.abort(), ms)
      timer.unref()
    }
    // A task that never starts (every worker wedged at start-up) still fails, much later.
    arm(opts.taskTimeoutMs * QUEUE_FACTOR)
    starts.set(token, () => arm(opts.taskTimeoutMs))
    let outcome: TaskOutcome<T>
    try {
      outcome = await piscina.run({ ...task, token }, { name, signal: ac.signal }) as TaskOutcome<T>
    } catch (e) {
      if (isAbort(e) || ac.signal.aborted) {
        stats.timedOut++
        throw new ThreatfeedError('TF_ERR_WORKER_TIMEOUT', [opts.taskTimeoutMs], { cause: e })
      }
      stats.failed++
      throw new ThreatfeedError('TF_ERR_WORKER', [(e as Error)?.message ?? String(e)], { cause: e })
    } finally {
      clearTimeout(timer)
      starts.delete(token)
    }
    if (!outcome.ok) {
      if (outcome.code === GEO_MISSING) throw new GeoMissing()
      stats.failed++
      throw new ThreatfeedError('TF_ERR_WORKER', [`${outcome.code}: ${outcome.message}`])
    }
    stats.completed++
    if (outcome.held !== undefined) holders.set(outcome.held.threadId, outcome.held.geoVersion)
    return outcome.value
  }

  return {
    setGeo (data) {
      geo = { version: (geo?.version ?? 0) + 1, data }
    },
    async compute (input) {
      const current = geo
      // The index's arrays are SharedArrayBuffers: attaching it shares them, it copies nothing.
      // It is attached until every thread has it, and not after.
      const attach = current !== null && !everyThreadHolds(current.version)
      if (attach) stats.geoAttached++
      try {
        return await run<ComputeResult>('compute', { ...input, geo: attach ? current : { version: current?.version ?? 0 } })
      } catch (e) {
        if (!(e instanceof GeoMissing)) throw e
        if (geo === null) throw new ThreatfeedError(GEO_MISSING, ['none is loaded'])
        // The latest index: if it changed meanwhile, the newer one is the one to use anyway.
        stats.geoResends++
        stats.geoAttached++
        try {
          return await run<ComputeResult>('compute', { ...input, geo })
        } catch (again) {
          // With the index attached a worker cannot miss it; say so rather than leak GeoMissing.
          if (again instanceof GeoMissing) throw new ThreatfeedError(GEO_MISSING, ['the worker did not take the index sent with the task'])
          throw again
        }
      }
    },
    render (task) {
      return run<RenderResult>('render', task)
    },
    renderDeltas (task) {
      return run<DeltaResult>('deltas', task)
    },
    get stats () { return stats },
    get threads () { return piscina.threads.length },
    async destroy () {
      await piscina.destroy()
    },
  }
}

/** A worker's GEO_MISSING answer, inside this file only: compute() resends or turns it into TF_ERR_GEO_MISSING. */
class GeoMissing extends Error {}

/** How many task timeouts a task may wait in the queue before it is given up. */
const QUEUE_FACTOR = 10
