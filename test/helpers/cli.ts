/** Runs a Command in-process with captured stdio, for CLI tests. */
import { PassThrough, Readable } from 'node:stream'
import type { Command, CliIo } from '../../src/cli/command.js'

export interface CliResult { code: number, stdout: string, stderr: string }

export async function runCommand (cmd: Command, args: string[], opts: { stdin?: string | Buffer, env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  const out: Buffer[] = []
  const err: Buffer[] = []
  stdout.on('data', (c: Buffer) => out.push(c))
  stderr.on('data', (c: Buffer) => err.push(c))
  const io: CliIo = {
    stdin: Readable.from(opts.stdin === undefined ? [] : [Buffer.from(opts.stdin)]),
    stdout,
    stderr,
    env: opts.env ?? {},
    isTTY: false,
  }
  let code: number
  try {
    code = await cmd.run(args, io)
  } catch (e) {
    const ex = e as { exitCode?: number, message: string }
    stderr.write(`threatfeed: ${ex.message}\n`)
    code = ex.exitCode ?? 1
  }
  return { code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }
}
