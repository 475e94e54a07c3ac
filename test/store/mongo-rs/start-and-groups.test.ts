/**
 * Replica set (issue 33, items 5 and 9), what needs a real server: a process's concurrent appends
 * committed in groups; a changed index definition reported at start, not crash-looping; a direct
 * connection to a secondary refused at start. Gated: see rs.ts.
 */
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { MongoClient } from 'mongodb'
import { CommitGate } from '../../../src/store/commit-gate.js'
import { openStore } from '../../../src/store/open.js'
import { RS_URI, replicaSetOrSkip } from './rs.js'

if (replicaSetOrSkip(t)) {
  const admin = new MongoClient(RS_URI, { serverSelectionTimeoutMS: 30_000 })
  t.teardown(() => admin.close())
  const freshDb = (): string => `threatfeed_rs_${process.pid}_${randomUUID().slice(0, 8)}`

  t.test('64 appends at once in one process: seqs 1..64 each once, in fewer transactions than appends, none aborted by another of the process', async (t) => {
    const dbName = freshDb()
    const store = await openStore({ kind: 'mongodb', uri: RS_URI, dbName })
    t.teardown(async () => { await store.close(); await admin.db(dbName).dropDatabase() })
    const before = (await admin.db('admin').command({ serverStatus: 1 })).transactions as { totalCommitted: number }
    const now = Date.now()
    const all = await Promise.all(Array.from({ length: 64 }, (_, i) => store.stream.append([{ workspaceId: 'w', payload: `{"i":${i}}`, acceptedAt: now }], new CommitGate(now + 1800))))
    const after = (await admin.db('admin').command({ serverStatus: 1 })).transactions as { totalCommitted: number }
    t.same(all.flat().sort((a, b) => a - b), Array.from({ length: 64 }, (_, i) => i + 1))
    // Other files of the suite may commit meanwhile: the bound is loose, one transaction an append would reach it.
    t.ok(after.totalCommitted - before.totalCommitted < 64, `${after.totalCommitted - before.totalCommitted} transactions committed`)
    const records = await store.stream.read(1, 100)
    t.same(records.map((r) => JSON.parse(r.payload).i as number).length, 64, 'all on the stream')
  })

  t.test('an index whose definition differs: the node starts, says which and what to run', async (t) => {
    const dbName = freshDb()
    await admin.db(dbName).collection('access_rules').createIndex({ workspaceId: 1, seq: -1 }, { name: 'workspace_seq' })
    const problems: string[] = []
    const store = await openStore({ kind: 'mongodb', uri: RS_URI, dbName, onIndexProblem: (p) => { problems.push(p) } })
    t.teardown(async () => { await store.close(); await admin.db(dbName).dropDatabase() })
    t.equal(problems.length, 1, problems.join('\n'))
    t.match(problems[0], /access_rules\.workspace_seq.*dropIndex\("workspace_seq"\)/)
    const ws = await store.workspaces.create({ name: 'idx', subscription: 'active' })
    t.ok(ws.id, 'the store works')
    // Opened again: nothing created twice, the same one reported.
    const again: string[] = []
    const second = await openStore({ kind: 'mongodb', uri: RS_URI, dbName, onIndexProblem: (p) => { again.push(p) } })
    await second.close()
    t.same(again, problems)
  })

  t.test('a direct connection to a secondary is refused at start, naming directConnection', async (t) => {
    const hello = await admin.db('admin').command({ hello: 1 })
    const secondary = (hello.hosts as string[]).find((h) => h !== hello.primary)
    if (secondary === undefined) {
      t.plan(0, 'no secondary to connect to')
      return
    }
    await t.rejects(openStore({ kind: 'mongodb', uri: `mongodb://${secondary}/?directConnection=true`, dbName: freshDb() }), { code: 'TF_ERR_CONFIG', message: /directConnection=true/ })
  })
}
