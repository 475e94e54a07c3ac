/**
 * The store conformance suite (STYLE.md: one suite per interface, run against every
 * implementation). Every method and invariant of src/store/types.ts and batch-types.ts.
 *
 * Each test gets a fresh store from `makeStore` and cleans it up, so the suite runs unchanged on
 * LMDB in a temp dir and on a throw-away MongoDB database.
 */
import type { Test } from 'tap'
import type { BatchingStore } from '../../src/store/batch-types.js'
import { describeAdminContract } from './contract-admin.js'
import { describeConsumerContract } from './contract-consumers.js'
import { describeDeadlineContract } from './contract-deadline.js'
import { describeIdempotencyContract } from './contract-idempotency.js'
import { describePublishedContract } from './contract-published.js'
import { describeServedContract } from './contract-served.js'
import { describeClusterContract, describeLeaseContract } from './contract-cluster.js'
import { describeRuleContract } from './contract-rules.js'
import { describeStreamContract } from './contract-stream.js'
import { describeSweepContract } from './contract-sweep.js'

export interface StoreHandle {
  store: BatchingStore
  /** Closes the store if still open and removes its data. */
  cleanup (): Promise<void>
}

/** How a test wants its store opened (StoreOptions beyond where it lives). */
export interface StoreTestOptions {
  tombstoneMax?: number
}

export type MakeStore = (opts?: StoreTestOptions) => Promise<StoreHandle>

/** Declares one contract test; the body gets a fresh store, opened with `opts`. */
export type StoreTest = (title: string, body: (t: Test, store: BatchingStore) => Promise<void>, opts?: StoreTestOptions) => void

/**
 * Registers the whole contract as subtests of `t`.
 *
 * @example
 *   runStoreContract(t, 'lmdb', async (opts) => {
 *     const dir = t.testdir()
 *     const store = await openStore({ kind: 'embedded', dataDir: dir, ...opts })
 *     return { store, cleanup: () => store.close() }
 *   })
 */
export function runStoreContract (t: Test, name: string, makeStore: MakeStore): void {
  const storeTest: StoreTest = (title, body, opts) => {
    void t.test(`${name}: ${title}`, async (t) => {
      const handle = await makeStore(opts)
      try {
        await body(t, handle.store)
      } finally {
        await handle.cleanup()
      }
    })
  }
  describeAdminContract(storeTest)
  describeRuleContract(storeTest)
  describeStreamContract(storeTest)
  describeDeadlineContract(storeTest)
  describeIdempotencyContract(storeTest)
  describeSweepContract(storeTest)
  describeConsumerContract(storeTest)
  describeClusterContract(storeTest)
  describeLeaseContract(storeTest)
  describePublishedContract(storeTest)
  describeServedContract(storeTest)
}
