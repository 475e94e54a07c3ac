/** Access-rule lists on MongoDB; {workspaceId, name} serves both listing and lookup by name. */
import { randomUUID } from 'node:crypto'
import type { AccessList, ListDefaults, ListStore, PublishState } from '../types.js'
import { copyGuards, copyPublishState } from '../guard-settings.js'
import { COUNTERS, type ListDoc } from './collections.js'
import { requireLiveWorkspace } from './key-store.js'
import type { MongoContext } from './mongo-context.js'
import { fromPairs, num, text, toPairs } from './values.js'

type ListInput = Omit<AccessList, 'id' | 'createdAt' | 'updatedAt'>
type ListPatch = Partial<Omit<AccessList, 'id' | 'workspaceId' | 'createdAt' | 'updatedAt'>>

const BY_CREATION = { createdAt: 1, _id: 1 } as const

export class MongoListStore implements ListStore {
  readonly #ctx: MongoContext

  constructor (ctx: MongoContext) {
    this.#ctx = ctx
  }

  async create (input: ListInput): Promise<AccessList> {
    const now = Date.now()
    const doc: ListDoc = {
      _id: randomUUID(),
      workspaceId: text(input.workspaceId),
      name: text(input.name),
      description: text(input.description),
      defaults: copyDefaults(input.defaults),
      selector: toPairs(input.selector).map((p) => ({ k: p.k, v: text(p.v) })),
      createdAt: now,
      updatedAt: now,
    }
    return this.#ctx.write(async (session) => {
      await requireLiveWorkspace(this.#ctx, doc.workspaceId, session)
      await this.#ctx.c.lists.insertOne(doc, { session })
      await this.#ctx.bump(COUNTERS.adminRevision, session)
      return toList(doc)
    })
  }

  get (id: string): Promise<AccessList | null> {
    return this.#ctx.run(async () => {
      const doc = await this.#ctx.c.lists.findOne({ _id: text(id) })
      return doc === null ? null : toList(doc)
    })
  }

  async update (id: string, patch: ListPatch): Promise<AccessList | null> {
    const set: Partial<ListDoc> = { updatedAt: Date.now() }
    if (patch.name !== undefined) set.name = text(patch.name)
    if (patch.description !== undefined) set.description = text(patch.description)
    // A patch replaces the defaults or the selector as a whole: the CLI sends what it means.
    if (patch.defaults !== undefined) set.defaults = copyDefaults(patch.defaults)
    if (patch.selector !== undefined) set.selector = toPairs(patch.selector).map((p) => ({ k: p.k, v: text(p.v) }))
    return this.#ctx.write(async (session) => {
      const doc = await this.#ctx.c.lists.findOneAndUpdate({ _id: text(id) }, { $set: set }, { session, returnDocument: 'after' })
      if (doc === null) return null
      await this.#ctx.bump(COUNTERS.adminRevision, session)
      return toList(doc)
    })
  }

  setPublishState (id: string, state: PublishState): Promise<boolean> {
    return this.#ctx.write(async (session) => {
      const res = await this.#ctx.c.lists.updateOne({ _id: text(id) }, { $set: { publishState: copyPublishState(state) } }, { session })
      return res.matchedCount > 0
    })
  }

  delete (id: string): Promise<boolean> {
    return this.#ctx.write(async (session) => {
      const res = await this.#ctx.c.lists.deleteOne({ _id: text(id) }, { session })
      if (res.deletedCount === 0) return false
      await this.#ctx.bump(COUNTERS.adminRevision, session)
      return true
    })
  }

  list (workspaceId?: string): Promise<AccessList[]> {
    return this.#ctx.run(async () => {
      const filter = workspaceId === undefined ? {} : { workspaceId: text(workspaceId) }
      return (await this.#ctx.c.lists.find(filter).sort(BY_CREATION).toArray()).map(toList)
    })
  }

  findByName (workspaceId: string, name: string): Promise<AccessList[]> {
    return this.#ctx.run(async () => {
      const docs = await this.#ctx.c.lists.find({ workspaceId: text(workspaceId), name: text(name) }).sort(BY_CREATION).toArray()
      return docs.map(toList)
    })
  }
}

/** Known fields only, each a plain value: nothing else of the caller's object is stored. */
function copyDefaults (d: ListDefaults): ListDefaults {
  const out: ListDefaults = {}
  if (d.format !== undefined) out.format = text(d.format) as ListDefaults['format']
  if (d.family !== undefined) out.family = text(d.family) as ListDefaults['family']
  if (d.action !== undefined) out.action = text(d.action) as ListDefaults['action']
  if (d.maxEntries !== undefined) out.maxEntries = num(d.maxEntries)
  if (d.confidence !== undefined) out.confidence = text(d.confidence) as ListDefaults['confidence']
  if (d.severity !== undefined) out.severity = text(d.severity) as ListDefaults['severity']
  if (d.shards !== undefined) out.shards = num(d.shards)
  if (d.guards !== undefined) out.guards = copyGuards(d.guards)
  return out
}

function toList (d: ListDoc): AccessList {
  return {
    id: d._id,
    workspaceId: d.workspaceId,
    name: d.name,
    description: d.description,
    defaults: { ...d.defaults },
    selector: fromPairs(d.selector),
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    ...(d.publishState !== undefined ? { publishState: copyPublishState(d.publishState) } : {}),
  }
}
