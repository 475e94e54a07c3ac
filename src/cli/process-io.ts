/**
 * The CLI's real process streams and its way out (run.ts).
 *
 * Writes to a pipe are asynchronous: a pipe holds 64 KiB and Node queues the rest until the reader
 * takes it, so exiting while output is queued cuts it (`feed get | nft -f -` loaded a partial set).
 * A process therefore exits only once stdout and stderr have handed every byte to the kernel. A
 * reader that leaves early (`| head`) is not the command's failure: the rest of the output is
 * dropped and the command ends with its own exit code, as Unix filters do.
 */
import { fstatSync, readFileSync } from 'node:fs'
import { Readable } from 'node:stream'
import type { CliIo } from './command.js'

/** The first write error on stdout or stderr other than EPIPE, reported at exit. */
let writeError: { stream: string, error: Error } | null = null

function guard (stream: NodeJS.WriteStream, name: string): void {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    // After an error the stream is destroyed and later writes are discarded without another event.
    if (e.code !== 'EPIPE') writeError ??= { stream: name, error: e }
  })
}

/** Resolves once everything written so far has left the process (or the stream is gone). */
function flushed (stream: NodeJS.WriteStream): Promise<void> {
  if (stream.destroyed || stream.writableLength === 0) return Promise.resolve()
  // Write callbacks run in order, so this one runs after every chunk queued before it.
  return new Promise((resolve) => { stream.write('', () => resolve()) })
}

/**
 * stdin redirected from a regular file (`coalesce < list.txt`) is read in one call at its known
 * size: process.stdin would deliver it in 64 KiB chunks (250 for a 16 MB list) and a copy to
 * join them. Pipes and terminals keep process.stdin, which copes with non-blocking descriptors.
 */
function openStdin (): Readable {
  try {
    if (fstatSync(0).isFile()) return Readable.from([readFileSync(0)])
  } catch {
    // No usable fd 0 (closed stdin): process.stdin reports that in its own way.
  }
  return process.stdin
}

/**
 * The CliIo of this process, with write errors on stdout and stderr handled (see above). stdin is
 * opened when a command first reads it.
 */
export function processIo (): CliIo {
  guard(process.stdout, 'stdout')
  guard(process.stderr, 'stderr')
  let stdin: Readable | undefined
  return {
    get stdin () { return (stdin ??= openStdin()) },
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    isTTY: process.stderr.isTTY === true,
  }
}

/**
 * Exits with `code` once stdout and stderr are flushed. The explicit exit is wanted: handles such
 * as a MongoDB connection pool or a keep-alive agent must not keep a finished command alive.
 */
export async function exitWhenWritten (code: number): Promise<void> {
  process.exitCode = code
  await flushed(process.stdout)
  // A failed write emits its error a tick after the stream is destroyed.
  await new Promise((resolve) => setImmediate(resolve))
  if (writeError !== null) {
    process.stderr.write(`threatfeed: cannot write to ${writeError.stream}: ${writeError.error.message}\n`)
    if (code === 0) code = 1
  }
  await flushed(process.stderr)
  process.exit(code)
}
