/**
 * The server as `threatfeed serve` composes it (src/main.ts), on a temporary LMDB store, with
 * the keys the admin API tests use: `root` (admin:all), `admin` (admin, main workspace),
 * `otherAdmin` (admin, other workspace), `unpaid` (admin, inactive workspace), `feeds`
 * (feeds:read), `signals` (signals:write), `rules` (rules:read), `revoked` (admin, revoked).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer, type RunningServer } from '../../src/main.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import type { Scope, Workspace } from '../../src/store/types.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from './server.js'

/** A parsed answer, read field by field by the tests (and checked by their assertions). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above
export type Json = any

export type AdminKeyName = 'root' | 'admin' | 'otherAdmin' | 'unpaid' | 'feeds' | 'signals' | 'rules' | 'revoked'

export interface AdminServer {
  readonly server: RunningServer
  readonly base: string
  readonly main: Workspace
  readonly other: Workspace
  readonly unpaid: Workspace
  readonly keys: Record<AdminKeyName, string>
  readonly keyIds: Record<AdminKeyName, string>
  /** A request with that key (or none); the answer's body parsed when it is JSON. */
  call (method: string, path: string, key: AdminKeyName | null, body?: unknown, headers?: Record<string, string>): Promise<{ status: number, headers: Headers, body: Json, text: string }>
  close (): Promise<void>
}

export async function startAdminServer (env: Record<string, string> = {}): Promise<AdminServer> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-admin-'))
  const server = await startServer(loadConfig({
    HOST: '127.0.0.1',
    PORT: '0',
    THREATFEED_DATA_DIR: dir,
    THREATFEED_LOG_LEVEL: 'silent',
    THREATFEED_POLL_MS: '50',
    THREATFEED_FEED_REBUILD_MS: '50',
    THREATFEED_WORKERS: '1',
    THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
    THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
    ...env,
  }), createLogger('silent'))
  const s = server.store
  const main = await s.workspaces.create({ name: 'main', subscription: 'active' })
  const other = await s.workspaces.create({ name: 'other', subscription: 'active' })
  const unpaid = await s.workspaces.create({ name: 'unpaid', subscription: 'inactive' })
  const keys = {} as Record<AdminKeyName, string>
  const keyIds = {} as Record<AdminKeyName, string>
  const make = async (name: AdminKeyName, ws: Workspace, scopes: Scope[]): Promise<void> => {
    keys[name] = generateApiKey()
    keyIds[name] = (await s.keys.create({ workspaceId: ws.id, hash: hashApiKey(keys[name]), scopes })).id
  }
  await make('root', main, ['admin:all'])
  await make('admin', main, ['admin'])
  await make('otherAdmin', other, ['admin'])
  await make('unpaid', unpaid, ['admin'])
  await make('feeds', main, ['feeds:read'])
  await make('signals', main, ['signals:write'])
  await make('rules', main, ['rules:read'])
  await make('revoked', main, ['admin'])
  await s.keys.revoke(keyIds.revoked)
  const base = `http://127.0.0.1:${server.port}`
  return {
    server,
    base,
    main,
    other,
    unpaid,
    keys,
    keyIds,
    async call (method, path, key, body, headers = {}) {
      const h: Record<string, string> = { ...headers }
      if (key !== null) h.authorization = `Bearer ${keys[key]}`
      if (body !== undefined) h['content-type'] ??= 'application/json'
      const res = await fetch(base + path, { method, headers: h, ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }) })
      const text = await res.text()
      let parsed: unknown = text
      try { parsed = JSON.parse(text) } catch { /* not JSON */ }
      return { status: res.status, headers: res.headers, body: parsed, text }
    },
    async close () {
      await server.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
