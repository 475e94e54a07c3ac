/**
 * The shape every `threatfeed` command group implements, and the small helpers they share:
 * strict option parsing, `--help`, `--json` output and usage errors. One file per command group
 * lives beside this one (workspace.ts, key.ts, list.ts, coalesce.ts, expr.ts, geo.ts, …) and is
 * registered in main.ts.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util'
import type { Readable, Writable } from 'node:stream'

export interface CliIo {
  stdin: Readable
  stdout: Writable
  stderr: Writable
  env: NodeJS.ProcessEnv
  /** True when stderr is a terminal (progress bars only then). */
  isTTY: boolean
}

export interface Command {
  /** First word after `threatfeed` (e.g. `workspace`, `coalesce`). */
  readonly name: string
  /** Full help text printed by `threatfeed <name> --help`. */
  readonly help: string
  /** Runs with the arguments after the command name; resolves with the exit code. */
  run (args: string[], io: CliIo): Promise<number>
}

/** A usage or input error: printed as `threatfeed: <message>` on stderr with exit code 2 (usage) or 1. */
export class CliError extends Error {
  readonly exitCode: number
  constructor (message: string, exitCode = 2) {
    super(message)
    this.name = 'CliError'
    this.exitCode = exitCode
  }
}

/** Rows under a header line, each column as wide as its widest cell (the last one left ragged). */
export function writeColumns (io: CliIo, headings: readonly string[], rows: ReadonlyArray<readonly string[]>): void {
  const lines = [headings, ...rows]
  const widths = headings.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)))
  for (const l of lines) io.stdout.write(l.map((cell, i) => i === l.length - 1 ? cell : cell.padEnd(widths[i]!)).join('  ') + '\n')
}

/** Something a command looked for in the store and did not find: runCli says which store (exit 1). */
export class NotInStoreError extends CliError {
  constructor (message: string) {
    super(message, 1)
    this.name = 'NotInStoreError'
  }
}

export type OptionSpec = NonNullable<ParseArgsConfig['options']>

/**
 * Strict parsing with node:util parseArgs: unknown options and missing values are usage errors.
 * `--help` and `--json` are accepted by every command.
 */
export function parseOptions<T extends OptionSpec> (args: string[], options: T, allowPositionals = false) {
  try {
    return parseArgs({
      args,
      options: { ...options, help: { type: 'boolean', short: 'h' }, json: { type: 'boolean' } },
      strict: true,
      allowPositionals,
    })
  } catch (e) {
    throw new CliError((e as Error).message)
  }
}

export function writeJson (io: CliIo, value: unknown): void {
  io.stdout.write(JSON.stringify(value) + '\n')
}

export function writeHelp (io: CliIo, help: string): number {
  io.stdout.write(help.endsWith('\n') ? help : help + '\n')
  return 0
}

/** Reads a required string option or fails with a usage error naming it. */
export function requireOption (values: Record<string, unknown>, name: string): string {
  const v = values[name]
  if (typeof v !== 'string' || v === '') throw new CliError(`--${name} is required`)
  return v
}

/** Reads all of stdin as a Buffer (for commands that take input on stdin). */
export async function readAll (stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const c of stream) chunks.push(typeof c === 'string' ? Buffer.from(c) : c as Buffer)
  return Buffer.concat(chunks)
}

/**
 * The preamble of every `threatfeed <group> <verb> [options]` command: the verb, the parsed
 * options, or null when help was asked for (and has been printed).
 */
export function parseVerb<T extends OptionSpec> (args: string[], io: CliIo, help: string, options: T) {
  const [verb, ...rest] = args
  if (verb === undefined || verb === '--help' || verb === '-h') {
    writeHelp(io, help)
    return null
  }
  const { values } = parseOptions(rest, options)
  if ((values as { help?: boolean }).help === true) {
    writeHelp(io, help)
    return null
  }
  return { verb, values }
}
