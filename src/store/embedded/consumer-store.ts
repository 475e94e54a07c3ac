/**
 * Feed consumers (issue 20) on LMDB: one JSON record per consumer under `workspace␟id`, so a
 * workspace's consumers are one prefix scan (the key layout's separator and range rule, see
 * key-layout.ts). A flush merges every tally in one write transaction: LMDB's single writer
 * makes the read-merge-write of each record atomic across processes.
 */
import { mergeConsumer } from '../consumer-record.js'
import type { ConsumerStore, FeedConsumer } from '../types.js'
import type { LmdbEnv } from './lmdb-env.js'

const SEP = '\u001f'
/** The character after SEP: the exclusive end of a prefix range. */
const AFTER_SEP = ' '

function keyOf (c: { workspaceId: string, id: string }): string {
  return c.workspaceId + SEP + c.id
}

export class EmbeddedConsumerStore implements ConsumerStore {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  async merge (tallies: readonly FeedConsumer[]): Promise<void> {
    if (tallies.length === 0) return
    await this.#env.write((dbs) => {
      for (const t of tallies) {
        const key = keyOf(t)
        const stored: FeedConsumer | undefined = dbs.consumers.get(key)
        dbs.consumers.put(key, mergeConsumer(stored ?? null, t))
      }
    })
  }

  async list (workspaceId?: string): Promise<FeedConsumer[]> {
    this.#env.renew()
    const range = workspaceId === undefined ? {} : { start: workspaceId + SEP, end: workspaceId + AFTER_SEP }
    return this.#env.read((dbs) => Array.from(dbs.consumers.getRange(range), ({ value }) => value))
  }

  async forget (before: number): Promise<number> {
    // Found with a read, removed in a write that checks again: another process may have merged a
    // later poll meanwhile.
    const due = this.#env.read((dbs) => {
      const keys: string[] = []
      for (const { key, value } of dbs.consumers.getRange({})) if (value.lastSeen < before) keys.push(key)
      return keys
    })
    if (due.length === 0) return 0
    return this.#env.write((dbs) => {
      let removed = 0
      for (const key of due) {
        const c: FeedConsumer | undefined = dbs.consumers.get(key)
        if (c !== undefined && c.lastSeen < before) {
          dbs.consumers.remove(key)
          removed++
        }
      }
      return removed
    })
  }
}
