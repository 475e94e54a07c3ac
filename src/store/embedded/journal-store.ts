/**
 * The admin API's journal on LMDB (types.ts JournalStore): one database keyed by
 * [table, partition, at, id], so a partition read newest first is one reverse range scan and the
 * sweep walks each partition oldest first.
 */
import type { JournalBounds, JournalEntry, JournalStore, JournalTable } from '../types.js'
import { JOURNAL_TABLES } from '../types.js'
import type { JournalKey } from './layout.js'
import type { LmdbEnv } from './lmdb-env.js'

export class EmbeddedJournalStore implements JournalStore {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  async put (entries: readonly JournalEntry[]): Promise<void> {
    if (entries.length === 0) return
    await this.#env.write((dbs) => {
      for (const e of entries) dbs.journal.put([e.table, e.partition, e.at, e.id], e.data)
    })
  }

  async page (table: JournalTable, partition: string, limit: number, before?: { at: number, id: string }): Promise<JournalEntry[]> {
    this.#env.renew()
    const start: JournalKey | [JournalTable, string, number] = before === undefined ? [table, partition, Number.MAX_SAFE_INTEGER] : [table, partition, before.at, before.id]
    return this.#env.read((dbs) => {
      const out: JournalEntry[] = []
      for (const { key, value } of dbs.journal.getRange({ start: start as JournalKey, end: [table, partition] as unknown as JournalKey, reverse: true })) {
        const [, , at, id] = key
        // The range's start is inclusive: the cursor's own entry was on the previous page.
        if (before !== undefined && at === before.at && id === before.id) continue
        out.push({ table, partition, at, id, data: value })
        if (out.length >= limit) break
      }
      return out
    })
  }

  async sweep (now: number, bounds: Record<JournalTable, JournalBounds>, limit: number): Promise<{ removed: number, more: boolean }> {
    // Found with a read, removed in one write; an entry removed meanwhile by another process is
    // simply absent (remove of a missing key is a no-op).
    const due = this.#env.read((dbs) => {
      const keys: JournalKey[] = []
      for (const table of JOURNAL_TABLES) {
        const { keepMs, maxPerPartition } = bounds[table]
        const cut = now - keepMs
        // Counted from the newest: one reverse pass per table, partitions one after another.
        let partition: string | null = null
        let kept = 0
        for (const { key } of dbs.journal.getRange({ start: [table, '\uffff'] as unknown as JournalKey, end: [table] as unknown as JournalKey, reverse: true })) {
          if (key[1] !== partition) { partition = key[1]; kept = 0 }
          if (key[2] < cut || kept >= maxPerPartition) keys.push(key)
          else kept++
          if (keys.length > limit) return keys
        }
      }
      return keys
    })
    if (due.length === 0) return { removed: 0, more: false }
    const more = due.length > limit
    const batch = more ? due.slice(0, limit) : due
    await this.#env.write((dbs) => { for (const k of batch) dbs.journal.remove(k) })
    return { removed: batch.length, more }
  }
}
