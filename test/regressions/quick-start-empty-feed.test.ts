/**
 * The README's quick start, run as a new user runs it (issue 15, "The quick start shows an empty
 * feed"): a server on a fresh data directory, then the shell block of README.md line by line —
 * workspace, key, one signal, the feed — with the ids, key and port substituted where the README
 * shows placeholders. The first feed fetch must show the posted rule; it used to show
 * `# entries: 0`, the feed having been built when the workspace appeared and the rebuild interval
 * then holding the next build back 30 s.
 *
 * Only `npx threatfeed` is shimmed (to the TypeScript sources, as the other process tests run
 * them) and the geo databases are the MaxMind test ones; everything else is the README's text,
 * run by /bin/sh, with curl.
 */
import t from 'tap'
import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'

const exec = promisify(execFile)
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

/** The shell block that follows "Then, while the server runs:", as commands (continuation lines joined). */
function quickStart (): string[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8')
  const block = /Then, while the server runs:\s*```sh\n([\s\S]*?)```/.exec(readme)
  if (block === null) throw new Error('README.md: no quick-start shell block after "Then, while the server runs:"')
  return block[1]!.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l !== '')
}

t.test('the README quick start shows the posted rule in the first feed fetch', async (t) => {
  const commands = quickStart()
  t.equal(commands.length, 4, 'four commands: workspace, key, signal, feed')
  t.match(commands[0], /^npx threatfeed workspace create /)
  t.match(commands[1], /^npx threatfeed key create .*<id>/)
  t.match(commands[2], /^curl .*tf_….*localhost:8080\/v1\/signal/)
  t.match(commands[3], /^curl .*tf_….*localhost:8080\/v1\/threat\/feeds/)

  const dir = mkdtempSync(join(tmpdir(), 'tf-quick-start-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const env = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: '0',
    THREATFEED_DATA_DIR: join(dir, 'data'),
    THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
    THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
  }
  const server = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise((resolve) => server.on('exit', resolve))
  t.teardown(async () => { server.kill('SIGTERM'); await exited })
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => { reject(new Error('no "listening" log line within 60 s')) }, 60_000)
    createInterface({ input: server.stdout }).on('line', (line) => {
      const rec = JSON.parse(line) as { msg?: string, port?: number }
      if (rec.msg === 'listening') { clearTimeout(timer); resolve(rec.port!) }
    })
  })
  for (let i = 0; i < 400 && (await fetch(`http://127.0.0.1:${port}/readyz`)).status !== 200; i++) await new Promise((resolve) => setTimeout(resolve, 50))

  // `npx threatfeed` as the package's bin would run it, without building dist/ first.
  const shim = `npx () { if [ "$1" = threatfeed ]; then shift; node --import=tsx "${root}/src/cli/run.ts" "$@"; else command npx "$@"; fi; }\n`
  const sh = async (command: string): Promise<string> => (await exec('/bin/sh', ['-c', shim + command], { cwd: root, env, timeout: 60_000 })).stdout
  // Line after line with no pause, as a script (or a paste) runs them: a key made by `key create`
  // works on the server's very next request (an unknown key reloads the key set first).

  const workspace = JSON.parse(await sh(commands[0]!)) as { id: string, name: string }
  t.equal(workspace.name, 'acme')
  const key = JSON.parse(await sh(commands[1]!.replace('<id>', workspace.id))) as { key: string }
  t.match(key.key, /^tf_/)
  const user = (c: string): string => c.replaceAll('tf_…', key.key).replaceAll('localhost:8080', `localhost:${port}`)
  // The signal and the feed straight after each other, as a script would run them.
  const posted = JSON.parse(await sh(user(commands[2]!))) as { success: boolean }
  t.equal(posted.success, true, 'the signal is accepted')
  const feed = await sh(user(commands[3]!))
  t.match(feed, /^# acme\n/, 'the dialect_a header')
  t.match(feed, /\n# entries: 1\n203\.0\.113\.7\/32\n$/, 'the posted rule, in the first fetch')
})
