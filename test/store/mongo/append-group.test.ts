/**
 * Issue 33, item 5: concurrent appends of one process share one transaction (a group commit).
 *
 * A fake of the driver calls the stream makes, with a session per startSession and the server's
 * concurrency rules for the stream counter: a transaction that writes the counter holds it until
 * it commits or aborts, and another transaction writing it meanwhile — or writing it from a
 * snapshot older than the last committed value — fails at once with WriteConflict (code 112,
 * label TransientTransactionError), which is what a replica-set member answers (no lock wait
 * inside a multi-document transaction). Writes are pending until the commit; a transaction reads
 * its own pending writes. The commit can be scripted as in append-outcome.test.ts.
 */
import t, { type Test } from 'tap'
import { MongoServerError, MongoServerSelectionError, type MongoClient, type TopologyDescription } from 'mongodb'
import { SignalIngester } from '../../../src/ingest/batch.js'
import type { ThreatfeedError } from '../../../src/errors.js'
import { CommitGate } from '../../../src/store/commit-gate.js'
import type { Collections, IdempotencyDoc, StreamDoc } from '../../../src/store/mongo/collections.js'
import { GROUP_MAX_APPENDS } from '../../../src/store/mongo/append-group.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoSignalStream } from '../../../src/store/mongo/signal-stream.js'
import { newHousekeepingCounters } from '../../../src/store/types.js'
import type { EntryChecks } from '../../../src/ingest/entry-rules.js'

type CommitScript = 'ok' | 'applied-then-lost' | 'lost-before-applied'

const selection = (): MongoServerSelectionError => new MongoServerSelectionError('Server selection timed out after 1500 ms', { type: 'ReplicaSetNoPrimary', servers: new Map(), error: null } as unknown as TopologyDescription)
const writeConflict = (): MongoServerError => new MongoServerError({ message: 'WriteConflict error: this operation conflicted with another operation. Please retry your operation or multi-document transaction.', code: 112, codeName: 'WriteConflict', errorLabels: ['TransientTransactionError'] })
const key = (id: { w: string, k: string }): string => JSON.stringify([id.w, id.k])

interface Options {
  /** How long each stream insert takes (the body's upload). */
  insertMs: number
  commits?: CommitScript[]
  /** Inserts (counted from 0) that fail as the primary goes away mid-transaction: before any commit, a definite failure. */
  failInserts?: number[]
  /** After a commit whose answer was lost: how long no primary answers (the commit sent again and the lookup wait). */
  noPrimaryMs?: number
}

