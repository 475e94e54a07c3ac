/**
 * The MongoDB connection: client options, the mapping of driver errors to the registry, and the
 * transaction runner every multi-document write uses.
 *
 * Outage budget (DECISIONS §5): signals answer 500 within 2 s while the database is down. The
 * server-selection timeout bounds how long an operation waits for a reachable primary, and an
 * outage error is never retried here — the HTTP client retries instead.
 */
import { MongoClient, MongoError, MongoErrorLabel, MongoServerError, MongoTransactionError, WriteConcern, type ClientSession, type MongoClientOptions } from 'mongodb'
import { ThreatfeedError, toThreatfeedError } from '../../errors.js'

/** Below 2 s with room for the request around it. */
const SERVER_SELECTION_TIMEOUT_MS = 1500

/**
 * A handshake or monitor check slower than this marks the server unknown and clears its pool,
 * interrupting every transaction on it (issue 33: at 1.5 s a loaded primary was dropped). The
 * driver's default is 30 s; 10 s still notices a dead host within one election.
 */
const CONNECT_TIMEOUT_MS = 10_000

/**
 * How long a write waits for a majority to acknowledge it before the server answers with a
 * write-concern error (a commit's then carries UnknownTransactionCommitResult and is resolved,
 * mongo-client.ts commit). Without it, a write behind a lagging secondary hung until its socket
 * died. About one election, so that a failover does not turn every write in flight into one.
 */
export const WRITE_CONCERN_TIMEOUT_MS = 5000

/**
 * Longer than any single round trip may legitimately take — a write waiting out its write
 * concern, a read of 10,000 rules — so that the server's own answer (a write-concern error)
 * comes first: a socket timeout kills the connection and leaves the outcome unknown.
 */
const SOCKET_TIMEOUT_MS = 2 * WRITE_CONCERN_TIMEOUT_MS + 5000

/** Every write is acknowledged by a majority, from their journals (types.ts: durable). */
export const DURABLE = new WriteConcern('majority', WRITE_CONCERN_TIMEOUT_MS, true)

export const CLIENT_OPTIONS: MongoClientOptions = {
  serverSelectionTimeoutMS: SERVER_SELECTION_TIMEOUT_MS,
  connectTimeoutMS: CONNECT_TIMEOUT_MS,
  // A primary that hangs without closing its sockets must not hang requests forever.
  socketTimeoutMS: SOCKET_TIMEOUT_MS,
  retryWrites: true,
  retryReads: true,
  writeConcern: { w: 'majority', journal: true, wtimeoutMS: WRITE_CONCERN_TIMEOUT_MS },
  readPreference: 'primary',
  // What decides state (checkpoints, revisions, the stream head) is read as a majority holds it:
  // at "local", after a failover with rollback, a node kept positions that no longer existed.
  readConcern: { level: 'majority' },
  // An absent field stays absent (a v1 stream record has no schemaVersion), never null.
  ignoreUndefined: true,
}

/** How long write conflicts between concurrent transactions are retried before giving up. */
const CONFLICT_RETRY_MS = 10_000
/** How long a commit whose outcome the driver could not learn is retried before we say so. */
const UNKNOWN_COMMIT_RETRY_MS = 10_000
const MAX_TIME_MS_EXPIRED = 50
const DUPLICATE_KEY = 11000

export function isDuplicateKey (e: unknown): boolean {
  return e instanceof MongoServerError && e.code === DUPLICATE_KEY
}

/**
 * A conflict the server reported (another transaction wrote the same document first, or two
 * upserts raced to insert one identity): retrying the whole transaction resolves it. Network and
 * server-selection errors are not conflicts: the database is away and we answer 500 now.
 */
function isConflict (e: unknown): boolean {
  return e instanceof MongoServerError && (e.hasErrorLabel('TransientTransactionError') || e.code === DUPLICATE_KEY)
}

/**
 * Errors we throw on purpose pass; anything from the driver means the store is unavailable
 * (a dependency fault: 500, retryable); anything else is our bug (TF_ERR_INTERNAL, also 500).
 */
export function toStoreError (e: unknown): ThreatfeedError {
  if (e instanceof MongoError) return new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: e })
  return toThreatfeedError(e)
}

/**
 * A commit whose outcome stayed unknown (the driver's UnknownTransactionCommitResult) after every
 * retry within the bound: the transaction may or may not have been applied. The cause of the
 * TF_ERR_STORE_UNAVAILABLE that is thrown, so the log says which 500 this was.
 */
export class CommitOutcomeUnknownError extends Error {
  constructor (attempts: number, cause: unknown) {
    super(`the commit outcome is still unknown after ${attempts} attempt(s): the transaction may have been applied`, { cause })
    this.name = 'CommitOutcomeUnknownError'
  }
}

/**
 * Answers whether a commit whose outcome is unknown was applied, by reading what it wrote at
 * majority on the primary: its result when found, null when not (yet). Throws while no primary
 * answers. The stream append passes one (its append id, signal-stream.ts).
 */
export type CommitLookup<T> = () => Promise<T | null>

/**
 * Runs `fn` in a transaction and commits it, retrying the whole transaction on conflicts.
 *
 * Not `session.withTransaction`: it retries transient errors — and the driver labels network and
 * server-selection errors inside a transaction transient — for up to 120 s, far past the 2 s a
 * signal may wait during an outage. Here only conflicts the server reported are retried, and an
 * E11000 (two upserts inserting one identity at once) at most once more than that: the retry
 * finds the winner's document and updates it. A commit whose outcome is unknown is resolved (see
 * commit) rather than retried whole. `giveUp` ends the retries early when it answers true.
 */
