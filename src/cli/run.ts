/** Process entry of the CLI: real stdio, real environment, exit with the command's code. */
import { runCli } from './main.js'

const code = await runCli(process.argv.slice(2), {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  isTTY: process.stderr.isTTY === true,
})
// serve resolves only after shutdown; other commands end here. Let stdout drain, then exit.
process.exitCode = code
if (process.argv[2] !== 'serve') setImmediate(() => process.exit(code))
