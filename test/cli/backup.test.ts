/**
 * `threatfeed backup` and `threatfeed store compact` against a running server (`threatfeed serve`
 * as a process): a backup restores to a server giving the same feed bytes, ETags and
 * Last-Modified; a backup taken during ingest restores consistently and serves every entry
 * acknowledged before it began; compaction refuses while the server runs and keeps the content.
 */
import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { backupCommand } from '../../src/cli/backup.js'
import { storeCommand } from '../../src/cli/store.js'
import { streamCommand } from '../../src/cli/stream.js'
import { GEO_FIXTURES } from '../feed/fixtures.js'
import { runCommand } from '../helpers/cli.js'
import { rawRequest } from '../helpers/feed-server.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-backup-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const ASN_DB = `${GEO_FIXTURES}/GeoLite2-ASN-Test.mmdb`

interface Server { base: string, pid: number, stop: () => Promise<void> }

/** `threatfeed serve` on a data directory, resolved once it listens. */
async function serve (dataDir: string): Promise<Server> {
  const child: ChildProcess = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], {
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: dataDir, THREATFEED_FEED_REBUILD_MS: '0', THREATFEED_GEO_COUNTRY_DB: `${GEO_FIXTURES}/GeoLite2-Country-Test.mmdb`, THREATFEED_GEO_ASN_DB: ASN_DB },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()))
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no "listening" log line within 60 s')), 60_000)
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const rec = JSON.parse(line) as { msg?: string, port?: number }
      if (rec.msg === 'listening') { clearTimeout(timer); resolve(rec.port!) }
    })
  })
  let stopped: Promise<void> | null = null
  const stop = (): Promise<void> => { stopped ??= (child.kill('SIGTERM'), exited); return stopped }
  t.teardown(stop)
  return { base: `http://127.0.0.1:${port}`, pid: child.pid!, stop }
}

/** A data directory with one workspace and a key of both scopes. */
async function provision (dataDir: string): Promise<{ key: string, workspaceId: string }> {
  const store = await openEmbeddedStore(dataDir)
  const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
  const key = generateApiKey()
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
  await store.close()
  return { key, workspaceId: ws.id }
}

let seed = 7
const randomIp = (): string => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0
  return `${(seed >>> 24) % 223 + 1}.${(seed >>> 16) & 255}.${(seed >>> 8) & 255}.${seed & 255}`
}

/** Posts one v1 batch of blocks; resolves with its IPs once acknowledged (200). */
async function post (base: string, key: string, n: number): Promise<string[]> {
  const ips = Array.from({ length: n }, randomIp)
  const r = await fetch(`${base}/v1/signal`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(ips.map((ip) => ({ type: 'access_rules', action: 'block', ip }))),
  })
  const text = await r.text()
  if (r.status !== 200) throw new Error(`signal: ${r.status} ${text}`)
  return ips
}

interface Seen { status: number, body: Buffer, etag: string, lastModified: string }
const VARIANTS = ['format=plain', 'format=plain&family=v4', 'format=dialect_a', 'format=nftables&family=v4'] as const

async function get (base: string, key: string, query: string, headers: Record<string, string> = {}): Promise<Seen> {
  const r = await rawRequest(base, `/v1/threat/feeds?${query}`, { headers: { authorization: `Bearer ${key}`, ...headers } })
  return { status: r.status, body: r.body, etag: String(r.headers.etag ?? ''), lastModified: String(r.headers['last-modified'] ?? '') }
}

