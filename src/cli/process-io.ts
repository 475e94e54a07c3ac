/**
 * The CLI's real process streams and its way out (run.ts).
 *
 * Writes to a pipe are asynchronous: a pipe holds 64 KiB and Node queues the rest until the reader
 * takes it, so exiting while output is queued cuts it (`feed get | nft -f -` loaded a partial set).
 * A process therefore exits only once stdout and stderr have handed every byte to the kernel. A
 * reader that leaves early (`| head`) is not the command's failure: the rest of the output is
 * dropped and the command ends with its own exit code, as Unix filters do.
 */
import { fstatSync, readFileSync, readSync } from 'node:fs'
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

/** The descriptor and size of a stdin redirected from a regular file (see openStdin). */
const FILE = Symbol('threatfeed.stdinFile')
interface FileBacked { [FILE]?: { fd: number, size: number } }

/** Bytes read per call by forEachChunk from a file: big enough to make calls rare, small enough to stay in cache. */
const CHUNK_BYTES = 256 * 1024

/**
 * stdin redirected from a regular file (`coalesce < list.txt`) is read in one call at its known
 * size: process.stdin would deliver it in 64 KiB chunks (250 for a 16 MB list) and a copy to
 * join them. Commands that can take their input in pieces read it with forEachChunk instead,
 * through one reused buffer. Pipes and terminals keep process.stdin, which copes with
 * non-blocking descriptors.
 */
function openStdin (): Readable {
  try {
    const stat = fstatSync(0)
    if (stat.isFile()) {
      const stream: Readable & FileBacked = Readable.from((function * () { yield readFileSync(0) })())
      stream[FILE] = { fd: 0, size: stat.size }
      return stream
    }
  } catch {
    // No usable fd 0 (closed stdin): process.stdin reports that in its own way.
  }
  return process.stdin
}

/** The byte size of `stream` when it is a stdin redirected from a file (a capacity hint), else undefined. */
export function knownSize (stream: Readable): number | undefined {
  return (stream as FileBacked)[FILE]?.size
}

/**
 * Calls `fn` with each chunk of `stream`. A stdin redirected from a file is read straight from
 * its descriptor into one reused buffer, so a chunk is only valid during its call: the input is
 * never in memory whole, and no fresh page is touched per chunk.
 */
export async function forEachChunk (stream: Readable, fn: (chunk: Uint8Array) => void): Promise<void> {
  const file = (stream as FileBacked)[FILE]
  if (file === undefined) {
    for await (const c of stream) fn(typeof c === 'string' ? Buffer.from(c) : c as Buffer)
    return
  }
  readFileChunks(file.fd, fn)
}

/** Reads `fd` to its end in chunks of one reused buffer (see forEachChunk). */
export function readFileChunks (fd: number, fn: (chunk: Uint8Array) => void): void {
  const buf = Buffer.allocUnsafeSlow(CHUNK_BYTES)
  for (;;) {
    const n = readSync(fd, buf, 0, CHUNK_BYTES, null)
    if (n === 0) return
    fn(buf.subarray(0, n))
  }
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
