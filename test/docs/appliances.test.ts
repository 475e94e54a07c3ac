/**
 * docs/appliances.md's snippets, taken from the page and run against a running server
 * (`threatfeed serve` as a process): nginx checked with `nginx -t` and then serving from its cache,
 * the nftables file with `nft -c`, the ipset restore for real where the kernel lets us. A tool
 * that is missing (or ipset without netlink rights) skips its test with one line saying so.
 */
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { GEO_FIXTURES, rule } from '../feed/fixtures.js'
import { NO_COVERAGE, THREATFEED_BIN } from '../helpers/cli.js'

const has = (tool: string): boolean => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0
const dir = mkdtempSync(join(tmpdir(), 'tf-consumers-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

/** The fenced blocks of docs/appliances.md, in order, with their info strings. */
const page = readFileSync(new URL('../../docs/appliances.md', import.meta.url), 'utf8')
const blocks = [...page.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1]!, text: m[2]! }))
const nginxBlock = blocks.find((b) => b.lang === 'nginx')!.text
const ipsetBlock = blocks.find((b) => b.text.includes('ipset restore'))!.text
const nftBlock = blocks.find((b) => b.text.includes('nft -f'))!.text

// Random v4 hosts, so the feed has as many entries as rules; a few IPv6 ones it must leave out.
let seed = 11
const rand = (): number => { seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0; return seed }
const hosts = [...new Set(Array.from({ length: 3000 }, () => { const a = rand(); return `${(a >>> 24) % 223 + 1}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}/32` }))]
const key = generateApiKey()
const dataDir = join(dir, 'data')
const store = await openEmbeddedStore(dataDir)
const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['feeds:read'] })
const inputs = [...hosts, '2001:db8::1/128', '2001:db8::5/128'].map((ip) => rule(ws.id, ip))
for (let i = 0; i < inputs.length; i += 500) await Promise.all(inputs.slice(i, i + 500).map((r) => store.rules.upsertAccessRule(r)))
await store.close()

const server = spawn(process.execPath, [THREATFEED_BIN, 'serve'], {
  env: { PATH: process.env.PATH, ...NO_COVERAGE, HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: dataDir, THREATFEED_GEO_COUNTRY_DB: `${GEO_FIXTURES}/GeoLite2-Country-Test.mmdb`, THREATFEED_GEO_ASN_DB: `${GEO_FIXTURES}/GeoLite2-ASN-Test.mmdb` },
  stdio: ['ignore', 'pipe', 'inherit'],
})
t.teardown(() => { server.kill('SIGTERM') })
const port = await new Promise<number>((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('no "listening" log line within 60 s')), 60_000)
  createInterface({ input: server.stdout }).on('line', (line) => {
    const rec = JSON.parse(line) as { msg?: string, port?: number }
    if (rec.msg === 'listening') { clearTimeout(timer); resolve(rec.port!) }
  })
})
const base = `http://127.0.0.1:${port}`
const auth = { authorization: `Basic ${Buffer.from(`api:${key}`).toString('base64')}` }
const plainV4 = await (await fetch(`${base}/v1/threat/feeds?format=plain&family=v4`, { headers: auth })).text()
t.equal(plainV4.split('\n').length - 1, hosts.length, 'the v4 feed has every host')

/** Runs a shell snippet of the page in a directory of its own, pointed at the test server. */
function runSnippet (text: string, cwd: string): ReturnType<typeof spawnSync> {
  mkdirSync(cwd, { recursive: true })
  return spawnSync('bash', ['--norc', '--noprofile', '-euo', 'pipefail', '-c', text.replaceAll('http://localhost:8080', base)], {
    cwd,
    env: { PATH: process.env.PATH, THREATFEED_KEY: key },
    encoding: 'utf8',
  })
}

