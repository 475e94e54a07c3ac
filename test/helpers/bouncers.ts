/**
 * For the tests that run CrowdSec's real bouncers against threatfeed (issue 31): the bouncers'
 * configs as docs/bouncers-configs.md gives them, a data directory with a key and seeded hosts,
 * `threatfeed serve` as a process of its own (restarted, or a second one on the same store), a
 * TCP forwarder in front of it (the balancer a bouncer's fixed api_url points at), and the plain
 * feed a bouncer's set must equal.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync } from 'node:fs'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import type { RuleOp } from '../../src/store/batch-types.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from './server.js'
import { threadsFromEnv } from './feed-server.js'

const DOC = join(import.meta.dirname, '..', '..', 'docs', 'bouncers-configs.md')

/** True when an executable is on PATH. */
export const hasTool = (tool: string): boolean => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0

/**
 * The config block of docs/bouncers-configs.md whose info string is `yaml NAME`, with the
 * top-level keys in `set` replaced (the tests change only where it talks to and writes to).
 */
export function docConfig (name: string, set: Record<string, string>): string {
  const doc = readFileSync(DOC, 'utf8')
  const m = new RegExp('```yaml ' + name.replaceAll('.', '\\.') + '\\n([\\s\\S]*?)```').exec(doc)
  if (m === null) throw new Error(`docs/bouncers-configs.md has no \`\`\`yaml ${name} block`)
  let yaml = m[1]!
  for (const [key, value] of Object.entries(set)) {
    const line = new RegExp(`^${key}:.*$`, 'm')
    if (!line.test(yaml)) throw new Error(`${name} in the doc has no ${key}`)
    yaml = yaml.replace(line, `${key}: ${value}`)
  }
  return yaml
}

export interface BouncerFixture { readonly dir: string, readonly key: string, readonly keyId: string, readonly workspaceId: string }

const ipv4 = (a: number): string => `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}`

/** Hosts two apart from `start` (so none coalesce): `count` of them, as bare addresses. */
export function spacedHosts (start: number, count: number): string[] {
  return Array.from({ length: count }, (_, i) => ipv4(start + i * 2))
}

/**
 * A data directory with a workspace, a key of both scopes and `hosts` blocked, written to the
 * store directly (131,072 signals would take minutes on a loaded machine; the rounds of changes
 * go through the API).
 */
export async function makeBouncerFixture (hosts: readonly string[] = []): Promise<BouncerFixture> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-bouncers-'))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = await store.workspaces.create({ name: 'main', subscription: 'active' })
  const key = generateApiKey()
  const created = await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
  const CHUNK = 16_384
  for (let start = 0; start < hosts.length; start += CHUNK) {
    const ops: RuleOp[] = hosts.slice(start, start + CHUNK).map((ip, i) => ({
      op: 'upsertAccessRule',
      input: { kind: 'access_rule', workspaceId: ws.id, ruleRef: null, labels: {}, reason: null, expiresAt: null, seq: start + i + 1, target: { type: 'ip', value: ip.includes(':') ? `${ip}/128` : `${ip}/32` }, action: 'block', name: null, confidence: null, severity: null },
    }))
    await store.applyRuleBatch({ ops })
  }
  await store.close()
  return { dir, key, keyId: created.id, workspaceId: ws.id }
}

export function serveEnv (dir: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    HOST: '127.0.0.1',
    PORT: '0',
    THREATFEED_DATA_DIR: dir,
    THREATFEED_LOG_LEVEL: 'info',
    THREATFEED_POLL_MS: '100',
    THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
    THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
    THREATFEED_RATE_LIMIT_RPS: '100000',
    THREATFEED_RATE_LIMIT_BURST: '100000',
    THREATFEED_HTTP_THREADS: String(threadsFromEnv()),
    ...extra,
  }
}

export interface Served { readonly port: number, readonly pid: number, stop (): Promise<number | null> }

/** `threatfeed serve` as a process of its own; resolves once it listens. */
export async function spawnServe (env: Record<string, string>): Promise<Served> {
  const child = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no "listening" log line within 120 s')), 120_000)
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`threatfeed serve exited with ${code}`)) })
    createInterface({ input: child.stdout }).on('line', (line) => {
      try {
        const rec = JSON.parse(line) as Record<string, unknown>
        if (rec.msg === 'listening') { clearTimeout(timer); resolve(rec.port as number) }
      } catch {
        // Not a log line.
      }
    })
  })
  return { port, pid: child.pid!, stop: async () => { if (child.exitCode === null) child.kill('SIGTERM'); return exited } }
}

