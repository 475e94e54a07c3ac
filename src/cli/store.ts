/**
 * `threatfeed store compact`: rewrites the embedded store's files without their free pages, in
 * place, while nothing else has them open (src/store/embedded/maintenance.ts). LMDB reuses freed
 * pages by itself, so a steady store stops growing without this; it gives the space of a past
 * peak back to the file system.
 */
import { loadConfig } from '../config.js'
import { openMaintenance } from '../store/maintenance.js'
import { storeOptions } from './open-store.js'
import { CliError, parseVerb, writeJson, type CliIo, type Command } from './command.js'

const help = `Usage: threatfeed store <compact> [options]

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
    if (parsed.verb !== 'compact') throw new CliError(`unknown store command ${JSON.stringify(parsed.verb)}; see threatfeed store --help`)
    const config = loadConfig(io.env)
    const maintenance = await openMaintenance(storeOptions(config))
    const report = await maintenance.compact()
    if (parsed.values.json === true) writeJson(io, report)
    else io.stdout.write(`compacted ${report.dataDir}: ${report.before} → ${report.after} bytes\n`)
    return 0
  },
}
