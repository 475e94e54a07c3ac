/** Runs a Command in-process with captured stdio, or the real command as a process, for CLI tests. */
import { spawn } from 'node:child_process'
import { PassThrough, Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import type { Command, CliIo } from '../../src/cli/command.js'

export interface CliResult { code: number, stdout: string, stderr: string }

export async function runCommand (cmd: Command, args: string[], opts: { stdin?: string | Buffer, env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> {
  const r = await runCommandBytes(cmd, args, opts)
  return { ...r, stdout: r.stdout.toString() }
}

/** runCommand with stdout as written, for binary output (`feed get --gzip`). */
export async function runCommandBytes (cmd: Command, args: string[], opts: { stdin?: string | Buffer, env?: NodeJS.ProcessEnv } = {}): Promise<{ code: number, stdout: Buffer, stderr: string }> {
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
  return { code, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString() }
}

/** The installed command's entry point. */
export const THREATFEED_BIN = fileURLToPath(new URL('../../bin/threatfeed.js', import.meta.url))

/**
 * Environment for a process that runs the compiled dist/: no coverage recorded. tap maps dist's
 * coverage back to src through the source maps, and in its report that replaced, rather than
 * merged with, the coverage the tests record of the same files run from source (src/expr/lexer.ts
 * read 99 % in one full run and 20 % in the next).
 */
export const NO_COVERAGE = { _TAPJS_PROCESSINFO_COVERAGE_: '0' } as const

export interface PipedResult { code: number | null, signal: NodeJS.Signals | null, stdout: Buffer, stderr: string }

/**
 * Runs `threatfeed ARGS` as a real process (bin/threatfeed.js, the installed command) whose stdout
 * is a pipe into `reader`, a shell command, as an operator writes `threatfeed … | reader`. The
 * exit status is threatfeed's own (bash's PIPESTATUS), stdout is what the reader printed, stderr
 * is threatfeed's (and the reader's, if it complains). `stdin` is fed to threatfeed.
 */
export function runPiped (args: string[], reader: string, opts: { env?: NodeJS.ProcessEnv, stdin?: string | Buffer } = {}): Promise<PipedResult> {
  const child = spawn('bash', ['--norc', '--noprofile', '-c', `"$@" 2>&3 | { ${reader}; }; exit \${PIPESTATUS[0]}`, 'bash', process.execPath, THREATFEED_BIN, ...args], {
    env: { PATH: process.env.PATH, ...NO_COVERAGE, ...opts.env },
    stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
  })
  const out: Buffer[] = []
  const err: Buffer[] = []
  child.stdout.on('data', (c: Buffer) => out.push(c))
  ;(child.stdio[3] as Readable).on('data', (c: Buffer) => err.push(c))
  child.stderr.on('data', (c: Buffer) => err.push(c))
  child.stdin.end(opts.stdin ?? '')
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({ code, signal, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString() }))
  })
}
