/**
 * The embedded store's consumer thread (../consumer-thread.ts): opens the store with the server's
 * settings and synchronous writes, then runs the consumer's body module on it, handing it the
 * unpacker of packed batches.
 */
import { workerData } from 'node:worker_threads'
import type { ConsumerThreadBody, ConsumerThreadData } from '../consumer-thread.js'
import type { EmbeddedThreadStore } from './consumer-handoff.js'
import { openEmbeddedStore } from './embedded-store.js'
import { unpackBatch } from './packed-batch.js'

const data = workerData as ConsumerThreadData
const { dataDir, settings } = data.store as EmbeddedThreadStore
// The server's store's settings: this thread's sweep is the one that keeps the tombstone cap.
const store = await openEmbeddedStore(dataDir, { ...settings, syncWrites: true })
// In the background, between batches, so the first write after a start does not wait for it; a
// warm-up that fails costs nothing (each write catches up what it needs itself).
void store.rules.warmArrivals().catch(() => {})
const body = await import(data.body) as ConsumerThreadBody
await body.runConsumerThread({ store, unpack: unpackBatch }, data.consumer)
