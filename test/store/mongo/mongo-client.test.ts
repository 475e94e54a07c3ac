import { MongoNetworkError, MongoServerError, MongoServerSelectionError, MongoTransactionError, MongoWriteConcernError, type MongoClient, type TopologyDescription } from 'mongodb'
import t from 'tap'
import { ThreatfeedError } from '../../../src/errors.js'
import { CommitOutcomeUnknownError, DURABLE, WRITE_CONCERN_TIMEOUT_MS, createClient, isDuplicateKey, resolveDbName, runTransaction, toStoreError } from '../../../src/store/mongo/mongo-client.js'

t.test('resolveDbName: option, else the URI path, else threatfeed', async (t) => {
  const cases = [
    { description: 'explicit name wins', uri: 'mongodb://h/fromuri', dbName: 'given', expected: 'given' },
    { description: 'name from the path', uri: 'mongodb://h:27017/fromuri?replicaSet=rs0', dbName: undefined, expected: 'fromuri' },
    { description: 'several hosts', uri: 'mongodb://a:1,b:2,c:3/tf?replicaSet=rs0', dbName: undefined, expected: 'tf' },
    { description: 'srv', uri: 'mongodb+srv://u:p@cluster.example.net/prod', dbName: undefined, expected: 'prod' },
    { description: 'no path', uri: 'mongodb://h:27017', dbName: undefined, expected: 'threatfeed' },
    { description: 'empty path', uri: 'mongodb://h:27017/?replicaSet=rs0', dbName: undefined, expected: 'threatfeed' },
  ]
  for (const c of cases) t.equal(resolveDbName(c.uri, c.dbName), c.expected, c.description)
})

t.test('a malformed connection string is a configuration error that does not quote it', async (t) => {
  for (const uri of ['http://example.com', 'mongodb://', 'not a uri', 'mongodb://u:secret@h/?w=banana&unknownOption=1x']) {
    try {
      createClient(uri)
      t.fail(`accepted ${uri}`)
    } catch (e) {
      t.match(e, { code: 'TF_ERR_CONFIG' }, uri)
      t.notMatch((e as Error).message, 'secret', 'no credentials in the message')
    }
  }
})

t.test('driver errors become TF_ERR_STORE_UNAVAILABLE with their cause; ours pass; bugs are internal', async (t) => {
  const network = new MongoNetworkError('connection reset')
  const mapped = toStoreError(network)
  t.equal(mapped.code, 'TF_ERR_STORE_UNAVAILABLE')
  t.equal(mapped.status, 500)
  t.equal(mapped.cause, network)
  const ours = new ThreatfeedError('TF_ERR_WORKSPACE_NOT_FOUND', ['x'])
  t.equal(toStoreError(ours), ours)
  t.equal(toStoreError(new TypeError('x is undefined')).code, 'TF_ERR_INTERNAL')
  t.ok(isDuplicateKey(new MongoServerError({ message: 'E11000 duplicate key', code: 11000 })))
  t.notOk(isDuplicateKey(new MongoServerError({ message: 'WriteConflict', code: 112 })))
  t.notOk(isDuplicateKey(new Error('E11000')))
})

