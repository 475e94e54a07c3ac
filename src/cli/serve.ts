/** `threatfeed serve`: the HTTP service (what `npm start` runs). */
import { parseOptions, writeHelp, type CliIo, type Command } from './command.js'

const help = `Usage: threatfeed serve

Serves the signal and feed interfaces on HOST:PORT (default 0.0.0.0:8080) with the store of
THREATFEED_STORE (default: embedded LMDB in THREATFEED_DATA_DIR, default ./data). See README for
every variable. SIGTERM or SIGINT: stop accepting, finish in-flight requests, flush, exit 0.`

export const serveCommand: Command = {
  name: 'serve',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const { values } = parseOptions(args, {})
    if (values.help === true) return writeHelp(io, help)
    // The composition root is loaded only here, so admin commands never load the HTTP stack.
    const { runServer } = await import('../main.js')
    return runServer(io.env)
  },
}