/** One replica set's primary, as the stream sees it. */
function fakeServer (options: Options) {
  const docs = new Map<number, StreamDoc>()
  const entries = new Map<string, IdempotencyDoc>()
  const stats = { starts: 0, commits: 0, aborts: 0, conflicts: 0 }
  const commits = [...(options.commits ?? [])]
  let head = 0
  /** Raised by each commit that moved the counter: a snapshot older than it cannot write it. */
  let counterVersion = 0
  let holder: Session | null = null
  let noPrimaryUntil = 0

  class Session {
    inTxn = false
    snapshot = -1
    taken = 0
    pending: StreamDoc[] = []
    pendingEntries = new Map<string, IdempotencyDoc>()
    serverTxn: 'open' | 'committed' | 'lost' = 'open'

    startTransaction (): void {
      stats.starts++
      this.inTxn = true
      this.snapshot = -1
      this.taken = 0
      this.pending = []
      this.pendingEntries = new Map()
      this.serverTxn = 'open'
    }

    /** The snapshot is taken at the transaction's first operation, as the server does. */
    touch (): void {
      if (!this.inTxn) throw new Error('fake: a write outside a transaction')
      if (this.snapshot < 0) this.snapshot = counterVersion
    }

    release (): void {
      if (holder === this) holder = null
    }

    async commitTransaction (): Promise<void> {
      this.inTxn = false
      if (Date.now() < noPrimaryUntil) throw selection()
      if (this.serverTxn === 'committed') return
      if (this.serverTxn === 'lost') throw new MongoServerError({ message: 'Transaction has been aborted', code: 251, codeName: 'NoSuchTransaction', errorLabels: ['TransientTransactionError'] })
      const script = commits.shift() ?? 'ok'
      if (script !== 'ok') noPrimaryUntil = Date.now() + (options.noPrimaryMs ?? 0)
      if (script === 'lost-before-applied') {
        this.release()
        this.serverTxn = 'lost'
        throw selection()
      }
      for (const d of this.pending) docs.set(d._id, structuredClone(d))
      for (const [k, e] of this.pendingEntries) entries.set(k, structuredClone(e))
      if (this.taken > 0) {
        head += this.taken
        counterVersion++
      }
      this.release()
      this.serverTxn = 'committed'
      stats.commits++
      if (script === 'applied-then-lost') throw selection()
    }

    async abortTransaction (): Promise<void> {
      this.inTxn = false
      stats.aborts++
      this.release()
      this.pending = []
    }

    inTransaction (): boolean {
      return this.inTxn
    }

    async endSession (): Promise<void> {}
  }

  const own = (o: { session?: unknown }): Session => {
    if (!(o.session instanceof Session)) throw new Error('fake: an operation outside the session')
    o.session.touch()
    return o.session
  }
  const readEntry = (s: Session, id: { w: string, k: string }): IdempotencyDoc | null => s.pendingEntries.get(key(id)) ?? entries.get(key(id)) ?? null
  let inserts = 0
  const insert = async (s: Session, list: StreamDoc[]): Promise<void> => {
    const n = inserts++
    await new Promise((resolve) => setTimeout(resolve, options.insertMs))
    if (options.failInserts?.includes(n) === true) throw selection()
    if (!s.inTxn) throw new Error('fake: an insert after its transaction ended')
    for (const d of list) {
      if (docs.has(d._id) || s.pending.some((p) => p._id === d._id)) throw new Error(`fake: duplicate stream _id ${d._id}`)
      s.pending.push(d)
    }
  }

  const client = { startSession: () => new Session() } as unknown as MongoClient
  const c = {
    meta: {
      async findOneAndUpdate (_f: unknown, u: { $inc: { value: number } }, o: { session?: unknown }) {
        const s = own(o)
        if ((holder !== null && holder !== s) || s.snapshot < counterVersion) {
          stats.conflicts++
          throw writeConflict()
        }
        holder = s
        s.taken += u.$inc.value
        return { _id: 'stream:head', value: head + s.taken }
      },
    },
    idempotency: {
      async findOne (filter: { _id: { w: string, k: string } }, o: { session?: unknown }) {
        return readEntry(own(o), filter._id)
      },
      find (filter: { _id: { $in: Array<{ w: string, k: string }> } }, o: { session?: unknown }) {
        const s = own(o)
        if (!Array.isArray(filter._id?.$in)) throw new Error(`fake: unsupported filter ${JSON.stringify(filter)}`)
        return { toArray: async () => filter._id.$in.map((id) => readEntry(s, id)).filter((e) => e !== null) }
      },
      async replaceOne (filter: { _id: { w: string, k: string } }, doc: Omit<IdempotencyDoc, '_id'>, o: { session?: unknown, upsert?: boolean }) {
        if (o.upsert !== true) throw new Error('fake: an upsert expected')
        own(o).pendingEntries.set(key(filter._id), { ...doc, _id: filter._id })
      },
      async bulkWrite (ops: Array<{ replaceOne: { filter: { _id: { w: string, k: string } }, replacement: Omit<IdempotencyDoc, '_id'>, upsert?: boolean } }>, o: { session?: unknown }) {
        const s = own(o)
        for (const { replaceOne: r } of ops) {
          if (r.upsert !== true) throw new Error('fake: an upsert expected')
          s.pendingEntries.set(key(r.filter._id), { ...r.replacement, _id: r.filter._id })
        }
      },
    },
    stream: {
      async insertOne (doc: StreamDoc, o: { session?: unknown }) { await insert(own(o), [doc]) },
      async insertMany (list: StreamDoc[], o: { session?: unknown, ordered?: boolean }) {
        if (o.ordered !== true) throw new Error('fake: an ordered insert expected')
        await insert(own(o), list)
      },
      find (filter: { appendId: { $in: string[] } }, o: { readConcern?: { level: string }, readPreference?: string }) {
        if (Object.keys(filter).join() !== 'appendId') throw new Error(`fake: unsupported filter ${JSON.stringify(filter)}`)
        if (o.readConcern?.level !== 'majority' || o.readPreference !== 'primary') throw new Error('fake: the lookup must read at majority on the primary')
        const ids = filter.appendId.$in
        const cursor = {
          limit () { return cursor },
          async toArray () {
            if (Date.now() < noPrimaryUntil) throw selection()
            return [...docs.values()].filter((d) => ids.includes(d.appendId!))
          },
        }
        return cursor
      },
    },
  }
  const process = (): MongoSignalStream => new MongoSignalStream(new MongoContext(client, c as unknown as Collections), newHousekeepingCounters())
  return { process, docs, entries, stats, head: () => head, noPrimaryFor: (ms: number) => { noPrimaryUntil = Date.now() + ms } }
}

