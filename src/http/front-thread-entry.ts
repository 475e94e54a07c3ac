/**
 * The entry of a front-end thread (front-threads.ts starts it): runs front-thread.ts with what
 * the main thread sent, and tells the main thread when it cannot start.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { runFrontThread } from './front-thread.js'
import type { FromThread, ThreadData } from './front-threads.js'

const port = parentPort!
runFrontThread(workerData as ThreadData, port).catch((e: unknown) => {
  port.postMessage({ type: 'failed', message: (e as Error).message } satisfies FromThread)
})
