/**
 * For the feed-consumer tests (issue 20): a data directory with a workspace, a key and a list;
 * the server as main.ts composes it with its log lines captured; polls over real connections
 * from a chosen loopback address (127.0.0.x: Linux answers them all); `consumers ls --json`.
 */
import { threadsFromEnv } from './feed-server.js'
import { spawn } from 'node:child_process'
import { request } from 'node:http'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer, type RunningServer } from '../../src/main.js'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import type { FeedConsumer } from '../../src/store/types.js'
import type { ConsumerView } from '../../src/feed/consumer-status.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from './server.js'

export interface Fixture {
  readonly dir: string
  readonly key: string
  readonly workspaceId: string
  readonly listId: string
}

/** A data directory with a workspace, a key of both scopes and a list named `edl`. */
export async function makeFixture (): Promise<Fixture> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-consumers-'))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = await store.workspaces.create({ name: 'main', subscription: 'active' })
  const key = generateApiKey()
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
  const list = await store.lists.create({ workspaceId: ws.id, name: 'edl', description: '', defaults: {}, selector: {} })
  await store.close()
  return { dir, key, workspaceId: ws.id, listId: list.id }
}

export function serverEnv (dir: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    HOST: '127.0.0.1',
    PORT: '0',
    THREATFEED_DATA_DIR: dir,
    THREATFEED_LOG_LEVEL: 'info',
    THREATFEED_POLL_MS: '100',
    THREATFEED_FEED_REBUILD_MS: '0',
    THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
    THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
    THREATFEED_CONSUMER_STALE: '2s',
    THREATFEED_HTTP_THREADS: String(threadsFromEnv()),
    ...extra,
  }
}

export interface Started {
  readonly server: RunningServer
  /** Parsed log lines so far. */
  readonly logs: Array<Record<string, unknown>>
}

export async function start (env: Record<string, string>): Promise<Started> {
  const config = loadConfig(env)
  const out = new PassThrough()
  const logs: Array<Record<string, unknown>> = []
  let partial = ''
  out.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n')
    partial = parts.pop() ?? ''
    for (const p of parts) logs.push(JSON.parse(p) as Record<string, unknown>)
  })
  const server = await startServer(config, createLogger(config.logLevel, out))
  return { server, logs }
}

export interface PollOptions {
  readonly key: string
  readonly path?: string
  readonly userAgent?: string
  readonly from?: string
  readonly forwardedFor?: string
  readonly ifNoneMatch?: string
}

/** One GET over a fresh connection from `from` (a loopback address). */
export function poll (port: number, o: PollOptions): Promise<{ status: number, etag: string | undefined, body: string }> {
  const headers: Record<string, string> = { authorization: `Bearer ${o.key}`, 'user-agent': o.userAgent ?? 'test-poller' }
  if (o.forwardedFor !== undefined) headers['x-forwarded-for'] = o.forwardedFor
  if (o.ifNoneMatch !== undefined) headers['if-none-match'] = o.ifNoneMatch
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: o.path ?? '/v1/threat/feeds', headers, localAddress: o.from ?? '127.0.0.1', agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8').on('data', (c: string) => { body += c }).on('end', () => {
        resolve({ status: res.statusCode ?? 0, etag: res.headers.etag, body })
      })
    })
    req.on('error', reject)
    req.end()
  })
}

/** A row of `consumers ls --json`: the admin API's consumer (feed/consumer-status.ts ConsumerView). */
export type Row = ConsumerView

/**
 * `threatfeed consumers ls ARGS` as a process of its own, as an operator runs it beside the
 * server. (In the server's process, a store opened for the command could take LMDB's write lock
 * on the main thread while the server's writer thread holds it waiting for that thread.)
 */
export function consumersCli (dir: string, args: string[]): Promise<{ code: number | null, stdout: string, stderr: string }> {
  const child = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'consumers', ...args], {
    env: { PATH: process.env.PATH, THREATFEED_DATA_DIR: dir, THREATFEED_CONSUMER_STALE: '2s' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (c: string) => { stdout += c })
  child.stderr.setEncoding('utf8').on('data', (c: string) => { stderr += c })
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => { resolve({ code, stdout, stderr }) })
  })
}

/** `consumers ls --json ARGS`, parsed. */
export async function consumersLs (dir: string, args: string[] = []): Promise<Row[]> {
  const r = await consumersCli(dir, ['ls', '--json', ...args])
  if (r.code !== 0) throw new Error(`consumers ls: ${r.stderr}`)
  return JSON.parse(r.stdout) as Row[]
}

/** The server's consumer records once `ok` holds of them (read in its process: reads take no lock). */
export function storedConsumers (server: RunningServer, ok: (c: FeedConsumer[]) => boolean): Promise<FeedConsumer[]> {
  return eventually(() => server.store.consumers.list(), ok)
}

/** Polls `probe` until it answers true (10 s at most); returns its last value. */
export async function eventually<T> (probe: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
  const until = Date.now() + ms
  for (;;) {
    const v = await probe()
    if (ok(v) || Date.now() > until) return v
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

