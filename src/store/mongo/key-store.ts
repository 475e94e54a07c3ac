/** API keys on MongoDB; {hash} is a unique index, so one hash can never name two keys. */
import { randomUUID } from 'node:crypto'
import type { ClientSession } from 'mongodb'
import { ThreatfeedError } from '../../errors.js'
import type { ApiKey, BouncerSetting, KeyStore, Scope } from '../types.js'
import { COUNTERS, type KeyDoc } from './collections.js'
import type { MongoContext } from './mongo-context.js'
import { text } from './values.js'

export class MongoKeyStore implements KeyStore {
  readonly #ctx: MongoContext

  constructor (ctx: MongoContext) {
    this.#ctx = ctx
  }

  async create (input: { workspaceId: string, hash: string, scopes: Scope[] }): Promise<ApiKey> {
    const doc: KeyDoc = {
      _id: randomUUID(),
      workspaceId: text(input.workspaceId),
      hash: text(input.hash),
      scopes: input.scopes.map((s) => text(s) as Scope),
      createdAt: Date.now(),
      revokedAt: null,
    }
    return this.#ctx.write(async (session) => {
      await requireLiveWorkspace(this.#ctx, doc.workspaceId, session)
      if (await this.#ctx.c.keys.findOne({ hash: doc.hash }, { session, projection: { _id: 1 } }) !== null) {
        throw new ThreatfeedError('TF_ERR_STORE_CONFLICT', ['an API key with this hash already exists'])
      }
      await this.#ctx.c.keys.insertOne(doc, { session })
      await this.#ctx.bump(COUNTERS.adminRevision, session)
      return toKey(doc)
    })
  }

  getByHash (hash: string): Promise<ApiKey | null> {
    return this.#ctx.run(async () => {
      const doc = await this.#ctx.c.keys.findOne({ hash: text(hash) })
      return doc === null ? null : toKey(doc)
    })
  }

  get (id: string): Promise<ApiKey | null> {
    return this.#ctx.run(async () => {
      const doc = await this.#ctx.c.keys.findOne({ _id: text(id) })
      return doc === null ? null : toKey(doc)
    })
  }

  revoke (id: string): Promise<boolean> {
    return this.#ctx.write(async (session) => {
      // revokedAt null in the filter: revoking twice keeps the first time and reports false.
      const res = await this.#ctx.c.keys.updateOne({ _id: text(id), revokedAt: null }, { $set: { revokedAt: Date.now() } }, { session })
      if (res.modifiedCount === 0) return false
      await this.#ctx.bump(COUNTERS.adminRevision, session)
      return true
    })
  }

  setBouncer (id: string, setting: BouncerSetting | null): Promise<ApiKey | null> {
    return this.#ctx.write(async (session) => {
      const update = setting === null
        ? { $unset: { bouncer: '' as const } }
        : { $set: { bouncer: { listId: setting.listId === null ? null : text(setting.listId), action: text(setting.action) as BouncerSetting['action'] } } }
      const res = await this.#ctx.c.keys.updateOne({ _id: text(id), revokedAt: null }, update, { session })
      if (res.matchedCount === 0) return null
      await this.#ctx.bump(COUNTERS.adminRevision, session)
      const doc = await this.#ctx.c.keys.findOne({ _id: text(id) }, { session })
      return doc === null ? null : toKey(doc)
    })
  }

  list (workspaceId?: string): Promise<ApiKey[]> {
    return this.#ctx.run(async () => {
      const filter = workspaceId === undefined ? {} : { workspaceId: text(workspaceId) }
      return (await this.#ctx.c.keys.find(filter).sort({ createdAt: 1, _id: 1 }).toArray()).map(toKey)
    })
  }
}

/** Keys and lists belong to a live workspace; checked inside the writing transaction. */
/**
 * Inside a transaction that creates something of a workspace (a key, a list): WRITES the live
 * workspace's document, so that a concurrent `workspace delete` — which writes it too — conflicts
 * with this transaction (one of them is retried and sees the other). A read alone does not
 * conflict under snapshot isolation: the key of a deleted workspace could be created (write skew).
 */
export async function requireLiveWorkspace (ctx: MongoContext, workspaceId: string, session: ClientSession): Promise<void> {
  const res = await ctx.c.workspaces.updateOne({ _id: workspaceId, deletedAt: null }, { $inc: { childWrites: 1 } }, { session })
  if (res.matchedCount === 0) throw new ThreatfeedError('TF_ERR_WORKSPACE_NOT_FOUND', [workspaceId])
}

function toKey (d: KeyDoc): ApiKey {
  const key: ApiKey = { id: d._id, workspaceId: d.workspaceId, hash: d.hash, scopes: [...d.scopes], createdAt: d.createdAt, revokedAt: d.revokedAt }
  if (d.bouncer !== undefined) key.bouncer = { listId: d.bouncer.listId, action: d.bouncer.action }
  return key
}
