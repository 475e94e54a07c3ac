/** Process entry of the CLI: real stdio, real environment, exit with the command's code. */
import { runCli } from './main.js'
import { exitWhenWritten, processIo } from './process-io.js'

// Commands (and `serve`, once shut down) end here, after their output has been written.
await exitWhenWritten(await runCli(process.argv.slice(2), processIo()))
