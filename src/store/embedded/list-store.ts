/**
 * Access-rule lists on LMDB: the record by id plus a (workspace, name, id) index that serves
 * both "lists of a workspace" and "lists with this name" as one prefix scan each.
 */
import { randomUUID } from 'node:crypto'
import { ThreatfeedError } from '../../errors.js'
import type { AccessList, ListDefaults, ListStore, PublishState } from '../types.js'
import { copyGuards, copyPublishState } from '../guard-settings.js'
import { listNameKey, listNameRange, workspaceRange, type KeyRange } from './key-layout.js'
import { META, type Databases } from './layout.js'
import type { LmdbEnv } from './lmdb-env.js'
import { byCreation } from './sort.js'

type ListInput = Omit<AccessList, 'id' | 'createdAt' | 'updatedAt'>
type ListPatch = Partial<Omit<AccessList, 'id' | 'workspaceId' | 'createdAt' | 'updatedAt'>>

export class EmbeddedListStore implements ListStore {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  create (input: ListInput): Promise<AccessList> {
    const now = Date.now()
    const list: AccessList = {
      id: randomUUID(),
      workspaceId: input.workspaceId,
      name: input.name,
      description: input.description,
      defaults: copyDefaults(input.defaults),
      selector: copySelector(input.selector),
      createdAt: now,
      updatedAt: now,
    }
    return this.#env.write((dbs) => {
      const workspace = dbs.workspaces.get(list.workspaceId)
      if (workspace === undefined || workspace.deletedAt !== null) {
        throw new ThreatfeedError('TF_ERR_WORKSPACE_NOT_FOUND', [list.workspaceId])
      }
      dbs.lists.put(list.id, list)
      dbs.listsByName.put(listNameKey(list.workspaceId, list.name, list.id), list.id)
      this.#env.bump(META.adminRevision)
      return list
    })
  }

  async get (id: string): Promise<AccessList | null> {
    return this.#env.read((dbs) => dbs.lists.get(id) ?? null)
  }

  update (id: string, patch: ListPatch): Promise<AccessList | null> {
    return this.#env.write((dbs) => {
      const current = dbs.lists.get(id)
      if (current === undefined) return null
      const next: AccessList = {
        ...current,
        name: patch.name ?? current.name,
        description: patch.description ?? current.description,
        // A patch replaces the defaults or the selector as a whole: the CLI sends what it means.
        defaults: patch.defaults === undefined ? current.defaults : copyDefaults(patch.defaults),
        selector: patch.selector === undefined ? current.selector : copySelector(patch.selector),
        updatedAt: Date.now(),
      }
      if (next.name !== current.name) {
        dbs.listsByName.remove(listNameKey(current.workspaceId, current.name, id))
        dbs.listsByName.put(listNameKey(next.workspaceId, next.name, id), id)
      }
      dbs.lists.put(id, next)
      this.#env.bump(META.adminRevision)
      return next
    })
  }

  setPublishState (id: string, state: PublishState): Promise<boolean> {
    return this.#env.write((dbs) => {
      const current = dbs.lists.get(id)
      if (current === undefined) return false
      dbs.lists.put(id, { ...current, publishState: copyPublishState(state) })
      return true
    })
  }

  delete (id: string): Promise<boolean> {
    return this.#env.write((dbs) => {
      const current = dbs.lists.get(id)
      if (current === undefined) return false
      dbs.lists.remove(id)
      dbs.listsByName.remove(listNameKey(current.workspaceId, current.name, id))
      this.#env.bump(META.adminRevision)
      return true
    })
  }

  async list (workspaceId?: string): Promise<AccessList[]> {
    return this.#env.read((dbs) => {
      if (workspaceId !== undefined) return listsIn(dbs, workspaceRange(workspaceId), () => true)
      return Array.from(dbs.lists.getRange({}), (e) => e.value).sort(byCreation)
    })
  }

  async findByName (workspaceId: string, name: string): Promise<AccessList[]> {
    return this.#env.read((dbs) => listsIn(dbs, listNameRange(workspaceId, name), (l) => l.name === name))
  }
}

function listsIn (dbs: Databases, range: KeyRange, keep: (list: AccessList) => boolean): AccessList[] {
  const lists: AccessList[] = []
  for (const id of dbs.listsByName.getRange(range).map((e) => e.value)) {
    const list = dbs.lists.get(id)
    if (list !== undefined && keep(list)) lists.push(list)
  }
  return lists.sort(byCreation)
}

/** Known fields only: the stored record never carries whatever else the caller's object held. */
export function copyDefaults (d: ListDefaults): ListDefaults {
  const out: ListDefaults = {}
  if (d.format !== undefined) out.format = d.format
  if (d.family !== undefined) out.family = d.family
  if (d.action !== undefined) out.action = d.action
  if (d.maxEntries !== undefined) out.maxEntries = d.maxEntries
  if (d.confidence !== undefined) out.confidence = d.confidence
  if (d.severity !== undefined) out.severity = d.severity
  if (d.shards !== undefined) out.shards = d.shards
  if (d.guards !== undefined) out.guards = copyGuards(d.guards)
  return out
}

/** Object.fromEntries defines own properties, so even a `__proto__` key stays plain data. */
export function copySelector (s: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(s).map(([k, v]) => [k, String(v)]))
}
