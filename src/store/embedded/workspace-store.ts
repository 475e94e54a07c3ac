/** Workspaces on LMDB. Every change raises the admin revision in the same transaction. */
import { randomUUID } from 'node:crypto'
import type { Subscription, Workspace, WorkspaceStore, GuardSettings } from '../types.js'
import { copyGuards } from '../guard-settings.js'
import { META } from './layout.js'
import type { LmdbEnv } from './lmdb-env.js'
import { byCreation } from './sort.js'

export class EmbeddedWorkspaceStore implements WorkspaceStore {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  create (input: { name: string, subscription: Subscription }): Promise<Workspace> {
    const workspace: Workspace = {
      id: randomUUID(),
      name: input.name,
      subscription: input.subscription,
      createdAt: Date.now(),
      deletedAt: null,
    }
    return this.#env.write((dbs) => {
      dbs.workspaces.put(workspace.id, workspace)
      this.#env.bump(META.adminRevision)
      return workspace
    })
  }

  async get (id: string): Promise<Workspace | null> {
    return this.#env.read((dbs) => dbs.workspaces.get(id) ?? null)
  }

  update (id: string, patch: { name?: string, subscription?: Subscription, feedGuards?: GuardSettings | null }): Promise<Workspace | null> {
    return this.#env.write((dbs) => {
      const current = dbs.workspaces.get(id)
      // A deleted workspace stays deleted: updating it would suggest its keys work again.
      if (current === undefined || current.deletedAt !== null) return null
      const next: Workspace = {
        ...current,
        name: patch.name ?? current.name,
        subscription: patch.subscription ?? current.subscription,
      }
      if (patch.feedGuards === null) delete next.feedGuards
      else if (patch.feedGuards !== undefined) next.feedGuards = copyGuards(patch.feedGuards)
      dbs.workspaces.put(id, next)
      this.#env.bump(META.adminRevision)
      return next
    })
  }

  delete (id: string): Promise<boolean> {
    return this.#env.write((dbs) => {
      const current = dbs.workspaces.get(id)
      if (current === undefined || current.deletedAt !== null) return false
      dbs.workspaces.put(id, { ...current, deletedAt: Date.now() })
      this.#env.bump(META.adminRevision)
      return true
    })
  }

  async list (): Promise<Workspace[]> {
    return this.#env.read((dbs) => Array.from(dbs.workspaces.getRange({}), (e) => e.value).sort(byCreation))
  }
}
