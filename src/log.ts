/**
 * JSON logs to stdout (DECISIONS §6) through pino. Keys never appear in logs: the Authorization
 * header is never logged, and `redact` guards the fields where a key could be passed by mistake.
 *
 * A log destination that fails (a full disk, a closed pipe) never ends the process: the line is
 * dropped, the failure counted, and writing goes on when the destination works again. Feeds must
 * keep answering through an outage of the disk the logs are on (DECISIONS §5).
 */
import { writeSync } from 'node:fs'
import { isMainThread } from 'node:worker_threads'
import { pino, type DestinationStream, type Logger } from 'pino'

export type { Logger }

let writeErrors = 0
let lastReported = 0

/** Log lines dropped because their destination failed, since the process started. */
export function logWriteErrors (): number {
  return writeErrors
}

function onWriteError (err: NodeJS.ErrnoException): void {
  writeErrors++
  // Said by the main thread only: every thread writes to the same destination, and the main thread
  // logs too, so one line per process rather than one per thread.
  if (!isMainThread) return
  // One line a minute on stderr at most, which may well be on the same full disk: never thrown.
  const now = Date.now()
  if (now - lastReported < 60_000) return
  lastReported = now
  try {
    writeSync(2, `threatfeed: log lines are being dropped: ${err.code ?? err.message} (${writeErrors} so far)\n`)
  } catch {
    // stderr failing too: nothing else can be told
  }
}

export function createLogger (level: string, destination?: NodeJS.WritableStream): Logger {
  let out: DestinationStream | undefined = destination
  if (out === undefined) {
    const stdout = pino.destination({ dest: 1, sync: true })
    stdout.on('error', onWriteError)
    out = stdout
  }
  return pino({
    level,
    base: { service: 'threatfeed' },
    redact: { paths: ['key', '*.key', 'authorization', '*.authorization', 'headers.authorization'], censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  }, out)
}