/** Polls the plain feed until it lists every IP of `ips`; returns the feed's lines. */
async function until (base: string, key: string, ips: readonly string[], ms = 20_000): Promise<Set<string>> {
  const deadline = Date.now() + ms
  for (;;) {
    const r = await get(base, key, 'format=plain')
    const lines = new Set(r.body.toString().split('\n'))
    const missing = ips.filter((ip) => !lines.has(`${ip}/32`))
    if (r.status === 200 && missing.length === 0) return lines
    if (Date.now() > deadline) throw new Error(`feed ${r.status}: ${missing.length} of ${ips.length} entries missing, e.g. ${missing.slice(0, 3).join(', ')}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const envOf = (dataDir: string): NodeJS.ProcessEnv => ({ THREATFEED_DATA_DIR: dataDir })

t.test('a backup of a quiet server restores to the same feed bytes, ETags and Last-Modified', async (t) => {
  const dataDir = join(dir, 'quiet')
  const { key } = await provision(dataDir)
  // The default ASN database as the server builds it, with its stamp (built here from the test
  // database: the backup copies the files, whatever their content).
  mkdirSync(join(dataDir, 'geo'))
  copyFileSync(ASN_DB, join(dataDir, 'geo', 'asn.mmdb'))
  writeFileSync(join(dataDir, 'geo', 'asn.mmdb.json'), '{"source":"test"}\n')
  const original = await serve(dataDir)
  const acked: string[] = []
  for (let i = 0; i < 20; i++) acked.push(...await post(original.base, key, 500))
  // The original at rest: everything acknowledged applied (lag 0) and in the feed.
  await until(original.base, key, acked)
  const status = JSON.parse((await runCommand(streamCommand, ['status', '--json'], { env: envOf(dataDir) })).stdout) as { lag: number, head: number }
  t.equal(status.lag, 0, 'the consumer applied everything acknowledged')
  const before = new Map<string, Seen>()
  for (const q of VARIANTS) for (const enc of ['identity', 'gzip']) before.set(`${q} ${enc}`, await get(original.base, key, q, { 'accept-encoding': enc }))

  const out = join(dir, 'quiet-backup')
  const r = await runCommand(backupCommand, ['--out', out, '--json'], { env: envOf(dataDir) })
  t.equal(r.code, 0, r.stderr)
  const report = JSON.parse(r.stdout) as { out: string, files: Array<{ path: string, bytes: number }>, streamHead: number, checkpoints: Record<string, number> }
  t.equal(report.out, out)
  t.same(report.files.map((f) => f.path).sort(), ['data.mdb', 'geo/asn.mmdb', 'geo/asn.mmdb.json', 'stream/data.mdb'])
  t.equal(report.streamHead, status.head, 'the copy holds the whole stream')
  t.same(report.checkpoints, { rules: status.head }, 'and the checkpoint where the consumer stood')
  t.same(readFileSync(join(out, 'geo', 'asn.mmdb')), readFileSync(ASN_DB), 'the ASN database is copied')
  await original.stop()

  // Versions are kept in whole seconds: a restore within the same second would prove less.
  await new Promise((resolve) => setTimeout(resolve, 1100))
  const restored = await serve(out)
  await until(restored.base, key, acked)
  for (const q of VARIANTS) {
    for (const enc of ['identity', 'gzip']) {
      const was = before.get(`${q} ${enc}`)!
      const now = await get(restored.base, key, q, { 'accept-encoding': enc })
      t.same([was.status, now.status], [200, 200], `${q} ${enc}: 200 from both`)
      t.not(was.etag, '', `${q} ${enc}: an ETag`)
      t.equal(now.etag, was.etag, `${q} ${enc}: the same ETag`)
      t.equal(now.lastModified, was.lastModified, `${q} ${enc}: the same Last-Modified`)
      t.same(now.body, was.body, `${q} ${enc}: the same bytes`)
    }
  }
  await restored.stop()
})

t.test('a backup taken during ingest is consistent and restores every entry acknowledged before it began', async (t) => {
  const dataDir = join(dir, 'busy')
  const { key, workspaceId } = await provision(dataDir)
  const original = await serve(dataDir)
  const ackedBefore: string[] = []
  let started = false
  let stop = false
  let during = 0
  // Two batches always in flight, so that ingest runs across the whole copy.
  const ingest = async (): Promise<void> => {
    while (!stop) {
      const ips = await post(original.base, key, 500)
      if (started) during++
      else ackedBefore.push(...ips)
    }
  }
  const loops = [ingest(), ingest()]
  while (ackedBefore.length < 20_000) await new Promise((resolve) => setTimeout(resolve, 20))
  const out = join(dir, 'busy-backup')
  started = true
  const acked = [...ackedBefore]
  const r = await runCommand(backupCommand, ['--out', out, '--json'], { env: envOf(dataDir) })
  stop = true
  await Promise.all(loops)
  t.equal(r.code, 0, r.stderr)
  t.ok(during > 0, `ingest went on during the backup (${during} batches acknowledged after it began)`)
  await original.stop()

  // Consistent: no rule of the copy is ahead of its stream — each rule's record is in it.
  const copy = await openEmbeddedStore(out)
  const head = await copy.stream.head()
  const checkpoint = await copy.stream.getCheckpoint('rules')
  t.ok(checkpoint <= head, `the checkpoint (${checkpoint}) is within the stream (head ${head})`)
  t.ok(head >= acked.length, `the copied stream holds every entry acknowledged before the backup (${head} >= ${acked.length})`)
  const rules = await copy.rules.list(workspaceId, 'access_rule')
  t.ok(rules.length > 0, `the copy has rules (${rules.length})`)
  const missing = []
  for (const rule of rules) {
    const [record] = await copy.stream.read(rule.seq, 1)
    if (record?.seq !== rule.seq || rule.seq > checkpoint) missing.push(rule.seq)
  }
  t.same(missing, [], 'every rule was applied from a record the copied stream holds, at or before the checkpoint')
  await copy.close()
  rmSync(join(out, 'lock.mdb'))
  rmSync(join(out, 'stream', 'lock.mdb'))

  const restored = await serve(out)
  const lines = await until(restored.base, key, acked)
  t.ok(lines.size - 1 >= acked.length, 'the restored server replays and serves every entry acknowledged before the backup')
  await restored.stop()
})

t.test('store compact refuses while a server has the store open, then compacts keeping the content', async (t) => {
  const dataDir = join(dir, 'compact')
  const { key } = await provision(dataDir)
  const server = await serve(dataDir)
  const acked: string[] = []
  for (let i = 0; i < 40; i++) acked.push(...await post(server.base, key, 500))
  await until(server.base, key, acked)
  const size = (): number => statSync(join(dataDir, 'data.mdb')).size + statSync(join(dataDir, 'stream', 'data.mdb')).size
  const was = size()
  const refused = await runCommand(storeCommand, ['compact'], { env: envOf(dataDir) })
  t.equal(refused.code, 1, 'exit 1')
  t.equal(refused.stderr, `threatfeed: the store in ${dataDir} is open in process ${server.pid}; stop the server (and any other threatfeed command) before compacting\n`)
  t.equal(size(), was, 'nothing changed')
  const before = await get(server.base, key, 'format=plain')
  await server.stop()
  // The server writes on until it stops (the served copy of a variant polled for the first time).
  const stopped = size()

  const r = await runCommand(storeCommand, ['compact', '--json'], { env: envOf(dataDir) })
  t.equal(r.code, 0, r.stderr)
  const report = JSON.parse(r.stdout) as { dataDir: string, before: number, after: number }
  t.same(report, { dataDir, before: stopped, after: size() })
  t.ok(report.after < report.before, `smaller: ${report.before} → ${report.after} bytes`)
  await new Promise((resolve) => setTimeout(resolve, 1100))
  const again = await serve(dataDir)
  const after = await get(again.base, key, 'format=plain')
  t.same([after.status, after.etag, after.lastModified, after.body], [200, before.etag, before.lastModified, before.body], 'the same feed from the compacted store')
  // And the compacted files take writes: rules applied and lapsing, many transactions of them.
  const more: string[] = []
  for (let i = 0; i < 40; i++) more.push(...await post(again.base, key, 500))
  await until(again.base, key, [...acked, ...more])
  await again.stop()
})

t.test('bad uses of backup and store compact', async (t) => {
  const dataDir = join(dir, 'bad')
  await provision(dataDir)
  const full = join(dir, 'full')
  mkdirSync(full)
  writeFileSync(join(full, 'x'), '')
  const cases = [
    { description: 'backup without --out', cmd: backupCommand, args: [], env: envOf(dataDir), expected: { code: 2, stderr: 'threatfeed: --out is required\n' } },
    { description: 'backup into a directory that is not empty', cmd: backupCommand, args: ['--out', full], env: envOf(dataDir), expected: { code: 1, stderr: `threatfeed: ${full} is not empty; back up into a new directory\n` } },
    { description: 'backup of a directory without a store', cmd: backupCommand, args: ['--out', join(dir, 'none-backup')], env: envOf(join(dir, 'none')), expected: { code: 1, stderr: `threatfeed: no embedded store in ${join(dir, 'none')} (THREATFEED_DATA_DIR)\n` } },
    { description: 'compact of a directory without a store', cmd: storeCommand, args: ['compact'], env: envOf(join(dir, 'none')), expected: { code: 1, stderr: `threatfeed: no embedded store in ${join(dir, 'none')} (THREATFEED_DATA_DIR)\n` } },
    { description: 'an unknown store verb', cmd: storeCommand, args: ['vacuum'], env: envOf(dataDir), expected: { code: 2, stderr: 'threatfeed: unknown store command "vacuum"; see threatfeed store --help\n' } },
    { description: 'backup of MongoDB names mongodump', cmd: backupCommand, args: ['--out', join(dir, 'mongo-backup')], env: { THREATFEED_STORE: 'mongodb', THREATFEED_MONGODB_URI: 'mongodb://127.0.0.1:1/tf' }, expected: { code: 1, stderr: 'threatfeed: threatfeed backup copies the embedded store; back up MongoDB with mongodump --oplog (a replica set, for a consistent copy) and restore with mongorestore --oplogReplay (docs/backup.md)\n' } },
    { description: 'compact of MongoDB says it compacts itself', cmd: storeCommand, args: ['compact'], env: { THREATFEED_STORE: 'mongodb', THREATFEED_MONGODB_URI: 'mongodb://127.0.0.1:1/tf' }, expected: { code: 1, stderr: 'threatfeed: threatfeed store compact compacts the embedded store; MongoDB reuses and compacts its own files (its compact command, docs/backup.md)\n' } },
  ]
  for (const c of cases) {
    const r = await runCommand(c.cmd, c.args, { env: c.env })
    t.same({ code: r.code, stderr: r.stderr }, c.expected, c.description)
  }
})