t.test('nftables: the feed body inside a set definition passes nft -c', { skip: has('nft') ? false : 'nft is not installed (apt-get install nftables)' }, async (t) => {
  const cwd = join(dir, 'nft')
  const r = runSnippet(nftBlock.replace(/^nft -f /m, 'nft -c -f '), cwd)
  t.equal(r.status, 0, `snippet: ${String(r.stderr)}`)
  t.match(readFileSync(join(cwd, 'feed-v4.nft'), 'utf8'), /^elements = \{ \d/)
  t.equal(readFileSync(join(cwd, 'feed-v4.nft'), 'utf8').split(', ').length, hosts.length, 'every host in the set')
})

const ipsetUsable = has('ipset') && spawnSync('ipset', ['list', '-n'], { stdio: 'ignore' }).status === 0
t.test('ipset: a restore file with maxelem above the default cap loads and swaps in', { skip: ipsetUsable ? false : `ipset ${has('ipset') ? 'cannot reach the kernel here (netlink)' : 'is not installed (apt-get install ipset)'}` }, async (t) => {
  const maxelem = Number(/maxelem (\d+)/.exec(ipsetBlock)![1])
  t.ok(maxelem >= 131_072, 'maxelem fits the default feed cap')
  const name = `tf-test-${process.pid}`
  const text = ipsetBlock.replaceAll('threatfeed-new', `${name}-new`).replace(/\bthreatfeed(?= hash:net|'$)/gm, name)
  t.teardown(() => { spawnSync('ipset', ['destroy', name], { stdio: 'ignore' }); spawnSync('ipset', ['destroy', `${name}-new`], { stdio: 'ignore' }) })
  for (const round of ['create', 'replace']) {
    const r = runSnippet(text, join(dir, 'ipset'))
    t.equal(r.status, 0, `${round}: ${String(r.stderr)}`)
    const listed = spawnSync('ipset', ['list', name, '-t'], { encoding: 'utf8' }).stdout
    t.match(listed, new RegExp(`maxelem ${maxelem}`), `${round}: maxelem`)
    t.match(listed, new RegExp(`Number of entries: ${hosts.length}\\n`), `${round}: every host`)
    t.not(spawnSync('ipset', ['list', `${name}-new`], { stdio: 'ignore' }).status, 0, `${round}: the temporary set is gone`)
  }
})

t.test('nginx: the configuration passes nginx -t and serves feeds from its cache', { skip: has('nginx') ? false : 'nginx is not installed (apt-get install nginx)' }, async (t) => {
  const prefix = join(dir, 'nginx')
  mkdirSync(join(prefix, 'logs'), { recursive: true })
  // nginx's workers drop to an unprivileged user when started as root: they must reach the prefix.
  chmodSync(dir, 0o755)
  const listen = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => { const p = (s.address() as { port: number }).port; s.close(() => resolve(p)) })
  })
  const snippet = nginxBlock
    .replace('/var/cache/nginx/threatfeed', join(prefix, 'cache'))
    .replace('http://127.0.0.1:8080', base)
    .replace('listen 8081;', `listen 127.0.0.1:${listen};`)
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `${k}_temp_path ${join(prefix, k)};`).join('\n  ')
  writeFileSync(join(prefix, 'nginx.conf'), `pid ${join(prefix, 'nginx.pid')};\nerror_log ${join(prefix, 'logs', 'error.log')};\nevents {}\nhttp {\n  access_log off;\n  ${temp}\n  add_header X-Cache-Status $upstream_cache_status always;\n${snippet}}\n`)
  const check = spawnSync('nginx', ['-t', '-p', prefix, '-c', join(prefix, 'nginx.conf')], { encoding: 'utf8' })
  t.equal(check.status, 0, `nginx -t: ${check.stderr}`)

  const nginx = spawn('nginx', ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-g', 'daemon off;'], { stdio: 'ignore' })
  t.teardown(() => { nginx.kill('SIGTERM') })
  const url = `http://127.0.0.1:${listen}/v1/threat/feeds?format=plain&family=v4`
  let first: Response | null = null
  for (let i = 0; i < 100 && first === null; i++) first = await fetch(url, { headers: auth }).catch(async () => { await new Promise((resolve) => setTimeout(resolve, 50)); return null })
  t.equal(first?.status, 200, readFileSync(join(prefix, 'logs', 'error.log'), 'utf8').slice(-500))
  t.equal(await first?.text(), plainV4, 'the feed through nginx')
  t.equal(first?.headers.get('x-cache-status'), 'MISS')
  const second = await fetch(url, { headers: auth })
  t.equal(await second.text(), plainV4)
  t.equal(second.headers.get('x-cache-status'), 'HIT', 'served from the cache (Cache-Control: private ignored)')
  const otherKey = await fetch(url, { headers: { authorization: 'Basic ' + Buffer.from('api:tf_wrong').toString('base64') } })
  t.equal(otherKey.status, 401, 'another key is not answered from the cache')
})
