/**
 * The stream consumer on a thread of its own, for a store that offers one (BatchingStore#
 * consumerThread: the embedded store; ../store/consumer-thread.ts says what it hands over).
 *
 *   main thread (HTTP, ingest)                 consumer thread (the store's entry, then
 *                                              consumer-thread-body.ts)
 *   append a batch → durable → answer 200
 *   offer(batch) ── packed batch (encoded) ──▶ StreamConsumer: gather up to a pass of records,
 *                                              apply them with the checkpoint in one synchronous
 *   position, waitFor() ◀──── position ─────── LMDB transaction (flushed), repeat
 *
 * Why: applying a record (B-tree writes, expiry log) costs about what accepting it does, and in
 * the server's thread it also held up every HTTP request for the length of a pass: at 4 batches
 * in flight a batch's latency is about four times the CPU the thread spends per batch, and the
 * target of issue 5 (p99 ≤ 50 ms) needs that under ~6 ms, where accepting alone takes 3–3.5 ms and
 * applying 3.8 ms. On this thread the two halves run on the machine's two cores (bench/ingest.ts:
 * in the same minutes, v1 at 4 in flight, 133–145k entries/s with p99 45–51 ms against 102–106k
 * with p99 66–67 ms for the consumer in the server's thread). The thread commits each pass itself
 * (LmdbEnv `syncWrites`): handing the commit to lmdb-js's writer thread from a worker thread cost
 * 20–60 ms per commit in an earlier attempt, which made it fall behind.
 *
 * Nothing about exactly-once changes: the rules and the checkpoint still commit together in the
 * consumer's transaction, and what the thread is handed is only a shortcut — records it was not
 * handed (appended by another process, or offered while it was being started again) it reads
 * from the stream, which is durable before a batch is acknowledged. A thread that dies is logged
 * and started again; until then accepted records wait on the stream (the backlog grows and the
 * ingest path waits, then sheds load, as it does for a slow consumer).
 */
import { Worker } from 'node:worker_threads'
import type { AppendedBatch } from '../ingest/batch.js'
import type { Logger } from '../log.js'
import type { ConsumerThreadData, ConsumerThreadHandoff } from '../store/consumer-thread.js'
import type { SweepPass } from '../store/types.js'
import { packBatch } from './packed-batch.js'
import type { Consumer, FailedRecord } from './consumer.js'
import { HealthTracker, type ConsumerHealth } from './consumer-health.js'
import { PositionWaiters } from './position-waiters.js'
import { withoutLoaders } from '../threads/entry.js'

export interface ThreadedConsumerOptions {
  /** The store's hand-off (BatchingStore#consumerThread): the thread opens the store too. */
  readonly handoff: ConsumerThreadHandoff
  readonly pollMs: number
  /** Checkpoint name; see StreamConsumer. */
  readonly name?: string
  /** Most records per transaction; see StreamConsumer. */
  readonly batchSize?: number
  /** Level of the thread's own JSON log lines (stdout, like the server's). */
  readonly logLevel: string
  readonly log: Pick<Logger, 'info' | 'warn' | 'error'>
  /** Wait before starting a thread that died again (default 1 s). */
  readonly restartMs?: number
  /** The thread's nice value (pool/thread-priority.ts); null or absent: its creator's. */
  readonly nice?: number | null
  /** Hears each sweep pass the thread made (setSweep). */
  readonly onSwept?: (pass: SweepPass) => void
}

/** What the thread's body is started with (ConsumerThreadData#consumer). */
export interface ConsumerThreadSettings {
  readonly pollMs: number
  readonly name: string | undefined
  readonly batchSize: number | undefined
  readonly logLevel: string
  readonly nice: number | null
}

/** Messages between the threads. */
export type ToConsumerThread =
  | { readonly type: 'offer', readonly batch: ArrayBuffer }
  /** Records were appended that are not offered: read them from the stream. */
  | { readonly type: 'nudge' }
  /** StreamConsumer#setSweep on the thread. */
  | { readonly type: 'sweep', readonly limit: number | null }
  | { readonly type: 'stop' }
  /**
   * Tests: the thread crashes between passes (an uncaught error, as a bug would throw). Not
   * worker.terminate(): a thread terminated inside a synchronous LMDB transaction leaves lmdb-js's
   * write lock held, and every later write of the process waits for it forever.
   */
  | { readonly type: 'crash' }