const checks: EntryChecks = { asnExists: () => true, checkExpressions: true }
const WS = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'
const body = (n: number, from = 1): Buffer => Buffer.from(`[${Array.from({ length: n }, (_, i) => `{"type":"access_rules","action":"block","ip":"10.0.${from}.${i + 1}"}`).join(',')}]`)
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Every answer's receipt against what is stored: its own document, its own contiguous seqs, none shared. */
function checkReceipts (t: Test, server: ReturnType<typeof fakeServer>, outs: Array<{ status: number, seqs: readonly number[], batchId: string }>, sizes: number[]): void {
  const seen = new Set<number>()
  outs.forEach((out, i) => {
    t.equal(out.status, 200, `append ${i}: 200`)
    t.equal(out.seqs.length, sizes[i], `append ${i}: one seq per entry`)
    t.ok(out.seqs.every((s, j) => j === 0 || s === out.seqs[j - 1]! + 1), `append ${i}: contiguous seqs`)
    const doc = server.docs.get(out.seqs[0]!)
    t.equal(doc?.appendId, out.batchId, `append ${i}: its document starts at its first seq and carries its batch id`)
    t.equal(doc?.n, sizes[i], `append ${i}: its document holds its entries`)
    for (const s of out.seqs) {
      t.notOk(seen.has(s), `seq ${s} given once`)
      seen.add(s)
    }
  })
  const total = sizes.reduce((a, b) => a + b, 0)
  t.same([...seen].sort((a, b) => a - b), Array.from({ length: total }, (_, i) => i + 1), 'the seqs are 1..total, no gap')
  t.equal(server.head(), total, 'the counter moved by the total')
}

t.test('appends arriving while one is in flight share the next transaction, each with its own receipt', async (t) => {
  const server = fakeServer({ insertMs: 30 })
  const ingester = new SignalIngester({ stream: server.process(), checks, appendTimeoutMs: 2000 })
  const sizes = [2, 1, 3, 1, 2, 1, 1, 4]
  const first = ingester.ingest('v1', WS, body(sizes[0]!, 0))
  await sleep(5) // the first one's transaction is uploading its body
  const rest = sizes.slice(1).map((n, i) => ingester.ingest('v1', WS, body(n, i + 1)))
  const outs = await Promise.all([first, ...rest])
  t.equal(server.stats.starts, 2, 'two transactions: the first append alone, then the seven that came during it')
  t.equal(server.stats.aborts, 0, 'no transaction aborted')
  t.equal(server.stats.conflicts, 0, 'no write conflict on the counter')
  t.equal(server.stats.commits, 2)
  checkReceipts(t, server, outs, sizes)
})

t.test('contention: 32 appends at once in one process commit without one abort', async (t) => {
  const server = fakeServer({ insertMs: 10 })
  const stream = server.process()
  const started = Date.now()
  const all = await Promise.all(Array.from({ length: 32 }, (_, i) => stream.append([{ workspaceId: WS, payload: `{"i":${i}}`, acceptedAt: started }], new CommitGate(started + 1500))))
  t.equal(server.stats.aborts, 0, 'no abort, no retry')
  t.ok(server.stats.starts <= 2, `at most two transactions (${server.stats.starts})`)
  t.same(all.flat().sort((a, b) => a - b), Array.from({ length: 32 }, (_, i) => i + 1))
})

