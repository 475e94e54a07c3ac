/** Process entry of the CLI: real stdio, real environment, exit with the command's code. */
import { runCli } from './main.js'

const code = await runCli(process.argv.slice(2), {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  isTTY: process.stderr.isTTY === true,
})
// Commands (and `serve`, once shut down) end here. Handles such as a MongoDB connection pool or a
// keep-alive agent must not keep the process alive; stdout to a pipe or file is written
// synchronously on Linux, so nothing printed is lost.
process.exitCode = code
setImmediate(() => process.exit(code))