/** A stand-in for the driver's session that records what runTransaction did. */
class FakeSession {
  started = 0
  committed = 0
  aborted = 0
  ended = false
  commitCalls = 0
  commitErrors: unknown[] = []
  #inTransaction = false
  startTransaction (): void { this.started++; this.#inTransaction = true }
  async commitTransaction (): Promise<void> {
    this.commitCalls++
    const e = this.commitErrors.shift()
    // As the driver: a commit that was attempted leaves the transaction, failed or not.
    this.#inTransaction = false
    if (e !== undefined) throw e
    this.committed++
  }

  async abortTransaction (): Promise<void> { this.#inTransaction = false; this.aborted++ }
  inTransaction (): boolean { return this.#inTransaction }
  async endSession (): Promise<void> { this.ended = true }
}

const conflict = (): MongoServerError => new MongoServerError({ message: 'WriteConflict', code: 112, errorLabels: ['TransientTransactionError'] })
const duplicate = (): MongoServerError => new MongoServerError({ message: 'E11000 duplicate key', code: 11000 })
const network = (): MongoNetworkError => new MongoNetworkError('connection refused', { cause: new Error('ECONNREFUSED') })
/** As sdam/topology.js throws it when no primary answers within serverSelectionTimeoutMS: no labels. */
const selection = (): MongoServerSelectionError => new MongoServerSelectionError('Server selection timed out after 1500 ms', { type: 'ReplicaSetNoPrimary', servers: new Map(), error: null } as unknown as TopologyDescription)

t.test('runTransaction retries conflicts the server reported, and nothing else', async (t) => {
  const cases = [
    { description: 'write conflicts, then success', errors: [conflict(), conflict()], commitErrors: [], resolves: true, attempts: 3 },
    { description: 'a conflict at commit is retried too', errors: [], commitErrors: [conflict()], resolves: true, attempts: 2 },
    { description: 'one E11000 (racing upserts) is retried', errors: [duplicate()], commitErrors: [], resolves: true, attempts: 2 },
    { description: 'a second E11000 is a real duplicate', errors: [duplicate(), duplicate()], commitErrors: [], resolves: false, attempts: 2 },
    { description: 'a network error fails at once (outage: answer 500 now)', errors: [network()], commitErrors: [], resolves: false, attempts: 1 },
    { description: 'a server-selection error fails at once', errors: [selection()], commitErrors: [], resolves: false, attempts: 1 },
    { description: 'our own errors fail at once', errors: [new ThreatfeedError('TF_ERR_STORE_CONFLICT', ['dup'])], commitErrors: [], resolves: false, attempts: 1 },
  ]
  for (const c of cases) {
    const session = new FakeSession()
    session.commitErrors = [...c.commitErrors]
    const errors = [...c.errors]
    const client = { startSession: () => session } as unknown as MongoClient
    const run = runTransaction(client, async () => {
      const e = errors.shift()
      if (e !== undefined) throw e
      return 'done'
    })
    if (c.resolves) t.equal(await run, 'done', c.description)
    else await t.rejects(run, c.errors.at(-1) as Error, c.description)
    t.equal(session.started, c.attempts, `${c.description}: attempts`)
    t.equal(session.committed, c.resolves ? 1 : 0, `${c.description}: commits`)
    t.ok(session.ended, `${c.description}: session ended`)
  }
})

t.test('runTransaction gives up on endless conflicts once its retry time is spent', async (t) => {
  const session = new FakeSession()
  const client = { startSession: () => session } as unknown as MongoClient
  const started = Date.now()
  await t.rejects(runTransaction(client, async () => { throw conflict() }, 60), { code: 112 })
  t.ok(Date.now() - started < 1000)
  t.ok(session.started > 1, 'it did retry')
  t.equal(session.aborted, session.started, 'every attempt was aborted')
})

const unknownCommit = (): MongoNetworkError => {
  const e = new MongoNetworkError('connection reset during commit')
  e.addErrorLabel('UnknownTransactionCommitResult')
  return e
}
const noSuchTransaction = (): MongoServerError => new MongoServerError({ message: 'Transaction 7 has been aborted', code: 251, codeName: 'NoSuchTransaction', errorLabels: ['TransientTransactionError'] })
const maxTimeExpired = (): MongoServerError => new MongoServerError({ message: 'operation exceeded time limit', code: 50, errorLabels: ['UnknownTransactionCommitResult'] })

t.test('runTransaction commits again while the commit outcome is unknown, within a bound', async (t) => {
  const boundMs = 80
  const cases: Array<{ description: string, commitErrors: unknown[], expected: { result: string, started: number, commitCalls: number | 'several', committed: number } }> = [
    { description: 'unknown once, then committed', commitErrors: [unknownCommit()], expected: { result: 'done', started: 1, commitCalls: 2, committed: 1 } },
    { description: 'unknown past the bound: a distinct error', commitErrors: Array.from({ length: 1000 }, unknownCommit), expected: { result: 'TF_ERR_STORE_UNAVAILABLE: CommitOutcomeUnknownError', started: 1, commitCalls: 'several', committed: 0 } },
    { description: 'unknown after MaxTimeMSExpired: not retried, a distinct error', commitErrors: [maxTimeExpired()], expected: { result: 'TF_ERR_STORE_UNAVAILABLE: CommitOutcomeUnknownError', started: 1, commitCalls: 1, committed: 0 } },
    { description: 'a transient error at commit: the whole transaction is retried, as before', commitErrors: [conflict()], expected: { result: 'done', started: 2, commitCalls: 2, committed: 1 } },
    // Issue 33: once the commit was sent, no client-side error says "not applied". The driver
    // retries a commit that failed retryably once, after selecting a server; with no primary back
    // within the selection timeout that retry throws a server-selection error, unlabelled.
    { description: 'a server-selection error at commit (the driver\'s retry found no primary): committed again', commitErrors: [selection()], expected: { result: 'done', started: 1, commitCalls: 2, committed: 1 } },
    { description: 'an unlabelled network error at commit: committed again', commitErrors: [network()], expected: { result: 'done', started: 1, commitCalls: 2, committed: 1 } },
    { description: 'committed again, the server answers NoSuchTransaction (a failover lost it): retried whole', commitErrors: [selection(), noSuchTransaction()], expected: { result: 'done', started: 2, commitCalls: 3, committed: 1 } },
    { description: 'selection errors past the bound: a distinct error', commitErrors: Array.from({ length: 1000 }, selection), expected: { result: 'TF_ERR_STORE_UNAVAILABLE: CommitOutcomeUnknownError', started: 1, commitCalls: 'several', committed: 0 } },
    { description: 'a driver usage error at commit (nothing sent): thrown at once', commitErrors: [new MongoTransactionError('No transaction started')], expected: { result: 'MongoTransactionError', started: 1, commitCalls: 1, committed: 0 } },
  ]
  for (const c of cases) {
    const session = new FakeSession()
    session.commitErrors = [...c.commitErrors]
    const client = { startSession: () => session } as unknown as MongoClient
    const result = await runTransaction(client, async () => 'done', 10_000, boundMs).then(
      (r) => r,
      (e: Error) => e instanceof ThreatfeedError ? `${e.code}: ${(e.cause as Error).name}` : e.name,
    )
    t.equal(result, c.expected.result, `${c.description}: result`)
    t.equal(session.started, c.expected.started, `${c.description}: transactions started`)
    if (c.expected.commitCalls === 'several') t.ok(session.commitCalls > 1 && session.commitCalls < 1000, `${c.description}: commits tried (${session.commitCalls})`)
    else t.equal(session.commitCalls, c.expected.commitCalls, `${c.description}: commits tried`)
    t.equal(session.committed, c.expected.committed, `${c.description}: commits`)
    t.ok(session.ended, `${c.description}: session ended`)
  }
})

t.test('an unknown commit outcome past the bound says so, with the driver error as its cause', async (t) => {
  const session = new FakeSession()
  const driverError = unknownCommit()
  session.commitErrors = [driverError]
  const client = { startSession: () => session } as unknown as MongoClient
  const e = await runTransaction(client, async () => 'done', 10_000, 0).catch((e: unknown) => e)
  t.ok(e instanceof ThreatfeedError && e.cause instanceof CommitOutcomeUnknownError)
  const cause = (e as ThreatfeedError).cause as CommitOutcomeUnknownError
  t.match(cause.message, /outcome is still unknown after 1 attempt\(s\): the transaction may have been applied/)
  t.equal(cause.cause, driverError)
})

t.test('an append whose commit outcome is unknown is looked up by its id, and says so when it cannot be', async (t) => {
  const cases: Array<{ description: string, commitErrors: unknown[], lookups: Array<number[] | null | Error>, expected: { result: string, commitCalls: number | 'several', lookups: number | 'several' } }> = [
    { description: 'applied: found at the first lookup, not committed again', commitErrors: [selection()], lookups: [[7, 8]], expected: { result: '7,8', commitCalls: 1, lookups: 1 } },
    { description: 'no primary yet, then found', commitErrors: [selection(), selection()], lookups: [new Error('no primary'), [7, 8]], expected: { result: '7,8', commitCalls: 2, lookups: 2 } },
    { description: 'not found, committed again: applied by that commit', commitErrors: [unknownCommit()], lookups: [null], expected: { result: 'done', commitCalls: 2, lookups: 1 } },
    { description: 'MaxTimeMSExpired: not committed again, but looked up', commitErrors: [maxTimeExpired()], lookups: [null, [7, 8]], expected: { result: '7,8', commitCalls: 1, lookups: 2 } },
    { description: 'never resolved within the bound: its own error code', commitErrors: Array.from({ length: 1000 }, selection), lookups: Array.from({ length: 1000 }, () => null), expected: { result: 'TF_ERR_APPEND_OUTCOME_UNKNOWN: CommitOutcomeUnknownError', commitCalls: 'several', lookups: 'several' } },
  ]
  for (const c of cases) {
    const session = new FakeSession()
    session.commitErrors = [...c.commitErrors]
    const client = { startSession: () => session } as unknown as MongoClient
    let lookups = 0
    const lookup = async (): Promise<string[] | null> => {
      lookups++
      const r = c.lookups.shift()
      if (r instanceof Error) throw r
      return r === null || r === undefined ? null : r.map(String)
    }
    const result = await runTransaction<string[]>(client, async () => ['done'], 10_000, 80, undefined, lookup).then(
      (r) => r.join(','),
      (e: Error) => e instanceof ThreatfeedError ? `${e.code}: ${(e.cause as Error).name}` : e.name,
    )
    t.equal(result, c.expected.result, `${c.description}: result`)
    if (c.expected.commitCalls === 'several') t.ok(session.commitCalls > 1, `${c.description}: commits tried (${session.commitCalls})`)
    else t.equal(session.commitCalls, c.expected.commitCalls, `${c.description}: commits tried`)
    if (c.expected.lookups === 'several') t.ok(lookups > 1, `${c.description}: lookups (${lookups})`)
    else t.equal(lookups, c.expected.lookups, `${c.description}: lookups`)
    t.equal(session.started, 1, `${c.description}: never retried whole`)
  }
})

t.test('the unknown-outcome answer tells an ingest client what to do', async (t) => {
  const e = new ThreatfeedError('TF_ERR_APPEND_OUTCOME_UNKNOWN')
  t.equal(e.status, 500, 'a 500: SPEC 7.1, retry with back-off')
  t.equal(e.errorName, 'OutcomeUnknownError')
  t.match(e.message, /may or may not have been stored.*same Idempotency-Key/)
})

t.test('timeouts are coherent: connect ~10 s, writes wait for a majority a bounded time, sockets outlive both', async (t) => {
  const client = createClient('mongodb://db1,db2,db3/tf?replicaSet=rs0')
  t.teardown(() => client.close())
  const o = client.options
  t.equal(o.serverSelectionTimeoutMS, 1500, 'an outage still fails within 2 s')
  t.ok(o.connectTimeoutMS >= 10_000, `a slow handshake does not clear the pool (connectTimeoutMS ${o.connectTimeoutMS})`)
  const wtimeout = o.writeConcern?.wtimeoutMS
  t.equal(wtimeout, WRITE_CONCERN_TIMEOUT_MS, 'every write has a write-concern timeout')
  t.equal(DURABLE.wtimeoutMS, WRITE_CONCERN_TIMEOUT_MS, 'commits too')
  t.ok(o.socketTimeoutMS > 2 * WRITE_CONCERN_TIMEOUT_MS, `the server's write-concern answer comes before the socket dies (socketTimeoutMS ${o.socketTimeoutMS})`)
})

/** What the driver throws when a majority did not acknowledge within wtimeout (server code 64). */
const writeConcernTimeout = (label: boolean): MongoWriteConcernError => {
  const e = new MongoWriteConcernError({ ok: 1, writeConcernError: { code: 64, codeName: 'WriteConcernFailed', errmsg: 'waiting for replication timed out', errInfo: { wtimeout: true } } } as never)
  if (label) e.addErrorLabel('UnknownTransactionCommitResult') // sessions.js, for a commit
  return e
}

t.test('the write-concern timeout error path', async (t) => {
  const session = new FakeSession()
  session.commitErrors = [writeConcernTimeout(true)]
  const client = { startSession: () => session } as unknown as MongoClient
  t.equal(await runTransaction(client, async () => 'done', 10_000, 1000), 'done', 'a commit that timed out waiting for a majority is committed again, and answers')
  t.equal(session.commitCalls, 2)
  t.equal(session.started, 1, 'not retried whole: it may have applied')
  const mapped = toStoreError(writeConcernTimeout(false))
  t.equal(mapped.code, 'TF_ERR_STORE_UNAVAILABLE', 'an ordinary write that timed out is a store failure (500), with its cause')
  t.equal((mapped.cause as Error).name, 'MongoWriteConcernError')
})

t.test('reads are at majority: a failover with rollback cannot leave a node a position that no longer exists', async (t) => {
  const client = createClient('mongodb://db1,db2,db3/tf?replicaSet=rs0')
  t.teardown(() => client.close())
  t.equal(client.options.readConcern?.level, 'majority')
  t.equal(client.options.readPreference.mode, 'primary')
})
