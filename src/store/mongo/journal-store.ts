/**
 * The admin API's journal on MongoDB (types.ts JournalStore): one collection, a document per
 * entry, read newest first through the (table, partition, at, id) index. A put is one unordered
 * bulk of replace-upserts, so an hourly feed sample written twice stays one document.
 */
import type { AnyBulkWriteOperation } from 'mongodb'
import { JOURNAL_TABLES, type JournalBounds, type JournalEntry, type JournalStore, type JournalTable } from '../types.js'
import type { JournalDoc } from './collections.js'
import type { MongoContext } from './mongo-context.js'
import { num, text } from './values.js'

const SEP = '\u001f'

function docId (table: JournalTable, partition: string, at: number, id: string): string {
  return [table, partition, String(at), id].join(SEP)
}

export class MongoJournalStore implements JournalStore {
  readonly #ctx: MongoContext

  constructor (ctx: MongoContext) {
    this.#ctx = ctx
  }

  put (entries: readonly JournalEntry[]): Promise<void> {
    return this.#ctx.run(async () => {
      if (entries.length === 0) return
      const ops: Array<AnyBulkWriteOperation<JournalDoc>> = entries.map((e) => {
        const doc: JournalDoc = { _id: docId(e.table, text(e.partition), num(e.at), text(e.id)), table: e.table, partition: e.partition, at: e.at, id: e.id, data: e.data }
        return { replaceOne: { filter: { _id: doc._id }, replacement: doc, upsert: true } }
      })
      await this.#ctx.c.journal.bulkWrite(ops, { ordered: false })
    })
  }

  page (table: JournalTable, partition: string, limit: number, before?: { at: number, id: string }): Promise<JournalEntry[]> {
    return this.#ctx.run(async () => {
      const filter: Record<string, unknown> = { table: text(table), partition: text(partition) }
      if (before !== undefined) {
        filter.$or = [{ at: { $lt: num(before.at) } }, { at: num(before.at), id: { $lt: text(before.id) } }]
      }
      const docs = await this.#ctx.c.journal.find(filter).sort({ at: -1, id: -1 }).limit(num(limit)).toArray()
      return docs.map((d) => ({ table: d.table, partition: d.partition, at: d.at, id: d.id, data: d.data }))
    })
  }

  sweep (now: number, bounds: Record<JournalTable, JournalBounds>, limit: number): Promise<{ removed: number, more: boolean }> {
    return this.#ctx.run(async () => {
      let removed = 0
      for (const table of JOURNAL_TABLES) {
        const { keepMs, maxPerPartition } = bounds[table]
        const aged = await this.#ctx.c.journal.deleteMany({ table, at: { $lt: num(now - keepMs) } })
        removed += aged.deletedCount
        // Partitions over their cap: drop everything older than their maxPerPartition-th newest.
        const over = await this.#ctx.c.journal.aggregate<{ _id: string }>([
          { $match: { table } },
          { $group: { _id: '$partition', n: { $sum: 1 } } },
          { $match: { n: { $gt: maxPerPartition } } },
          { $limit: Math.max(1, limit) },
        ]).toArray()
        for (const { _id: partition } of over) {
          const edge = await this.#ctx.c.journal.find({ table, partition }).sort({ at: -1, id: -1 }).skip(maxPerPartition).limit(1).next()
          if (edge === null) continue
          const r = await this.#ctx.c.journal.deleteMany({ table, partition, $or: [{ at: { $lt: edge.at } }, { at: edge.at, id: { $lte: edge.id } }] })
          removed += r.deletedCount
        }
      }
      return { removed, more: false }
    })
  }
}
