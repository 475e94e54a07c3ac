/**
 * The CLI on the wrong directory (issue 36): a command other than `workspace create` finds no
 * store and says where it looked, instead of creating an empty one and answering from it; what a
 * command does not find, and an empty listing, name the store; listings have a header (and
 * `key ls` a state column); an unknown THREATFEED_* variable is warned about, one line each,
 * with the nearest known name when it is close.
 */
import t from 'tap'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough, Readable } from 'node:stream'
import { runCli } from '../../src/cli/main.js'
import { KNOWN_VARIABLES } from '../../src/config-variables.js'

interface Result { code: number, stdout: string, stderr: string }

async function cli (args: string[], env: NodeJS.ProcessEnv): Promise<Result> {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  let out = ''
  let err = ''
  stdout.setEncoding('utf8').on('data', (c: string) => { out += c })
  stderr.setEncoding('utf8').on('data', (c: string) => { err += c })
  const code = await runCli(args, { stdin: Readable.from([]), stdout, stderr, env, isTTY: false })
  return { code, stdout: out, stderr: err }
}

const dir = mkdtempSync(join(tmpdir(), 'tf-store-place-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const WS = '00000000-0000-4000-8000-000000000001'

t.test('a command finds no store: exit 1 naming the place, and nothing is created', async (t) => {
  const data = join(dir, 'nowhere', 'data')
  const env = { THREATFEED_DATA_DIR: data }
  const cases = [
    { description: 'workspace ls', args: ['workspace', 'ls'] },
    { description: 'workspace ls --json', args: ['workspace', 'ls', '--json'] },
    { description: 'key ls', args: ['key', 'ls'] },
    { description: 'list ls', args: ['list', 'ls', '--workspace', WS] },
    { description: 'list show', args: ['list', 'show', '--id', WS] },
    { description: 'rules ls', args: ['rules', 'ls', '--workspace', WS] },
    { description: 'consumers ls', args: ['consumers', 'ls'] },
    { description: 'feed get', args: ['feed', 'get', '--workspace', WS] },
    { description: 'explain', args: ['explain', '192.0.2.1', '--workspace', WS] },
    { description: 'stream status', args: ['stream', 'status'] },
    // Writes that need what a store holds: they too find none, rather than make one and say "no workspace".
    { description: 'key create', args: ['key', 'create', '--workspace', WS, '--scopes', 'feeds:read'] },
    { description: 'list create', args: ['list', 'create', '--workspace', WS, '--name', 'edl'] },
  ]
  for (const c of cases) {
    const r = await cli(c.args, env)
    t.equal(r.code, 1, `${c.description}: exit 1 (${r.stderr.trim()})`)
    t.equal(r.stderr, `threatfeed: no threatfeed store in ${data} (THREATFEED_DATA_DIR); run this where the server keeps its data, or set THREATFEED_DATA_DIR\n`, `${c.description}: names the place`)
    t.equal(r.stdout, '', `${c.description}: prints nothing`)
    t.notOk(existsSync(data), `${c.description}: no store created`)
  }
})

t.test('in a store: not-found errors and empty listings name it; listings have a header', async (t) => {
  const data = join(dir, 'store', 'data')
  const env = { THREATFEED_DATA_DIR: data }
  const place = `the store at ${data}`
  const created = await cli(['workspace', 'create', '--name', 'main', '--json'], env)
  t.equal(created.code, 0, `workspace create makes the store: ${created.stderr}`)
  t.ok(existsSync(join(data, 'data.mdb')))
  const ws = (JSON.parse(created.stdout) as { id: string }).id

  const cases = [
    { description: 'key ls, none', args: ['key', 'ls'], code: 0, stdout: '', stderr: `threatfeed: no API keys in ${place}\n` },
    { description: 'list ls, none', args: ['list', 'ls', '--workspace', ws], code: 0, stdout: '', stderr: `threatfeed: no lists in workspace ${ws} in ${place}\n` },
    { description: 'rules ls, none', args: ['rules', 'ls', '--workspace', ws], code: 0, stdout: '', stderr: `threatfeed: no live rules of workspace ${ws} in ${place}\n` },
    { description: 'consumers ls, none', args: ['consumers', 'ls'], code: 0, stdout: `no feed consumers seen in the last 30 days in ${place}\n`, stderr: '' },
    { description: 'key create, no such workspace', args: ['key', 'create', '--workspace', WS, '--scopes', 'feeds:read'], code: 1, stdout: '', stderr: `threatfeed: no workspace with id ${WS} in ${place}\n` },
    { description: 'list show, no such list', args: ['list', 'show', '--id', WS], code: 1, stdout: '', stderr: `threatfeed: no list with id ${WS} in ${place}\n` },
    { description: 'list ls, no such workspace', args: ['list', 'ls', '--workspace', WS], code: 1, stdout: '', stderr: `threatfeed: no workspace with id ${WS} in ${place}\n` },
    { description: 'key revoke, no such key', args: ['key', 'revoke', '--id', WS], code: 1, stdout: '', stderr: `threatfeed: no API key with id ${WS} in ${place}\n` },
    { description: 'workspace update, no such workspace', args: ['workspace', 'update', '--workspace', WS, '--name', 'x'], code: 1, stdout: '', stderr: `threatfeed: no workspace with id ${WS} in ${place}\n` },
  ]
  for (const c of cases) {
    const r = await cli(c.args, env)
    t.same(r, { code: c.code, stdout: c.stdout, stderr: c.stderr }, c.description)
  }
  // --json stays one document: an empty array, and nothing said on stderr.
  t.same(await cli(['key', 'ls', '--json'], env), { code: 0, stdout: '[]\n', stderr: '' })

  const key = await cli(['key', 'create', '--workspace', ws, '--scopes', 'signals:write,feeds:read', '--json'], env)
  const second = await cli(['key', 'create', '--workspace', ws, '--scopes', 'feeds:read', '--json'], env)
  const revokedId = (JSON.parse(second.stdout) as { id: string }).id
  t.equal((await cli(['key', 'revoke', '--id', revokedId], env)).code, 0)
  const keyId = (JSON.parse(key.stdout) as { id: string }).id
  const keys = await cli(['key', 'ls'], env)
  const lines = keys.stdout.trimEnd().split('\n')
  t.match(lines[0], /^ID +WORKSPACE +STATE +CREATED +SCOPES +BOUNCER$/, 'key ls: header')
  t.match(lines.find((l) => l.startsWith(keyId)), new RegExp(`^${keyId} +${ws} +active +\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z +signals:write,feeds:read$`), 'key ls: an active key')
  t.match(lines.find((l) => l.startsWith(revokedId)), new RegExp(`^${revokedId} +${ws} +revoked +\\S+ +feeds:read$`), 'key ls: a revoked key')
  const wss = await cli(['workspace', 'ls'], env)
  t.match(wss.stdout, new RegExp(`^ID +SUBSCRIPTION +NAME\\n${ws} +active +main\\n$`), 'workspace ls: header and row')
  t.equal((await cli(['list', 'create', '--workspace', ws, '--name', 'edl'], env)).code, 0)
  t.match((await cli(['list', 'ls', '--workspace', ws], env)).stdout, /^ID +NAME\n[0-9a-f-]{36} +edl\n$/, 'list ls: header and row')
})

t.test('unknown THREATFEED_* variables: one warning line each, with the nearest known name', async (t) => {
  const data = join(dir, 'warn', 'data')
  await cli(['workspace', 'create', '--name', 'w'], { THREATFEED_DATA_DIR: data })
  const cases = [
    { description: 'a missing underscore', env: { THREATFEED_DATADIR: '/srv' }, expected: ['THREATFEED_DATADIR is not a threatfeed variable and is ignored; did you mean THREATFEED_DATA_DIR?'] },
    { description: 'a swapped pair', env: { THREATFEED_PLOL_MS: '100' }, expected: ['THREATFEED_PLOL_MS is not a threatfeed variable and is ignored; did you mean THREATFEED_POLL_MS?'] },
    { description: 'a short form', env: { THREATFEED_TLS_CRT: 'c.pem' }, expected: ['THREATFEED_TLS_CRT is not a threatfeed variable and is ignored; did you mean THREATFEED_TLS_CERT?'] },
    { description: 'nothing near', env: { THREATFEED_COLOUR_SCHEME: 'dark' }, expected: ['THREATFEED_COLOUR_SCHEME is not a threatfeed variable and is ignored'] },
    { description: 'two, sorted', env: { THREATFEED_WORKER: '2', THREATFEED_LOGLEVEL: 'debug' }, expected: ['THREATFEED_LOGLEVEL is not a threatfeed variable and is ignored; did you mean THREATFEED_LOG_LEVEL?', 'THREATFEED_WORKER is not a threatfeed variable and is ignored; did you mean THREATFEED_WORKERS?'] },
    { description: 'known ones and others', env: { THREATFEED_POLL_MS: '100', THREATFEED_KEY: 'k', HOME: '/root', THREAT_FEED: 'x' }, expected: [] },
  ]
  for (const c of cases) {
    const r = await cli(['workspace', 'ls'], { THREATFEED_DATA_DIR: data, ...c.env })
    t.equal(r.code, 0, c.description)
    t.same(r.stderr.split('\n').filter((l) => l !== ''), c.expected.map((l) => `threatfeed: warning: ${l}`), c.description)
  }
  // `serve` too, before it reads its configuration (here a bad PORT ends it at once).
  const serve = await cli(['serve'], { THREATFEED_DATA_DIR: data, THREATFEED_DATADIR: data, PORT: 'none' })
  t.equal(serve.code, 1)
  t.equal(serve.stderr, 'threatfeed: warning: THREATFEED_DATADIR is not a threatfeed variable and is ignored; did you mean THREATFEED_DATA_DIR?\n')
})

t.test('every THREATFEED_* variable the sources name is a known one (a new variable goes in src/config-variables.ts)', async (t) => {
  const names = new Set<string>()
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name)
      if (e.isDirectory()) walk(p)
      // The module that lists them gives a mistyped one as its example.
      else if (/\.(ts|js|mjs)$/.test(e.name) && e.name !== 'config-variables.ts') for (const m of readFileSync(p, 'utf8').matchAll(/THREATFEED_[A-Z0-9_]*[A-Z0-9]/g)) names.add(m[0])
    }
  }
  for (const d of ['src', 'workers', 'bin']) walk(new URL(`../../${d}`, import.meta.url).pathname)
  const known = new Set(KNOWN_VARIABLES)
  t.same([...names].filter((n) => !known.has(n)).sort(), [], 'unknown to src/config-variables.ts')
})

t.test('a data directory that cannot be opened: the message names it and why', async (t) => {
  const file = join(dir, 'a-file')
  writeFileSync(file, '')
  const cases = [
    { description: 'a file where the directory should be', data: file, reason: 'EEXIST' },
    { description: 'a directory under a file', data: join(file, 'data'), reason: 'ENOTDIR' },
  ]
  for (const c of cases) {
    const r = await cli(['workspace', 'create', '--name', 'x'], { THREATFEED_DATA_DIR: c.data })
    t.equal(r.code, 1, c.description)
    t.equal(r.stderr, `threatfeed: rule store unavailable (cannot open the embedded store in ${c.data} (THREATFEED_DATA_DIR): ${c.reason})\n`, c.description)
  }
})