export type FromConsumerThread =
  | { readonly type: 'ready', readonly position: number }
  | { readonly type: 'position', readonly position: number }
  /** A pass failed (it is retried on the next poll); the server reports it (consumer-health.ts). */
  | { readonly type: 'apply-error', readonly message: string, readonly at: number, readonly first: FailedRecord | null }
  /** A sweep pass the thread made. */
  | { readonly type: 'swept', readonly pass: SweepPass }
  | { readonly type: 'stopped' }

/** How long stop() waits for the thread to finish its pass and close before terminating it. */
const STOP_TIMEOUT_MS = 10_000

/** The body the store's entry runs, beside this module (compiled, or the TypeScript source). */
const BODY = new URL(import.meta.url.endsWith('.ts') ? './consumer-thread-body.ts' : './consumer-thread-body.js', import.meta.url).href

/**
 * A Worker with `execArgv`, less the flags Node refuses in a thread: they are the whole
 * process's, already in effect. Node names them only in its error (ERR_WORKER_INVALID_EXEC_ARGV:
 * "…invalid execArgv flags: --trace-gc, --max-old-space-size=512"); they are left out and the
 * thread started again. Any other failure, or one the second try meets too, is thrown.
 */
export function threadWithFlags (file: string, workerData: unknown, execArgv: readonly string[]): Worker {
  try {
    return new Worker(file, { workerData, execArgv: [...execArgv] })
  } catch (e) {
    if ((e as { code?: unknown }).code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw e
    const named = /flags: (.*)$/.exec((e as Error).message)?.[1]?.split(', ') ?? []
    const refused = new Set(named)
    return new Worker(file, { workerData, execArgv: execArgv.filter((f) => !refused.has(f)) })
  }
}

export class ThreadedConsumer implements Consumer {
  readonly #options: ThreadedConsumerOptions
  readonly #waiters = new PositionWaiters()
  #worker: Worker | null = null
  #position = 0
  /** Highest seq known to exist: offered, or the position the thread reported. */
  #head = 0
  #stopping = false
  #restartTimer: NodeJS.Timeout | null = null
  /** Threads started after the first (one died each time). */
  #restarts = 0
  readonly #health = new HealthTracker()
  /** setSweep's limit, which a thread started again is given too. */
  #sweepLimit: number | null = null

  constructor (options: ThreadedConsumerOptions) {
    this.#options = options
  }

  /** Starts the thread and resolves once it has caught up with the stream (as StreamConsumer#start). */
  start (): Promise<void> {
    return this.#spawn()
  }

  get position (): number {
    return this.#position
  }

  get backlog (): number {
    return Math.max(0, this.#head - this.#position)
  }

  /** Threads started again after one died. */
  get restarts (): number {
    return this.#restarts
  }

  /**
   * @example
   *   new SignalIngester({ stream: store.stream, checks, onAppended: (b) => { consumer.offer(b) } })
   */
  offer (batch: AppendedBatch): void {
    const last = batch.seqs[batch.seqs.length - 1]
    if (last === undefined) return
    this.#head = Math.max(this.#head, last)
    this.#health.offered(last, batch.acceptedAt)
    // No thread (one is being started again): it will read the batch from the stream.
    const worker = this.#worker
    if (worker === null) return
    const packed = packBatch(this.#options.handoff.packer, batch)
    if (packed === null) worker.postMessage({ type: 'nudge' } satisfies ToConsumerThread)
    else worker.postMessage({ type: 'offer', batch: packed } satisfies ToConsumerThread, [packed])
  }

  health (): ConsumerHealth {
    return this.#health.snapshot(this.backlog, Date.now())
  }

  /**
   * @example
   *   const { seqs } = await ingester.ingest('v1', ws, body)
   *   await consumer.waitFor(seqs.at(-1)!, 1000) // the rules are in the store
   */
  waitFor (seq: number, timeoutMs: number): Promise<boolean> {
    return this.#waiters.wait(seq, timeoutMs)
  }

  /** The thread sweeps lapsed rules itself, in the transactions it applies in (StreamConsumer#setSweep). */
  setSweep (limit: number | null): void {
    this.#sweepLimit = limit
    this.#worker?.postMessage({ type: 'sweep', limit } satisfies ToConsumerThread)
  }

  /** Asks the thread to finish its pass and close the store; terminates it after 10 s. */
  async stop (): Promise<void> {
    this.#stopping = true
    if (this.#restartTimer !== null) clearTimeout(this.#restartTimer)
    const worker = this.#worker
    if (worker === null) return
    const exited = new Promise<void>((resolve) => { worker.once('exit', () => { resolve() }) })
    worker.postMessage({ type: 'stop' } satisfies ToConsumerThread)
    const timer = setTimeout(() => { void worker.terminate() }, STOP_TIMEOUT_MS)
    await exited
    clearTimeout(timer)
  }

  /** Makes the thread crash (tests: it is started again); resolves when it has exited. */
  async kill (): Promise<void> {
    const worker = this.#worker
    if (worker === null) return
    const exited = new Promise<void>((resolve) => { worker.once('exit', () => { resolve() }) })
    worker.postMessage({ type: 'crash' } satisfies ToConsumerThread)
    await exited
  }

  #spawn (): Promise<void> {
    const { handoff, pollMs, name, batchSize, logLevel, log } = this.#options
    const settings: ConsumerThreadSettings = { pollMs, name, batchSize, logLevel, nice: this.#options.nice ?? null }
    const data: ConsumerThreadData = { store: handoff.store, body: BODY, consumer: settings }
    // From the sources, the thread takes the parent's flags but its loaders, and tsx's (threads/
    // entry.ts); built, it inherits them as they are (Node drops what a thread cannot take).
    const { file, loader } = handoff.entry
    const worker = loader.length > 0
      ? threadWithFlags(file, data, [...withoutLoaders(process.execArgv), ...loader])
      : new Worker(file, { workerData: data })
    this.#worker = worker
    return new Promise((resolve, reject) => {
      let ready = false
      worker.on('message', (m: FromConsumerThread) => {
        if (m.type === 'stopped') return
        if (m.type === 'swept') {
          this.#options.onSwept?.(m.pass)
          return
        }
        if (m.type === 'apply-error') {
          this.#health.failed(m.message, m.at, m.first)
          return
        }
        // At once, not with the position below: a failure reported after this pass must not be
        // undone by a success that happened before it.
        this.#health.applied(m.position)
        // A timer turn later: lmdb-js keeps this thread's read snapshot until a timer of its own
        // fires, so whoever hears of the position then reads the rules the thread committed.
        setTimeout(() => {
          this.#moveTo(m.position)
          if (m.type === 'ready' && !ready) {
            ready = true
            if (this.#sweepLimit !== null) worker.postMessage({ type: 'sweep', limit: this.#sweepLimit } satisfies ToConsumerThread)
            resolve()
          }
        }, 0)
      })
      worker.on('error', (err) => {
        log.error({ err }, 'stream consumer thread failed')
        if (!ready) reject(err)
      })
      worker.on('exit', (code) => {
        if (this.#worker === worker) this.#worker = null
        if (!ready) {
          reject(new Error(`the stream consumer thread exited with code ${code} before it was ready`))
          return
        }
        if (this.#stopping) return
        // Accepted records wait on the stream meanwhile; nothing is lost.
        log.error({ code }, 'stream consumer thread exited; starting it again')
        this.#health.failed(`the stream consumer thread exited with code ${code}`, Date.now(), null)
        this.#restartTimer = setTimeout(() => {
          this.#restartTimer = null
          this.#restarts++
          this.#spawn().catch((err: unknown) => { log.error({ err }, 'stream consumer thread did not start') })
        }, this.#options.restartMs ?? 1000)
      })
    })
  }

  #moveTo (position: number): void {
    this.#position = position
    this.#head = Math.max(this.#head, position)
    this.#waiters.reached(position)
  }
}
