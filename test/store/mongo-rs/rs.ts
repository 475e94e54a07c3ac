/**
 * The replica-set suite's helpers (docs/mongodb.md, "The replica-set suite"). Every file of the
 * suite runs only with THREATFEED_TEST_MONGODB_URI set, a replica set of three members; the
 * scenarios that stop or kill a member also need THREATFEED_TEST_MONGODB_COMPOSE, the compose
 * file that started it (deploy/mongodb-rs.compose.yml), to do so with `docker compose`.
 * threatfeed nodes are started here from the checkout (test/helpers/cluster-nodes.ts), so that a
 * test can kill or stop one.
 */
import { spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MongoClient } from 'mongodb'
import type { Test } from 'tap'
import { generateApiKey, hashApiKey } from '../../../src/store/api-key.js'
import type { BatchingStore } from '../../../src/store/batch-types.js'
import { openStore } from '../../../src/store/open.js'
import { get, post, startNode, stopNode, type Node } from '../../helpers/cluster-nodes.js'

export const RS_URI = process.env.THREATFEED_TEST_MONGODB_URI ?? ''
export const COMPOSE_FILE = process.env.THREATFEED_TEST_MONGODB_COMPOSE ?? ''

/** True when the suite can run; otherwise plans nothing, with one line saying why. */
export function replicaSetOrSkip (t: Test): boolean {
  if (RS_URI !== '') return true
  t.plan(0, 'replica-set suite skipped: THREATFEED_TEST_MONGODB_URI is not set (docs/mongodb.md, "The replica-set suite")')
  return false
}

/** Skip reason for a subtest that stops or kills members, or false when it can. */
export const needsCompose = COMPOSE_FILE === '' ? 'THREATFEED_TEST_MONGODB_COMPOSE is not set: members cannot be stopped' : false

/** `docker compose -f <file> …`; throws with its output when it fails. */
export function compose (...args: string[]): void {
  const r = spawnSync('docker', ['compose', '-f', COMPOSE_FILE, ...args], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`docker compose ${args.join(' ')}: ${r.stderr}`)
}

/** The compose service of the current primary (members are named by their service, mongo1:27017). */
export async function primaryService (admin: MongoClient): Promise<string> {
  const hello = await admin.db('admin').command({ hello: 1 })
  return String(hello.primary).split(':')[0]!
}

/** Waits until a primary other than `old` (or any, when null) is elected; the time it took. */
export async function newPrimary (admin: MongoClient, old: string | null, ms = 60_000): Promise<number> {
  const start = Date.now()
  while (Date.now() - start < ms) {
    try {
      const p = await primaryService(admin)
      if (p !== 'undefined' && p !== old) return Date.now() - start
    } catch { /* no answer yet */ }
    await sleep(250)
  }
  throw new Error(`no new primary within ${ms} ms`)
}

export interface Cluster {
  readonly dbName: string
  readonly auth: string
  readonly workspaceId: string
  readonly nodes: Node[]
  /** A store of the test's own on the same database, to read what the nodes wrote. */
  readonly store: BatchingStore
  readonly admin: MongoClient
  /** Starts one more node (or again, after a kill). */
  startNode (env?: Record<string, string>): Promise<Node>
  close (): Promise<void>
}

/** Node settings for the suite: feeds rebuilt every second, polls every 100 ms. */
export const NODE_ENV = { THREATFEED_FEED_REBUILD_MS: '1000', THREATFEED_POLL_MS: '100' }

/** A fresh database with a workspace and a key, and `n` nodes on it started at once. */
export async function startCluster (t: Test, n: number, env: Record<string, string> = {}): Promise<Cluster> {
  const dbName = `threatfeed_rs_${process.pid}_${randomUUID().slice(0, 8)}`
  const admin = new MongoClient(RS_URI, { serverSelectionTimeoutMS: 30_000 })
  const store = await openStore({ kind: 'mongodb', uri: RS_URI, dbName })
  const key = generateApiKey()
  const ws = await store.workspaces.create({ name: 'rs', subscription: 'active' })
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
  const dirs: string[] = []
  const start = (more: Record<string, string> = {}): Promise<Node> => {
    const dir = mkdtempSync(join(tmpdir(), 'tf-rs-'))
    dirs.push(dir)
    return startNode(dir, { THREATFEED_STORE: 'mongodb', THREATFEED_MONGODB_URI: RS_URI, THREATFEED_MONGODB_DB: dbName, ...NODE_ENV, ...env, ...more })
  }
  const nodes = await Promise.all(Array.from({ length: n }, () => start()))
  const cluster: Cluster = {
    dbName, auth: `Bearer ${key}`, workspaceId: ws.id, nodes, store, admin,
    startNode: start,
    async close () {
      await Promise.all(cluster.nodes.map((node) => { node.child.kill('SIGCONT'); return stopNode(node, 'SIGKILL') }))
      await store.close()
      await admin.db(dbName).dropDatabase().catch(() => undefined)
      await admin.close()
      for (const d of dirs) rmSync(d, { recursive: true, force: true })
    },
  }
  t.teardown(() => cluster.close())
  return cluster
}

/** One v1 batch whose entries carry `marker` in their description, so the stream can be searched for it. */
export function markedBatch (marker: string, entries = 10, expiration?: number): unknown[] {
  return Array.from({ length: entries }, (_, i) => ({
    type: 'access_rules', action: 'block', ip: `10.${(i >> 8) & 255}.${i & 255}.${(marker.length + i) & 255}`, description: marker, ...(expiration === undefined ? {} : { expiration }),
  }))
}

/** How many stream records carry each marker (the whole stream, read from the test's store). */
export async function markersOnStream (store: BatchingStore): Promise<Map<string, number>> {
  const counts = new Map<string, number>()
  for (let from = 1; ;) {
    const records = await store.stream.read(from, 10_000)
    if (records.length === 0) return counts
    for (const r of records) {
      const m = /"description":"([^"]+)"/.exec(r.payload)?.[1]
      if (m !== undefined) counts.set(m, (counts.get(m) ?? 0) + 1)
    }
    from = records.at(-1)!.seq + 1
  }
}

export function postSignals (node: Node, auth: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number, json: unknown }> {
  return post(node.port, '/v1/signal', { authorization: auth, ...headers }, body)
}

/** The workspace feed of each node: status, ETag, Last-Modified and a digest of the bytes. */
export async function feedsOf (nodes: readonly Node[], auth: string): Promise<Array<{ status: number, etag?: string, lastModified?: string, digest: string }>> {
  return Promise.all(nodes.map(async (n) => {
    const a = await get(n.port, '/v1/threat/feeds?format=plain', { authorization: auth })
    return { status: a.status, etag: a.etag, lastModified: a.lastModified, digest: a.digest }
  }))
}

/** Polls until every node serves the same feed (200, one ETag, one Last-Modified, one body); the time it took, or -1. */
export async function untilFeedsAgree (nodes: readonly Node[], auth: string, ms: number): Promise<number> {
  const start = Date.now()
  while (Date.now() - start <= ms) {
    const f = await feedsOf(nodes, auth)
    if (f.every((x) => x.status === 200 && x.etag === f[0]!.etag && x.lastModified === f[0]!.lastModified && x.digest === f[0]!.digest)) return Date.now() - start
    await sleep(100)
  }
  return -1
}

export function sleep (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
