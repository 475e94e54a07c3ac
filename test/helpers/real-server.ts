/**
 * The server as `threatfeed serve` composes it (src/main.ts: the consumer on its own thread,
 * /readyz and /metrics as wired there) on a data directory of the test's choosing, with one
 * workspace and a key of both scopes, and the few requests the failure tests make.
 *
 * @example
 *   const s = await startRealServer(dir)
 *   t.teardown(() => s.server.stop())
 *   const r = await s.postBlocks(['192.0.2.1'])
 */
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer, type RunningServer } from '../../src/main.js'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from './server.js'
import { threadsFromEnv } from './feed-server.js'

export interface RealServer {
  readonly server: RunningServer
  readonly base: string
  /** The API key (both scopes). */
  readonly key: string
  /** Posts a v1 batch blocking each address; the status, the error code if any, and the ms taken. */
  postBlocks (ips: readonly string[]): Promise<{ status: number, code: string | undefined, ms: number }>
  /** The workspace feed's body, or its status when not 200. */
  feed (): Promise<{ status: number, body: string }>
  /** /readyz, or /readyz?for=PART. */
  readyz (part?: 'signals' | 'feeds'): Promise<{ status: number, body: { status: string, can?: Record<string, boolean>, checks: Record<string, unknown> } }>
  /** The value of an unlabelled metric in a /metrics scrape (NaN when absent). */
  metric (name: string): Promise<number>
}

/** `opts.key`: a key the data directory holds already (a restart): no workspace or key is made. */
export async function startRealServer (dataDir: string, env: Record<string, string> = {}, opts: { key?: string } = {}): Promise<RealServer> {
  let key = opts.key
  if (key === undefined) {
    const store = await openStore({ kind: 'embedded', dataDir })
    key = generateApiKey()
    const ws = await store.workspaces.create({ name: 'main', subscription: 'active' })
    await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
    await store.close()
  }
  const config = loadConfig({
    HOST: '127.0.0.1',
    PORT: '0',
    THREATFEED_DATA_DIR: dataDir,
    THREATFEED_LOG_LEVEL: 'silent',
    THREATFEED_POLL_MS: '100',
    THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
    THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
    THREATFEED_HTTP_THREADS: String(threadsFromEnv()),
    ...env,
  })
  const server = await startServer(config, createLogger(config.logLevel))
  const base = `http://127.0.0.1:${server.port}`
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
  return {
    server,
    base,
    key,
    async postBlocks (ips) {
      const started = Date.now()
      const body = JSON.stringify(ips.map((ip) => ({ type: 'access_rules', action: 'block', ip })))
      const r = await fetch(`${base}/v1/signal`, { method: 'POST', headers, body })
      const text = await r.text()
      let code: string | undefined
      if (r.status >= 400) code = (JSON.parse(text) as { error?: string, code?: string }).error
      return { status: r.status, code, ms: Date.now() - started }
    },
    async feed () {
      const r = await fetch(`${base}/v1/threat/feeds`, { headers })
      return { status: r.status, body: await r.text() }
    },
    async readyz (part) {
      const r = await fetch(`${base}/readyz${part === undefined ? '' : `?for=${part}`}`)
      return { status: r.status, body: await r.json() as { status: string, can?: Record<string, boolean>, checks: Record<string, unknown> } }
    },
    async metric (name) {
      const text = await (await fetch(`${base}/metrics`)).text()
      const line = text.split('\n').find((l) => l.startsWith(name + ' '))
      return line === undefined ? NaN : Number(line.slice(name.length + 1))
    },
  }
}