t.test('a group takes at most GROUP_MAX_APPENDS appends; the rest wait for the next', async (t) => {
  const server = fakeServer({ insertMs: 5 })
  const stream = server.process()
  const started = Date.now()
  const all = await Promise.all(Array.from({ length: GROUP_MAX_APPENDS + 44 }, (_, i) => stream.append([{ workspaceId: WS, payload: `{"i":${i}}`, acceptedAt: started }], new CommitGate(started + 5000))))
  t.equal(server.stats.starts, 3, 'the first alone, then 256, then 43')
  t.equal(new Set(all.flat()).size, GROUP_MAX_APPENDS + 44)
})

t.test('two processes appending at once: each has at most one transaction in flight, every append stored once in seq order', async (t) => {
  const server = fakeServer({ insertMs: 10 })
  const a = server.process()
  const b = server.process()
  const started = Date.now()
  const one = (s: MongoSignalStream, i: number): Promise<number[]> => s.append([{ workspaceId: WS, payload: `{"i":${i}}`, acceptedAt: started }], new CommitGate(started + 1500))
  const all = await Promise.all(Array.from({ length: 16 }, (_, i) => one(i % 2 === 0 ? a : b, i)))
  t.same(all.flat().sort((x, y) => x - y), Array.from({ length: 16 }, (_, i) => i + 1))
  t.same([...server.docs.keys()].sort((x, y) => x - y), Array.from({ length: 16 }, (_, i) => i + 1))
  // Across processes the counter still conflicts (the server's rule), but only between whole groups.
  t.ok(server.stats.starts - server.stats.aborts <= 6, `few transactions committed (${server.stats.commits}) for 16 appends`)
})

t.test('a group that fails before its commit fails each of its appends, and only them', async (t) => {
  // The first transaction commits; the second (the group of three that came during it) loses its primary.
  const server = fakeServer({ insertMs: 30, failInserts: [1] })
  const ingester = new SignalIngester({ stream: server.process(), checks, appendTimeoutMs: 2000 })
  const first = ingester.ingest('v1', WS, body(1, 0))
  await sleep(5)
  const group = [1, 2, 3].map((i) => ingester.ingest('v1', WS, body(1, i)).then(() => 'ok', (e: ThreatfeedError) => e.code))
  t.equal((await first).status, 200)
  t.same(await Promise.all(group), ['TF_ERR_STORE_UNAVAILABLE', 'TF_ERR_STORE_UNAVAILABLE', 'TF_ERR_STORE_UNAVAILABLE'])
  t.same([...server.docs.keys()], [1], 'nothing of the group stored')
  const later = await ingester.ingest('v1', WS, body(2, 9))
  t.same(later.seqs, [2, 3], 'the next append takes the seqs the group never held')
})

t.test('a group whose commit outcome was lost is resolved for each of its appends', async (t) => {
  const cases: Array<{ description: string, commits: CommitScript[], noPrimaryMs: number }> = [
    { description: 'applied, the answer lost, the commit sent again answered', commits: ['ok', 'applied-then-lost'], noPrimaryMs: 0 },
    { description: 'applied, the answer lost, no primary for 200 ms: found by its append ids', commits: ['ok', 'applied-then-lost'], noPrimaryMs: 200 },
    { description: 'lost before it applied: committed again, NoSuchTransaction, the group retried whole', commits: ['ok', 'lost-before-applied'], noPrimaryMs: 0 },
  ]
  for (const c of cases) {
    const server = fakeServer({ insertMs: 30, commits: c.commits, noPrimaryMs: c.noPrimaryMs })
    const ingester = new SignalIngester({ stream: server.process(), checks, appendTimeoutMs: 2000 })
    const sizes = [1, 2, 1, 3]
    const first = ingester.ingest('v1', WS, body(sizes[0]!, 0))
    await sleep(5)
    const rest = sizes.slice(1).map((n, i) => ingester.ingest('v1', WS, body(n, i + 1)))
    const outs = await Promise.all([first, ...rest])
    t.test(c.description, async (t) => checkReceipts(t, server, outs, sizes))
  }
})