/**
 * A TCP forwarder on `host`: what a bouncer's api_url names, in front of whichever server is
 * current. `retarget` sends new connections elsewhere and closes the open ones (a balancer
 * moving a client to another node; the bouncer reconnects on its next pull).
 */
export class Forwarder {
  #server: Server
  #target: number
  #sockets = new Set<Socket>()
  port = 0

  constructor (target: number) {
    this.#target = target
    this.#server = createServer((client) => {
      const upstream = createConnection({ host: '127.0.0.1', port: this.#target })
      this.#sockets.add(client).add(upstream)
      const drop = (): void => { client.destroy(); upstream.destroy(); this.#sockets.delete(client); this.#sockets.delete(upstream) }
      client.on('error', drop).on('close', drop)
      upstream.on('error', drop).on('close', drop)
      client.pipe(upstream).pipe(client)
    })
  }

  listen (host: string): Promise<number> {
    return new Promise((resolve) => this.#server.listen(0, host, () => { this.port = (this.#server.address() as { port: number }).port; resolve(this.port) }))
  }

  retarget (port: number): void {
    this.#target = port
    for (const s of this.#sockets) s.destroy()
    this.#sockets.clear()
  }

  close (): Promise<void> {
    this.retarget(0)
    return new Promise((resolve) => this.#server.close(() => resolve()))
  }
}

const headers = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' })

/** The plain feed (the workspace's, or a list's), both families, as CIDRs; null while not served yet. */
export async function plainFeed (port: number, key: string, list?: string): Promise<Set<string> | null> {
  const r = await fetch(`http://127.0.0.1:${port}/v1/threat/feeds${list === undefined ? '' : `/${list}`}?format=plain`, { headers: headers(key) })
  if (r.status !== 200) return null
  const body = await r.text()
  return new Set(body.split('\n').filter((l) => l !== '' && !l.startsWith('#')))
}

/** Posts a v2 batch; throws unless it is accepted. */
export async function signal (port: number, key: string, ops: unknown[]): Promise<void> {
  const r = await fetch(`http://127.0.0.1:${port}/v2/signal`, { method: 'POST', headers: headers(key), body: JSON.stringify(ops) })
  if (r.status >= 300) throw new Error(`signal: ${r.status} ${await r.text()}`)
}

export const block = (ref: string, ip: string, expiresIn?: number, labels?: Record<string, string>): unknown => ({ kind: 'access_rule', op: 'upsert', rule_ref: ref, rule: { target: { ip }, action: 'block' }, ...(expiresIn === undefined ? {} : { expires_in: expiresIn }), ...(labels === undefined ? {} : { labels }) })
export const allow = (ref: string, ip: string): unknown => ({ kind: 'access_rule', op: 'upsert', rule_ref: ref, rule: { target: { ip }, action: 'allow' } })
export const unblock = (ref: string): unknown => ({ kind: 'access_rule', op: 'delete', rule_ref: ref })

/** A decision's value as a CIDR (a host is written bare, as LAPI and nft write it). */
export const asCidr = (v: string): string => v.includes('/') ? v : `${v}/${v.includes(':') ? 128 : 32}`

/** What `want` has that `have` lacks and the other way round, a few of each, for a message. */
export function difference (have: Set<string>, want: Set<string>): string {
  const missing = [...want].filter((x) => !have.has(x))
  const extra = [...have].filter((x) => !want.has(x))
  return `missing ${missing.length} (${missing.slice(0, 5).join(' ')}), extra ${extra.length} (${extra.slice(0, 5).join(' ')})`
}

export const sameSet = (a: Set<string>, b: Set<string>): boolean => a.size === b.size && [...a].every((x) => b.has(x))

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `check` until it returns true or `ms` pass; the ms it took, or -1. */
export async function within (ms: number, check: () => Promise<boolean> | boolean, every = 100): Promise<number> {
  const t0 = Date.now()
  for (;;) {
    if (await check()) return Date.now() - t0
    if (Date.now() - t0 > ms) return -1
    await sleep(every)
  }
}
