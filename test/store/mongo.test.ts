/**
 * The store contract on MongoDB. Needs a replica set (transactions): set
 * THREATFEED_TEST_MONGODB_URI (e.g. mongodb://localhost:27017/?replicaSet=rs0), or install
 * mongodb-memory-server. Without either the file is skipped — visibly, with its reason.
 */
import { randomUUID } from 'node:crypto'
import { MongoClient } from 'mongodb'
import t from 'tap'
import type { BatchingStore } from '../../src/store/batch-types.js'
import { openStore } from '../../src/store/open.js'
import { runStoreContract, type StoreTestOptions } from './contract.js'

interface Server { uri: string, stop (): Promise<void> }

/** mongodb-memory-server only if it is installed; it is not a dependency of this project. */
async function startMemoryServer (): Promise<Server | null> {
  const name = 'mongodb-memory-server'
  let mod: { MongoMemoryReplSet: { create (o: unknown): Promise<{ getUri (): string, stop (): Promise<unknown> }> } }
  try {
    mod = await import(name)
  } catch {
    return null
  }
  try {
    const rs = await mod.MongoMemoryReplSet.create({ replSet: { count: 1, storageEngine: 'wiredTiger' } })
    return { uri: rs.getUri(), stop: async () => { await rs.stop() } }
  } catch {
    return null // installed, but no mongod binary could be obtained
  }
}

async function findServer (): Promise<Server | null> {
  const uri = process.env.THREATFEED_TEST_MONGODB_URI
  if (uri !== undefined && uri !== '') return { uri, stop: async () => undefined }
  return startMemoryServer()
}

const server = await findServer()
if (server === null) {
  t.plan(0, 'mongodb contract suite skipped: THREATFEED_TEST_MONGODB_URI is not set and no mongod is available')
} else {
  const admin = new MongoClient(server.uri, { serverSelectionTimeoutMS: 5000 })
  t.teardown(async () => {
    await admin.close()
    await server.stop()
  })
  const run = `threatfeed_test_${process.pid}_${randomUUID().slice(0, 8)}`
  let n = 0
  /** A database of its own per test, dropped after it. */
  const makeStore = async (dbName = `${run}_${n++}`, opts: StoreTestOptions = {}): Promise<{ store: BatchingStore, cleanup (): Promise<void> }> => {
    const store = await openStore({ kind: 'mongodb', uri: server.uri, dbName, ...opts })
    return {
      store,
      cleanup: async () => {
        await store.close()
        await admin.db(dbName).dropDatabase()
      },
    }
  }

  runStoreContract(t, 'mongodb', (opts) => makeStore(undefined, opts))

  t.test('mongodb: several clients appending at once never let a reader see a gap', async (t) => {
    const dbName = `${run}_multi`
    const handles = await Promise.all([1, 2, 3].map(() => makeStore(dbName)))
    t.teardown(async () => { for (const h of handles) await h.cleanup() })
    const [first] = handles
    if (first === undefined) throw new Error('no store')
    let done = false
    let next = 1
    const gaps: string[] = []
    const reader = (async () => {
      while (!done || next <= await first.store.stream.head()) {
        const got = await first.store.stream.read(next, 1000)
        got.forEach((r, i) => { if (r.seq !== next + i) gaps.push(`expected ${next + i}, read ${r.seq}`) })
        next += got.length
      }
    })()
    const ws = randomUUID()
    const seqs = await Promise.all(handles.flatMap((h, c) => Array.from({ length: 4 }, async (_, w) => {
      const mine: number[] = []
      for (let b = 0; b < 5; b++) {
        mine.push(...await h.store.stream.append(Array.from({ length: 10 }, (_, i) => ({ workspaceId: ws, payload: `${c}.${w}.${b}.${i}`, acceptedAt: 1 }))))
      }
      return mine
    })))
    done = true
    await reader
    t.same(gaps, [], 'the reader never saw seq n+1 before seq n')
    t.same(seqs.flat().sort((a, b) => a - b), Array.from({ length: 600 }, (_, i) => i + 1), 'every seq assigned exactly once')
  })
}
