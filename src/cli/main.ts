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
import { isThreatfeedError } from '../errors.js'
import { unknownVariableWarnings } from '../config-variables.js'

/**
 * The command groups, each loaded only when it runs: a command pays for its own modules, not for
 * every other command's (the server's alone take ~200 ms to load).
 */
export interface CommandEntry {
  readonly name: string
  /** One line for the top-level help. */
  readonly summary: string
  load (): Promise<Command>
}

export const commands: readonly CommandEntry[] = [
  { name: 'serve', summary: 'run the HTTP service', load: async () => (await import('./serve.js')).serveCommand },
  { name: 'workspace', summary: 'create, update, delete and list workspaces', load: async () => (await import('./workspace.js')).workspaceCommand },
  { name: 'key', summary: 'create, revoke and list API keys', load: async () => (await import('./key.js')).keyCommand },
  { name: 'list', summary: 'manage named access-rule lists (feeds)', load: async () => (await import('./list.js')).listCommand },
  { name: 'coalesce', summary: 'merge IPs, CIDRs and ranges on stdin into the minimal sorted CIDR list', load: async () => (await import('./coalesce.js')).coalesceCommand },
  { name: 'expr', summary: 'check a WAF or smart-firewall rule expression', load: async () => (await import('./expr.js')).exprCommand },
  { name: 'geo', summary: 'look up addresses, expand countries and ASNs, build the ASN database', load: async () => (await import('./geo.js')).geoCommand },
  { name: 'feed', summary: 'print a feed exactly as an appliance receives it', load: async () => (await import('./feed.js')).feedCommand },
  { name: 'explain', summary: 'say why an address is, or is not, in the feeds', load: async () => (await import('./explain.js')).explainCommand },
  { name: 'rules', summary: 'list the rules of a workspace', load: async () => (await import('./rules.js')).rulesCommand },
  { name: 'stream', summary: 'show the message stream of accepted signals', load: async () => (await import('./stream.js')).streamCommand },
  { name: 'import', summary: 'bulk-load signals from a JSON array or NDJSON file', load: async () => (await import('./import.js')).importCommand },
  { name: 'store', summary: 'inspect and maintain the embedded store (stats, compact)', load: async () => (await import('./store.js')).storeCommand },
  { name: 'backup', summary: 'copy the store while the server runs (see docs/backup.md)', load: async () => (await import('./backup.js')).backupCommand },
  { name: 'consumers', summary: 'list the appliances that poll the feeds, stale ones first', load: async () => (await import('./consumers.js')).consumersCommand },
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
    return await (await cmd.load()).run(rest, io)
  } catch (e) {
    if (e instanceof NotInStoreError) {
      // Loaded here only: the store's modules are the heaviest a command can load.
      const [{ storeLocation }, { loadConfig }] = await Promise.all([import('./open-store.js'), import('../config.js')])
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
