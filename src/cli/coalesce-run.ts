/**
 * Runs `threatfeed coalesce` as a process of its own: `node dist/src/cli/coalesce-run.js [options]`.
 * The real CLI dispatches to the same Command; this entry exists so the benchmark measures the
 * command and not the dispatcher's imports. Its import graph is net/ and command.ts only (no
 * store, HTTP or worker modules), which keeps Node's start-up the only fixed cost.
 */
import { fstatSync, readFileSync } from 'node:fs'
import { Readable } from 'node:stream'
import { CliError, type CliIo } from './command.js'
import { coalesceCommand } from './coalesce.js'

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

const io: CliIo = {
  stdin: openStdin(),
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  isTTY: process.stderr.isTTY === true,
}

// `threatfeed coalesce < list | head`: a reader that leaves early is not our failure; stop quietly
// as other Unix filters do. Anything else on stdout is.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code !== 'EPIPE') throw e
  process.exit(0)
})

coalesceCommand.run(process.argv.slice(2), io).then((code) => {
  // exitCode, not exit(): let pending stdout writes drain.
  process.exitCode = code
}, (e: unknown) => {
  process.stderr.write(`threatfeed: ${(e as Error).message}\n`)
  process.exitCode = e instanceof CliError ? e.exitCode : 1
})
