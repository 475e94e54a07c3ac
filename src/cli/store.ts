/**
 * `threatfeed store stats`: what the embedded store's files hold, table by table, their free
 * pages and the snapshots readers hold (src/store/embedded/lmdb-env.ts, stats); read while the
 * server runs. `threatfeed store compact`: rewrites the files without their free pages, in
 * place, while nothing else has them open (src/store/embedded/maintenance.ts). LMDB reuses freed
 * pages by itself, so a steady store stops growing without this; it gives the space of a past
 * peak back to the file system.
 */
import { loadConfig } from '../config.js'
import { openMaintenance, type StatsReport } from '../store/maintenance.js'
import { storeOptions } from './open-store.js'
import { CliError, parseVerb, writeJson, type CliIo, type Command } from './command.js'

const help = `Usage: threatfeed store <stats|compact> [options]

  stats [--json]
        what THREATFEED_DATA_DIR's LMDB files hold, table by table (entries, bytes), their free
        pages (freed, reused by later writes), and each reader holding a snapshot with how many
        commits behind it is (a snapshot held keeps every page freed after it from reuse). Safe
        while the server runs. --json: {"dataDir","files":[{"file","fileBytes","overheadBytes",
        "freeBytes","lastTxnId","readers":[{"pid","txnsBehind"}],"tables":{name:{"entries","bytes"}}}]}
  compact [--json]
        offline: rewrites THREATFEED_DATA_DIR's LMDB files without their free pages. Stop the
        server first: it refuses (exit 1, nothing changed) while another process has the store
        open, as LMDB's reader table shows. --json: {"dataDir","before","after"} (bytes)`

export const storeCommand: Command = {
  name: 'store',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const parsed = parseVerb(args, io, help, {})
    if (parsed === null) return 0
    if (parsed.verb !== 'compact' && parsed.verb !== 'stats') throw new CliError(`unknown store command ${JSON.stringify(parsed.verb)}; see threatfeed store --help`)
    const config = loadConfig(io.env)
    const maintenance = await openMaintenance(storeOptions(config))
    if (parsed.verb === 'stats') {
      const report = await maintenance.stats()
      if (parsed.values.json === true) writeJson(io, report)
      else io.stdout.write(formatStats(report))
      return 0
    }
    const report = await maintenance.compact()
    if (parsed.values.json === true) writeJson(io, report)
    else io.stdout.write(`compacted ${report.dataDir}: ${report.before} → ${report.after} bytes\n`)
    return 0
  },
}

function mib (bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`
}

function formatStats (report: StatsReport): string {
  const lines = [report.dataDir]
  for (const f of report.files) {
    const readers = f.readers.length === 0 ? 'none' : f.readers.map((r) => `pid ${r.pid} ${r.txnsBehind} behind`).join(', ')
    lines.push(`${f.file}: ${mib(f.fileBytes)}, free ${mib(f.freeBytes)}, commit ${f.lastTxnId}, snapshots held: ${readers}`)
    const tables = Object.entries(f.tables).filter(([, t]) => t.entries > 0 || t.bytes > 0).sort((a, b) => b[1].bytes - a[1].bytes)
    const width = Math.max(0, ...tables.map(([name]) => name.length))
    for (const [name, t] of tables) lines.push(`  ${name.padEnd(width)}  ${String(t.entries).padStart(10)} entries  ${mib(t.bytes).padStart(11)}`)
  }
  return lines.join('\n') + '\n'
}