export async function runTransaction<T> (client: MongoClient, fn: (session: ClientSession) => Promise<T>, retryForMs = CONFLICT_RETRY_MS, unknownCommitRetryForMs = UNKNOWN_COMMIT_RETRY_MS, giveUp?: () => boolean, lookup?: CommitLookup<T>): Promise<T> {
  const session = client.startSession()
  const deadline = Date.now() + retryForMs
  let duplicates = 0
  try {
    for (let attempt = 0; ; attempt++) {
      session.startTransaction({ readConcern: { level: 'snapshot' }, writeConcern: DURABLE, readPreference: 'primary' })
      try {
        const result = await fn(session)
        const found = await commit(session, unknownCommitRetryForMs, lookup)
        return found ?? result
      } catch (e) {
        if (session.inTransaction()) await session.abortTransaction().catch(() => undefined)
        if (isDuplicateKey(e) && ++duplicates > 1) throw e
        // `giveUp`: the caller has answered (an append past its deadline): a retry could only
        // be rolled back at its gate, and would hold the stream counter from live appends meanwhile.
        if (!isConflict(e) || Date.now() >= deadline || giveUp?.() === true) throw e
        await backOff(attempt)
      }
    }
  } finally {
    await session.endSession().catch(() => undefined)
  }
}

/**
 * Commits. Once commitTransaction has been called, only a server's answer that the transaction
 * was aborted (TransientTransactionError: a conflict, NoSuchTransaction) is a definite failure;
 * any other error may follow a commit that applied — the driver retries a failed commit once,
 * after selecting a server, and when no primary is back within the selection timeout that retry
 * fails with a server-selection error that carries no UnknownTransactionCommitResult label.
 * So every other error is an unknown outcome, resolved until the bound passes by
 *   - `lookup` (when given): the transaction's writes read at majority on the primary; found →
 *     applied, its result returned;
 *   - committing again, safe by the transactions spec: the server answers a commit it already
 *     applied with success, one it aborted (a failover lost it) with NoSuchTransaction.
 * Past the bound: TF_ERR_APPEND_OUTCOME_UNKNOWN for a lookup's caller (the stream append),
 * else TF_ERR_STORE_UNAVAILABLE, both with CommitOutcomeUnknownError as their cause.
 * MaxTimeMSExpired is not committed again, as in the driver's withTransaction: a retry would run
 * out of time again. Returns the lookup's result when that is what resolved it, else null.
 */
async function commit<T> (session: ClientSession, retryForMs: number, lookup?: CommitLookup<T>): Promise<T | null> {
  const bound = Date.now() + retryForMs
  for (let attempt = 1; ; attempt++) {
    let error: unknown
    try {
      await session.commitTransaction()
      return null
    } catch (e) {
      if (!isUnknownCommitOutcome(e)) throw e
      error = e
    }
    const recommit = !isMaxTimeExpired(error as MongoError)
    while (true) {
      if (Date.now() >= bound || (!recommit && lookup === undefined)) {
        throw new ThreatfeedError(lookup === undefined ? 'TF_ERR_STORE_UNAVAILABLE' : 'TF_ERR_APPEND_OUTCOME_UNKNOWN', [], { cause: new CommitOutcomeUnknownError(attempt, error) })
      }
      await backOff(attempt)
      if (lookup !== undefined) {
        const found = await lookup().catch(() => null)
        if (found !== null) return found
      }
      if (recommit) break
    }
  }
}

/** Every error of a sent commit but a server's word that the transaction aborted, or a bug of ours. */
function isUnknownCommitOutcome (e: unknown): boolean {
  if (!(e instanceof MongoError) || e instanceof MongoTransactionError) return false
  if (e.hasErrorLabel(MongoErrorLabel.UnknownTransactionCommitResult)) return true
  return !(e instanceof MongoServerError && e.hasErrorLabel(MongoErrorLabel.TransientTransactionError))
}

function isMaxTimeExpired (e: MongoError): boolean {
  return e instanceof MongoServerError && (e.code === MAX_TIME_MS_EXPIRED || e.writeConcernError?.code === MAX_TIME_MS_EXPIRED)
}

/** Jittered exponential back-off, 2..~100 ms, so that conflicting writers stop colliding. */
function backOff (attempt: number): Promise<void> {
  const ms = Math.min(100, 2 ** Math.min(attempt, 6)) * (0.5 + Math.random())
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** The database name: `dbName`, else the one in the URI path, else `threatfeed`. */
export function resolveDbName (uri: string, dbName: string | undefined): string {
  if (dbName !== undefined) return dbName
  const match = /^mongodb(?:\+srv)?:\/\/[^/?]*\/([^?]+)/.exec(uri)
  return match?.[1] === undefined ? 'threatfeed' : decodeURIComponent(match[1])
}

/** Constructs the client; a malformed URI is a configuration error, not an outage. */
export function createClient (uri: string): MongoClient {
  try {
    return new MongoClient(uri, CLIENT_OPTIONS)
  } catch (cause) {
    // The message is ours: the driver's may quote the URI, credentials included.
    throw new ThreatfeedError('TF_ERR_CONFIG', ['the MongoDB connection string is not valid'], { cause })
  }
}