t.test('an append whose cutoff passes while it waits for the group in flight is not written; the rest of its group is', async (t) => {
  const server = fakeServer({ insertMs: 60 })
  const stream = server.process()
  const now = Date.now()
  const rec = (i: number): Array<{ workspaceId: string, payload: string, acceptedAt: number }> => [{ workspaceId: WS, payload: `{"i":${i}}`, acceptedAt: now }]
  const first = stream.append(rec(0), new CommitGate(now + 1000))
  await sleep(5)
  const late = new CommitGate(now + 40) // passes while the first transaction uploads
  const outs = await Promise.all([
    stream.append(rec(1), late).then((s) => s.join(), (e: ThreatfeedError) => e.code),
    stream.append(rec(2), new CommitGate(now + 1000)).then((s) => s.join(), (e: ThreatfeedError) => e.code),
  ])
  t.same(await first, [1])
  t.same(outs, ['TF_ERR_STORE_UNAVAILABLE', '2'])
  t.equal(late.state, 'abandoned')
  t.same([...server.docs.keys()], [1, 2])
  t.equal(server.stats.aborts, 0, 'it was left out before its group began')
})

t.test('an append whose cutoff passes during its group\'s writes: the transaction is aborted and the rest committed without it', async (t) => {
  const server = fakeServer({ insertMs: 150 })
  const stream = server.process()
  const now = Date.now()
  const rec = (i: number): Array<{ workspaceId: string, payload: string, acceptedAt: number }> => [{ workspaceId: WS, payload: `{"i":${i}}`, acceptedAt: now }]
  const leader = stream.append(rec(0), new CommitGate(now + 5000))
  await sleep(5)
  const late = new CommitGate(now + 225) // open when its group starts (~150 ms), shut before its writes end (~300 ms)
  const outs = await Promise.all([
    stream.append(rec(1), late).then((s) => s.join(), (e: ThreatfeedError) => e.code),
    stream.append(rec(2), new CommitGate(now + 5000)).then((s) => s.join(), (e: ThreatfeedError) => e.code),
  ])
  t.same(await leader, [1])
  t.same(outs, ['TF_ERR_STORE_UNAVAILABLE', '2'])
  t.equal(late.state, 'abandoned')
  t.same([...server.docs.keys()], [1, 2], 'the late one never written')
  t.same({ starts: server.stats.starts, aborts: server.stats.aborts, commits: server.stats.commits }, { starts: 3, aborts: 1, commits: 2 }, 'its group aborted once and ran again without it')
})

t.test('Idempotency-Key within a group: one entry per key, a retry in the same group answered with the first seqs', async (t) => {
  const server = fakeServer({ insertMs: 30 })
  const ingester = new SignalIngester({ stream: server.process(), checks, appendTimeoutMs: 2000 })
  const first = ingester.ingest('v1', WS, body(1, 0), null, 'k-0')
  await sleep(5)
  const [a, b, other, earlier] = await Promise.all([
    ingester.ingest('v1', WS, body(2, 1), null, 'k-1'),
    ingester.ingest('v1', WS, body(2, 1), null, 'k-1'),
    ingester.ingest('v1', WS, body(1, 2), null, 'k-2'),
    first.then(() => ingester.ingest('v1', WS, body(1, 0), null, 'k-0')),
  ])
  t.same(a!.seqs, b!.seqs, 'the same key twice in one group: one append')
  t.equal(a!.batchId, b!.batchId, 'and one receipt')
  t.same(other!.seqs, [4], 'another key in the same group: its own append')
  t.same((await first).seqs, earlier!.seqs, 'a key stored by an earlier group')
  t.same([...server.docs.keys()].sort((x, y) => x - y), [1, 2, 4], 'three appends stored')
  t.equal(server.entries.size, 3)
  const reused = await ingester.ingest('v1', WS, body(3, 7), null, 'k-2').then(() => 'ok', (e: ThreatfeedError) => e.code)
  t.equal(reused, 'TF_ERR_IDEMPOTENCY_KEY_REUSED')
})
