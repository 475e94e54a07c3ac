/**
 * `threatfeed backup --out DIR`: a hot, consistent copy of the store while the server runs — the
 * embedded store's two environments (src/store/embedded/maintenance.ts says in which order and
 * why) and the default ASN database built in the data directory, when there is one. Restore:
 * stop the server, make DIR the data directory, start (docs/backup.md).
 */
import { copyFileSync, existsSync, mkdirSync, statSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { loadConfig } from '../config.js'
import { defaultAsnDbPath } from '../geo/default-db.js'
import { openMaintenance } from '../store/maintenance.js'
import { storeOptions } from './open-store.js'
import { parseOptions, requireOption, writeHelp, writeJson, type CliIo, type Command } from './command.js'

const help = `Usage: threatfeed backup --out DIR [--json]

A consistent copy of the embedded store in THREATFEED_DATA_DIR, taken while the server runs
(both LMDB environments, and the ASN database built there if any). DIR must not exist or be empty.
Restore: stop the server, replace the data directory with DIR, start it; its consumer applies
the records accepted after the copy of the rules. MongoDB: use mongodump --oplog (README).
--json: {"out","files":[{"path","bytes"}],"streamHead","checkpoints"}`

export const backupCommand: Command = {
  name: 'backup',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const { values } = parseOptions(args, { out: { type: 'string' } })
    if (values.help === true) return writeHelp(io, help)
    const out = requireOption(values, 'out')
    const config = loadConfig(io.env)
    const maintenance = await openMaintenance(storeOptions(config))
    const report = await maintenance.backup(out)
    // The ASN database is written by an atomic rename (geo/build-asn.ts), so a copy is one whole
    // version; its stamp is copied after it, and a stamp that does not match makes the restored
    // server rebuild the database rather than use a mismatched one.
    const files = [...report.files]
    const asn = defaultAsnDbPath(config.dataDir)
    for (const src of [asn, asn + '.json']) {
      if (!existsSync(src)) continue
      const dst = join(report.out, relative(config.dataDir, src))
      mkdirSync(dirname(dst), { recursive: true })
      copyFileSync(src, dst)
      files.push({ path: relative(report.out, dst), bytes: statSync(dst).size })
    }
    if (values.json === true) writeJson(io, { ...report, files })
    else {
      for (const f of files) io.stdout.write(`${f.path}  ${f.bytes} bytes\n`)
      io.stdout.write(`backed up to ${report.out}: stream head ${report.streamHead}, ${Object.entries(report.checkpoints).map(([c, s]) => `${c} at ${s}`).join(', ') || 'no consumer checkpoint'}\n`)
    }
    return 0
  },
}
