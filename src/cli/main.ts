/**
 * The `threatfeed` command: dispatches the first word to a command group (one file each, beside
 * this one). Errors go to stderr as `threatfeed: <message>` with a non-zero exit; `--json` output
 * is always exactly one JSON document on stdout.
 */
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { CliIo, Command } from './command.js'
import { CliError, NotInStoreError } from './command.js'
import { storeLocation } from './open-store.js'
import { loadConfig } from '../config.js'
import { isThreatfeedError } from '../errors.js'
import { unknownVariableWarnings } from '../config-variables.js'
import { serveCommand } from './serve.js'
import { workspaceCommand } from './workspace.js'
import { keyCommand } from './key.js'
import { listCommand } from './list.js'
import { coalesceCommand } from './coalesce.js'
import { exprCommand } from './expr.js'
import { geoCommand } from './geo.js'
import { feedCommand } from './feed.js'
import { explainCommand } from './explain.js'
import { rulesCommand } from './rules.js'
import { streamCommand } from './stream.js'
import { importCommand } from './import.js'
import { storeCommand } from './store.js'
import { backupCommand } from './backup.js'
import { consumersCommand } from './consumers.js'

export const commands: readonly Command[] = [
  serveCommand,
  workspaceCommand,
  keyCommand,
  listCommand,
  coalesceCommand,
  exprCommand,
  geoCommand,
  feedCommand,
  explainCommand,
  rulesCommand,
  streamCommand,
  importCommand,
  storeCommand,
  backupCommand,
  consumersCommand,
]

/**
 * The version in threatfeed's package.json, found by walking up from this module: it runs both
 * from src/cli (tsx, tests) and from dist/src/cli (the built command).
 */
export function packageVersion (): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const file = join(dir, 'package.json')
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string, version?: string }
      if (pkg.name === 'threatfeed' && typeof pkg.version === 'string') return pkg.version
    }
    if (dirname(dir) === dir) throw new Error('threatfeed package.json not found above ' + fileURLToPath(import.meta.url))
  }
}

function topHelp (): string {
  const w = Math.max(...commands.map((c) => c.name.length))
  return [
    'Usage: threatfeed <command> [options]',
    '       threatfeed --version | -v',
    '',
    'Commands:',
    ...commands.map((c) => `  ${c.name.padEnd(w)}  ${c.summary}`),
    '',
    'Every command takes --help; commands that print a result take --json.',
    'Configuration comes from the environment (see README): THREATFEED_STORE, THREATFEED_DATA_DIR, …',
  ].join('\n') + '\n'
}

/** Runs one command line; resolves with the process exit code. */
export async function runCli (argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout.write(topHelp())
    return name === undefined ? 2 : 0
  }
  if (name === '--version' || name === '-v' || name === 'version') {
    io.stdout.write(`threatfeed ${packageVersion()}\n`)
    return 0
  }
  const cmd = commands.find((c) => c.name === name)
  try {
    if (cmd === undefined) throw new CliError(`unknown command ${JSON.stringify(name)}; see threatfeed --help`)
    // Before the command reads its configuration (`serve` included): a mistyped variable is
    // otherwise a default taken silently.
    for (const line of unknownVariableWarnings(io.env)) io.stderr.write(`threatfeed: warning: ${line}\n`)
    return await cmd.run(rest, io)
  } catch (e) {
    if (e instanceof NotInStoreError) {
      io.stderr.write(`threatfeed: ${e.message} in ${storeLocation(loadConfig(io.env))}\n`)
      return e.exitCode
    }
    if (e instanceof CliError) {
      io.stderr.write(`threatfeed: ${e.message}\n`)
      return e.exitCode
    }
    if (isThreatfeedError(e)) {
      io.stderr.write(`threatfeed: ${e.message}${e.cause instanceof Error ? ` (${e.cause.message})` : ''}\n`)
      return 1
    }
    io.stderr.write(`threatfeed: unexpected error: ${(e as Error)?.stack ?? String(e)}\n`)
    return 1
  }
}
