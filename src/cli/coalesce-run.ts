/**
 * Runs `threatfeed coalesce` as a process of its own: `node dist/src/cli/coalesce-run.js [options]`.
 * The real CLI dispatches to the same Command; this entry exists so the benchmark measures the
 * command and not the dispatcher's imports. Its import graph is net/, command.ts and process-io.ts only (no
 * store, HTTP or worker modules), which keeps Node's start-up the only fixed cost.
 */
import { fstatSync, readFileSync } from 'node:fs'
import { Readable } from 'node:stream'
import { CliError } from './command.js'
import { coalesceCommand } from './coalesce.js'
import { exitWhenWritten, processIo } from './process-io.js'

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

coalesceCommand.run(process.argv.slice(2), processIo(openStdin())).then(exitWhenWritten, (e: unknown) => {
  process.stderr.write(`threatfeed: ${(e as Error).message}\n`)
  return exitWhenWritten(e instanceof CliError ? e.exitCode : 1)
})
