/**
 * The consumer thread's body (see consumer-thread.ts): the store's thread entry opens the store
 * and runs this on it; it runs a StreamConsumer, reporting each new position to the server's thread.
 */
import { parentPort } from 'node:worker_threads'
import { createLogger } from '../log.js'
import { niceThisThread } from '../pool/thread-priority.js'
import type { ConsumerThreadSide } from '../store/consumer-thread.js'
import { StreamConsumer } from './consumer.js'
import type { ConsumerThreadSettings, FromConsumerThread, ToConsumerThread } from './consumer-thread.js'
import { commandFromText } from './packed-batch.js'

/** See ConsumerOptions#gatherMs: well under the 1 s of read-your-writes (DECISIONS §3). */
const GATHER_MS = 25

/** ConsumerThreadBody#runConsumerThread: returns once started; the thread ends when told to stop. */
export async function runConsumerThread<Own> (side: ConsumerThreadSide<Own>, settings: unknown): Promise<void> {
  const data = settings as ConsumerThreadSettings
  // Applying yields the cores to the threads answering polls; it needs a small share of one at
  // 1,000 changes/s, and read-your-writes (1 s) holds while the front-end threads leave it that.
  niceThisThread(data.nice)
  const { store, unpack } = side
  const port = parentPort!
  const post = (m: FromConsumerThread): void => { port.postMessage(m) }
  const log = createLogger(data.logLevel).child({ thread: 'stream-consumer' })
  const consumer = new StreamConsumer<Own>(store, {
    pollMs: data.pollMs,
    log,
    ...(data.name === undefined ? {} : { name: data.name }),
    ...(data.batchSize === undefined ? {} : { batchSize: data.batchSize }),
    gatherMs: GATHER_MS,
    onApplied: (position) => { post({ type: 'position', position }) },
    onError: (message, at, first) => { post({ type: 'apply-error', message, at, first }) },
    onSwept: (pass) => { post({ type: 'swept', pass }) },
  })
  await consumer.start()
  post({ type: 'ready', position: consumer.position })

  port.on('message', (m: ToConsumerThread) => {
    if (m.type === 'offer') {
      consumer.offerPrepared(unpack(m.batch, commandFromText))
      return
    }
    if (m.type === 'nudge') {
      consumer.poll()
      return
    }
    if (m.type === 'sweep') {
      consumer.setSweep(m.limit)
      return
    }
    if (m.type === 'crash') throw new Error('consumer thread: crash asked for')
    void (async () => {
      await consumer.stop()
      await store.close()
      post({ type: 'stopped' })
      port.close()
    })()
  })
}
