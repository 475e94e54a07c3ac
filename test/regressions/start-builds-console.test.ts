/**
 * `npm start` on a tree without dist/ (issue 36, "npm start does not build the console"): the
 * command's entry (bin/threatfeed.js) built the TypeScript but not the console, so /console
 * answered 404 until `npm run build` and a restart. Here a copy of the tree without dist/ runs
 * `npm start` as the README says, and /console answers with the built page; a console source
 * newer than the build is rebuilt on the next start.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'
import { NO_COVERAGE } from '../helpers/cli.js'

const root = fileURLToPath(new URL('../..', import.meta.url))

/** `npm start` in `tree`; resolves with the port once it listens, and a stop that awaits the exit. */
async function npmStart (tree: string, dataDir: string): Promise<{ port: number, stderr: () => string, stop: () => Promise<number | null> }> {
  const child = spawn('npm', ['start', '--silent'], {
    cwd: tree,
    env: { ...process.env, ...NO_COVERAGE, HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: dataDir, THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB, THREATFEED_GEO_ASN_DB: ASN_TEST_DB, THREATFEED_HTTP_THREADS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A group of its own: npm and the server it starts are stopped together.
    detached: true,
  })
  t.teardown(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL')
    } catch {
      // The group is gone already: stopped by the test.
    }
  })
  let err = ''
  child.stderr.setEncoding('utf8').on('data', (c: string) => { err += c })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening" line within 240 s: ${err}`)), 240_000)
    void exited.then((code) => { clearTimeout(timer); reject(new Error(`npm start exited ${code}: ${err}`)) })
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (!line.startsWith('{')) return
      const rec = JSON.parse(line) as { msg?: string, port?: number }
      if (rec.msg === 'listening') { clearTimeout(timer); resolve(rec.port!) }
    })
  })
  return { port, stderr: () => err, stop: async () => { process.kill(-child.pid!, 'SIGTERM'); return exited } }
}

// A first start compiles the whole tree (tsc), which takes minutes on a loaded machine.
t.setTimeout(600_000)

t.test('npm start on a tree without dist/ builds the console: /console answers', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-start-console-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const tree = join(dir, 'tree')
  for (const p of ['bin', 'src', 'workers', 'console', 'scripts', 'package.json', 'tsconfig.json', 'tsconfig.build.json']) {
    cpSync(join(root, p), join(tree, p), { recursive: true })
  }
  symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'), 'dir')

  const first = await npmStart(tree, join(dir, 'data'))
  t.match(first.stderr(), 'threatfeed: building the console', 'said it builds the console')
  const page = await fetch(`http://127.0.0.1:${first.port}/console`)
  t.equal(page.status, 200, '/console answers')
  const html = await page.text()
  const js = /<script[^>]+src="(\/console\/assets\/app-[A-Z0-9]+\.js)"/.exec(html)?.[1]
  t.ok(js !== undefined, 'the built page, naming its bundle')
  if (js !== undefined) t.equal((await fetch(`http://127.0.0.1:${first.port}${js}`)).status, 200, 'its bundle answers')
  await first.stop()

  // Built, and no newer source: not built again.
  const second = await npmStart(tree, join(dir, 'data'))
  t.notMatch(second.stderr(), 'building the console', 'an up-to-date console is not rebuilt')
  await second.stop()

  // A console source edited after the build: rebuilt on the next start.
  const style = join(tree, 'console', 'src', 'style.css')
  const later = new Date(Date.now() + 5000)
  utimesSync(style, later, later)
  const third = await npmStart(tree, join(dir, 'data'))
  t.match(third.stderr(), 'threatfeed: building the console', 'a stale console is rebuilt')
  t.equal((await fetch(`http://127.0.0.1:${third.port}/console`)).status, 200)
  await third.stop()
  t.ok(readFileSync(join(tree, 'dist', 'console', 'index.html'), 'utf8').includes('/console/assets/app-'))
})
