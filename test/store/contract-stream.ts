/** Store contract, stream side: append/read/head, checkpoints, feed versions and fetch times. */
import { FAMILIES, FEED_ACTIONS, type FeedKey, type StreamRecordInput } from '../../src/store/types.js'
import type { StoreTest } from './contract.js'
import { freshWorkspaceId } from './contract-fixtures.js'

function records (workspaceId: string, n: number, from = 0): StreamRecordInput[] {
  return Array.from({ length: n }, (_, i) => ({ workspaceId, schemaVersion: 2, payload: `{"n":${from + i}}`, acceptedAt: 1000 + from + i }))
}

export function describeStreamContract (test: StoreTest): void {
  test('stream: append assigns increasing seqs from 1; read returns records from a seq, ascending', async (t, store) => {
    const ws = freshWorkspaceId()
    t.equal(await store.stream.head(), 0, 'empty stream')
    t.same(await store.stream.read(1, 10), [])
    t.same(await store.stream.append([]), [], 'an empty append assigns nothing')
    // v1 records are the entry's JSON text byte for byte, and carry no schema_version at all.
    const v1 = '{"type":"access_rules","action":"block","ip":"192.0.2.1", "name":"é\\u00e9 ☃"}'
    t.same(await store.stream.append([{ workspaceId: ws, payload: v1, acceptedAt: 500 }]), [1])
    t.same(await store.stream.append(records(ws, 3)), [2, 3, 4])
    t.equal(await store.stream.head(), 4)

    const all = await store.stream.read(1, 100)
    t.same(all[0], { seq: 1, workspaceId: ws, payload: v1, acceptedAt: 500 })
    t.notOk('schemaVersion' in (all[0] ?? {}), 'no schemaVersion key on a v1 record')
    t.same(all[1], { seq: 2, workspaceId: ws, schemaVersion: 2, payload: '{"n":0}', acceptedAt: 1000 })
    const cases = [
      { description: 'from the start', from: 1, limit: 2, expected: [1, 2] },
      { description: 'from the middle', from: 3, limit: 10, expected: [3, 4] },
      { description: 'from 0 reads from the first', from: 0, limit: 1, expected: [1] },
      { description: 'past the head', from: 5, limit: 10, expected: [] },
      { description: 'limit 0', from: 1, limit: 0, expected: [] },
    ]
    for (const c of cases) {
      t.same((await store.stream.read(c.from, c.limit)).map((r) => r.seq), c.expected, c.description)
    }
  })

  test('stream: a batch id given to an append is read back on each of its records, whatever its form', async (t, store) => {
    const ws = freshWorkspaceId()
    const ids = ['0b6f3a52-7d0f-4f59-9b7e-7f2f3c1f0a01', 'c3d1e2f4-1111-4abc-8def-0123456789ab']
    const body = Buffer.from('[{"ip":"192.0.2.1"},{"ip":"192.0.2.2"}]')
    const whole = await store.stream.append({ workspaceId: ws, acceptedAt: 900, body, count: 2 }, undefined, ids[0])
    const listed = await store.stream.append(records(ws, 3), undefined, ids[1])
    const plain = await store.stream.append(records(ws, 1))
    const read = await store.stream.read(whole[0]!, 10)
    t.same(read.map((r) => [r.seq, r.batchId]), [
      ...whole.map((seq) => [seq, ids[0]]),
      ...listed.map((seq) => [seq, ids[1]]),
      [plain[0], undefined],
    ])
    t.notOk('batchId' in read.at(-1)!, 'no batchId key on a record appended without one')
    t.same((await store.stream.read(listed[1]!, 1))[0]?.batchId, ids[1], 'also when read from inside the append')
  })

  test('stream: a whole v1 batch is appended as one record per element, each its text byte for byte', async (t, store) => {
    const ws = freshWorkspaceId()
    const head = await store.stream.head()
    const texts = ['{ "type":"access_rules" ,"action" : "block", "ip":"192.0.2.1" }', '{"ip":"192.0.2.2","description":"caf\\u00e9 é ☃ ] ,"}', '{"expiration": 1.2e2}']
    const body = Buffer.from(`\n[ ${texts.join(' ,\n')} ]\n`)
    const seqs = await store.stream.append({ workspaceId: ws, acceptedAt: 700, body, count: texts.length })
    t.same(seqs, [head + 1, head + 2, head + 3])
    t.same(await store.stream.append(records(ws, 1)), [head + 4], 'records after it follow on')
    t.equal(await store.stream.head(), head + 4)
    const read = await store.stream.read(head + 1, 10)
    t.same(read.slice(0, 3), texts.map((payload, i) => ({ seq: head + 1 + i, workspaceId: ws, payload, acceptedAt: 700 })))
    for (const r of read.slice(0, 3)) t.notOk('schemaVersion' in r, 'v1 records: no schemaVersion key')
    t.same((await store.stream.read(head + 2, 2)).map((r) => [r.seq, r.payload]), [[head + 2, texts[1]], [head + 3, texts[2]]], 'from inside the batch, up to a limit')
  })

  test('stream: concurrent appends get disjoint, contiguous seqs and the stream has no gap', async (t, store) => {
    const ws = freshWorkspaceId()
    const batches = await Promise.all(Array.from({ length: 8 }, (_, b) => store.stream.append(records(ws, 50, b * 50))))
    for (const seqs of batches) {
      t.same(seqs, Array.from({ length: 50 }, (_, i) => (seqs[0] ?? 0) + i), 'one append is one contiguous run')
    }
    const all = await store.stream.read(1, 1000)
    t.same(all.map((r) => r.seq), Array.from({ length: 400 }, (_, i) => i + 1))
    t.equal(await store.stream.head(), 400)
    // Each record kept the payload it was appended with, at the seq it was given.
    const bySeq = new Map(all.map((r) => [r.seq, r.payload]))
    batches.forEach((seqs, b) => {
      t.same(seqs.map((s) => bySeq.get(s)), records(ws, 50, b * 50).map((r) => r.payload), `batch ${b}`)
    })
  })

  test('stream: a reader polling during concurrent appends never sees seq n+1 before seq n', async (t, store) => {
    const ws = freshWorkspaceId()
    let done = false
    let next = 1
    const gaps: string[] = []
    const reader = (async () => {
      while (!done || next <= await store.stream.head()) {
        const got = await store.stream.read(next, 1000)
        got.forEach((r, i) => {
          if (r.seq !== next + i) gaps.push(`expected ${next + i}, read ${r.seq}`)
        })
        next += got.length
        await new Promise((resolve) => setImmediate(resolve))
      }
    })()
    await Promise.all(Array.from({ length: 6 }, async (_, w) => {
      for (let b = 0; b < 5; b++) await store.stream.append(records(ws, 20, (w * 5 + b) * 20))
    }))
    done = true
    await reader
    t.same(gaps, [], 'every read continued exactly where the last one stopped')
    t.equal(next - 1, 600, 'and the reader saw every record')
  })

  test('checkpoints: 0 until set, then the last value, per consumer', async (t, store) => {
    t.equal(await store.stream.getCheckpoint('rules'), 0)
    await store.stream.setCheckpoint('rules', 10)
    await store.stream.setCheckpoint('audit', 3)
    await store.stream.setCheckpoint('rules', 12)
    t.equal(await store.stream.getCheckpoint('rules'), 12)
    t.equal(await store.stream.getCheckpoint('audit'), 3)
    t.equal(await store.stream.getCheckpoint('other'), 0)
  })

  test('feed versions: a change starts a new run, the same content keeps it (A→B→A is new)', async (t, store) => {
    const ws = freshWorkspaceId()
    const key = { workspaceId: ws, listId: '*', family: 'v4' as const, action: 'block' as const }
    t.equal(await store.feedVersions.get(key), null)
    const steps = [
      { description: 'first content', hash: 'A', now: 100, since: 100 },
      { description: 'same content later', hash: 'A', now: 200, since: 100 },
      { description: 'new content', hash: 'B', now: 300, since: 300 },
      { description: 'back to the first content is a new run', hash: 'A', now: 400, since: 400 },
      { description: 'unchanged again', hash: 'A', now: 500, since: 400 },
    ]
    for (const s of steps) {
      t.same(await store.feedVersions.observe(key, s.hash, s.now), { contentHash: s.hash, since: s.since }, s.description)
    }
    t.same(await store.feedVersions.get(key), { contentHash: 'A', since: 400 })

    const others = [
      { ...key, listId: '6c1b1a0e-3b8e-4c43-9d6f-2a7f6f1f5a10' },
      { ...key, family: 'v6' as const },
      { ...key, family: 'both' as const },
      { ...key, action: 'allow' as const },
      { ...key, workspaceId: freshWorkspaceId() },
    ]
    for (const other of others) {
      t.same(await store.feedVersions.observe(other, 'A', 999), { contentHash: 'A', since: 999 }, `independent: ${JSON.stringify(other)}`)
    }
    t.same(await store.feedVersions.get(key), { contentHash: 'A', since: 400 }, 'untouched by the others')

    const concurrent = await Promise.all([1, 2, 3, 4].map((n) => store.feedVersions.observe(key, 'C', 600 + n)))
    t.equal(new Set(concurrent.map((v) => v.since)).size, 1, 'concurrent observers of one change agree on its time')
  })

  test('feed fetch times: on the version records of a built feed, the latest kept, listed by time', async (t, store) => {
    const ws = freshWorkspaceId()
    const list = '6c1b1a0e-3b8e-4c43-9d6f-2a7f6f1f5a10'
    const build = async (listId: string, hash: string, now: number): Promise<void> => {
      const keys: FeedKey[] = FEED_ACTIONS.flatMap((action) => FAMILIES.map((family) => ({ workspaceId: ws, listId, family, action })))
      for (const key of keys) await store.feedVersions.observe(key, hash, now)
    }
    t.same(await store.feedVersions.fetchedSince(0), [], 'nothing recorded')
    await store.feedVersions.recordFetches([{ workspaceId: ws, listId: '*', at: 1000 }])
    t.same(await store.feedVersions.fetchedSince(0), [], 'a feed never built records nothing')
    await build('*', 'A', 100)
    await build(list, 'A', 100)
    await store.feedVersions.recordFetches([])
    await store.feedVersions.recordFetches([{ workspaceId: ws, listId: '*', at: 1000 }, { workspaceId: ws, listId: list, at: 2000 }])
    const byList = async (since: number): Promise<Record<string, number>> =>
      Object.fromEntries((await store.feedVersions.fetchedSince(since)).map((f) => { t.equal(f.workspaceId, ws); return [f.listId, f.at] }))
    t.same(await byList(0), { '*': 1000, [list]: 2000 }, 'each feed once, with its time')
    t.same(await byList(1000), { '*': 1000, [list]: 2000 }, 'since is inclusive')
    t.same(await byList(1001), { [list]: 2000 })
    await store.feedVersions.recordFetches([{ workspaceId: ws, listId: '*', at: 500 }])
    t.same(await byList(1000), { '*': 1000, [list]: 2000 }, 'an earlier time does not move it back')
    await store.feedVersions.recordFetches([{ workspaceId: ws, listId: '*', at: 3000 }])
    t.same(await byList(2500), { '*': 3000 }, 'a later time moves it')
    await build('*', 'B', 3500)
    t.same(await store.feedVersions.get({ workspaceId: ws, listId: '*', family: 'v4', action: 'block' }), { contentHash: 'B', since: 3500 }, 'a new run: the version alone')
    t.same(await byList(2500), { '*': 3000 }, 'a new run keeps the fetch time')
  })
}
