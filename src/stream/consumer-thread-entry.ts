/**
 * The consumer thread (see consumer-thread.ts): opens the embedded store with synchronous
 * writes and runs a StreamConsumer on it, reporting each new position to the server's thread.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { createLogger } from '../log.js'
import { openEmbeddedStore } from '../store/embedded/embedded-store.js'
import { unpackBatch } from './packed-batch.js'
import { StreamConsumer } from './consumer.js'
import type { ConsumerThreadData, FromConsumerThread, ToConsumerThread } from './consumer-thread.js'

/** See ConsumerOptions#gatherMs: well under the 1 s of read-your-writes (DECISIONS §3). */
const GATHER_MS = 25

const port = parentPort!
const data = workerData as ConsumerThreadData
const post = (m: FromConsumerThread): void => { port.postMessage(m) }

const log = createLogger(data.logLevel).child({ thread: 'stream-consumer' })
const store = await openEmbeddedStore(data.dataDir, { syncWrites: true })
const consumer = new StreamConsumer(store, {
  pollMs: data.pollMs,
  log,
  ...(data.name === undefined ? {} : { name: data.name }),
  ...(data.batchSize === undefined ? {} : { batchSize: data.batchSize }),
  gatherMs: GATHER_MS,
  onApplied: (position) => { post({ type: 'position', position }) },
  onError: (message, at, first) => { post({ type: 'apply-error', message, at, first }) },
})
await consumer.start()
post({ type: 'ready', position: consumer.position })

port.on('message', (m: ToConsumerThread) => {
  if (m.type === 'offer') {
    consumer.offerPrepared(unpackBatch(m.batch))
    return
  }
  if (m.type === 'nudge') {
    consumer.poll()
    return
  }
  void (async () => {
    await consumer.stop()
    await store.close()
    post({ type: 'stopped' })
    port.close()
  })()
})
