/** Workspaces on MongoDB. Each change and its admin-revision bump commit in one transaction. */
import { randomUUID } from 'node:crypto'
import type { Subscription, Workspace, WorkspaceStore, GuardSettings } from '../types.js'
import { copyGuards } from '../guard-settings.js'
import { COUNTERS, type WorkspaceDoc } from './collections.js'
import type { MongoContext } from './mongo-context.js'
import { text } from './values.js'

const BY_CREATION = { createdAt: 1, _id: 1 } as const

export class MongoWorkspaceStore implements WorkspaceStore {
  readonly #ctx: MongoContext

  constructor (ctx: MongoContext) {
    this.#ctx = ctx
  }

  async create (input: { name: string, subscription: Subscription }): Promise<Workspace> {
    const doc: WorkspaceDoc = { _id: randomUUID(), name: text(input.name), subscription: text(input.subscription) as Subscription, createdAt: Date.now(), deletedAt: null }
    return this.#ctx.write(async (session) => {
      await this.#ctx.c.workspaces.insertOne(doc, { session })
      await this.#ctx.bump(COUNTERS.adminRevision, session)
      return toWorkspace(doc)
    })
  }

  get (id: string): Promise<Workspace | null> {
    return this.#ctx.run(async () => {
      const doc = await this.#ctx.c.workspaces.findOne({ _id: text(id) })
      return doc === null ? null : toWorkspace(doc)
    })
  }

  async update (id: string, patch: { name?: string, subscription?: Subscription, feedGuards?: GuardSettings | null }): Promise<Workspace | null> {
    const set: Partial<WorkspaceDoc> = {}
    if (patch.name !== undefined) set.name = text(patch.name)
    if (patch.subscription !== undefined) set.subscription = text(patch.subscription) as Subscription
    if (patch.feedGuards !== undefined && patch.feedGuards !== null) set.feedGuards = copyGuards(patch.feedGuards)
    const unset = patch.feedGuards === null ? { $unset: { feedGuards: '' as const } } : {}
    return this.#ctx.write(async (session) => {
      // Only a live workspace is updated: deletedAt null is part of the filter.
      const filter = { _id: text(id), deletedAt: null }
      const doc = Object.keys(set).length === 0 && patch.feedGuards !== null
        ? await this.#ctx.c.workspaces.findOne(filter, { session })
        : await this.#ctx.c.workspaces.findOneAndUpdate(filter, { ...(Object.keys(set).length > 0 ? { $set: set } : {}), ...unset }, { session, returnDocument: 'after' })
      if (doc === null) return null
      await this.#ctx.bump(COUNTERS.adminRevision, session)
      return toWorkspace(doc)
    })
  }

  delete (id: string): Promise<boolean> {
    return this.#ctx.write(async (session) => {
      const res = await this.#ctx.c.workspaces.updateOne({ _id: text(id), deletedAt: null }, { $set: { deletedAt: Date.now() } }, { session })
      if (res.modifiedCount === 0) return false
      await this.#ctx.bump(COUNTERS.adminRevision, session)
      return true
    })
  }

  list (): Promise<Workspace[]> {
    return this.#ctx.run(async () => (await this.#ctx.c.workspaces.find({}).sort(BY_CREATION).toArray()).map(toWorkspace))
  }
}

function toWorkspace (d: WorkspaceDoc): Workspace {
  const w: Workspace = { id: d._id, name: d.name, subscription: d.subscription, createdAt: d.createdAt, deletedAt: d.deletedAt }
  if (d.feedGuards !== undefined) w.feedGuards = copyGuards(d.feedGuards)
  return w
}
