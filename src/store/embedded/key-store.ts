/**
 * API keys on LMDB: the key record by id plus a hash → id index, written in one transaction so
 * the index never points at a missing key nor misses one.
 */
import { randomUUID } from 'node:crypto'
import { ThreatfeedError } from '../../errors.js'
import type { ApiKey, BouncerSetting, KeyStore, Scope } from '../types.js'
import { META } from './layout.js'
import type { LmdbEnv } from './lmdb-env.js'
import { byCreation } from './sort.js'

export class EmbeddedKeyStore implements KeyStore {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  create (input: { workspaceId: string, hash: string, scopes: Scope[] }): Promise<ApiKey> {
    const key: ApiKey = {
      id: randomUUID(),
      workspaceId: input.workspaceId,
      hash: input.hash,
      scopes: [...input.scopes],
      createdAt: Date.now(),
      revokedAt: null,
    }
    return this.#env.write((dbs) => {
      const workspace = dbs.workspaces.get(key.workspaceId)
      if (workspace === undefined || workspace.deletedAt !== null) {
        throw new ThreatfeedError('TF_ERR_WORKSPACE_NOT_FOUND', [key.workspaceId])
      }
      // Two keys with one hash would make authentication ambiguous; with 128-bit random keys
      // this only happens when a caller stores the same key twice.
      if (dbs.keysByHash.get(key.hash) !== undefined) {
        throw new ThreatfeedError('TF_ERR_STORE_CONFLICT', ['an API key with this hash already exists'])
      }
      dbs.keys.put(key.id, key)
      dbs.keysByHash.put(key.hash, key.id)
      this.#env.bump(META.adminRevision)
      return key
    })
  }

  async getByHash (hash: string): Promise<ApiKey | null> {
    return this.#env.read((dbs) => {
      const id = dbs.keysByHash.get(hash)
      return id === undefined ? null : dbs.keys.get(id) ?? null
    })
  }

  async get (id: string): Promise<ApiKey | null> {
    return this.#env.read((dbs) => dbs.keys.get(id) ?? null)
  }

  revoke (id: string): Promise<boolean> {
    return this.#env.write((dbs) => {
      const current = dbs.keys.get(id)
      // Revoking twice changes nothing and keeps the first revocation time.
      if (current === undefined || current.revokedAt !== null) return false
      dbs.keys.put(id, { ...current, revokedAt: Date.now() })
      this.#env.bump(META.adminRevision)
      return true
    })
  }

  setBouncer (id: string, setting: BouncerSetting | null): Promise<ApiKey | null> {
    return this.#env.write((dbs) => {
      const current = dbs.keys.get(id)
      if (current === undefined || current.revokedAt !== null) return null
      const { bouncer: _old, ...rest } = current
      const next: ApiKey = setting === null ? rest : { ...rest, bouncer: { listId: setting.listId, action: setting.action } }
      dbs.keys.put(id, next)
      this.#env.bump(META.adminRevision)
      return next
    })
  }

  async list (workspaceId?: string): Promise<ApiKey[]> {
    // Keys number in the dozens per workspace and are listed only by the CLI: a scan is cheaper
    // than keeping a third index consistent.
    return this.#env.read((dbs) => {
      const keys: ApiKey[] = []
      for (const { value } of dbs.keys.getRange({})) {
        if (workspaceId === undefined || value.workspaceId === workspaceId) keys.push(value)
      }
      return keys.sort(byCreation)
    })
  }
}
