/**
 * Feed consumers (issue 20) on LMDB: one JSON record per consumer under `workspace␟id`, so a
 * workspace's consumers are one prefix scan (the key layout's separator and range rule, see
 * key-layout.ts). A flush merges every tally in one write transaction: LMDB's single writer
 * makes the read-merge-write of each record atomic across processes. A workspace's drop counts
 * (issue 35) sit in the same table under `workspace␟drops`: ids are hex, so no consumer's key.
 */
import { addDrops, mergeConsumer, noDrops } from '../consumer-record.js'
import type { ConsumerDrops, ConsumerStore, FeedConsumer } from '../types.js'
import type { LmdbEnv } from './lmdb-env.js'

const SEP = '\u001f'
/** The character after SEP: the exclusive end of a prefix range. */
const AFTER_SEP = ' '
const DROPS = SEP + 'drops'

function keyOf (c: { workspaceId: string, id: string }): string {
  return c.workspaceId + SEP + c.id
}

const isDrops = (key: string): boolean => key.endsWith(DROPS)
const rangeOf = (workspaceId?: string): { start?: string, end?: string } => workspaceId === undefined ? {} : { start: workspaceId + SEP, end: workspaceId + AFTER_SEP }

/** The table's values: consumers, and each workspace's drop counts under its DROPS key. */
type Value = FeedConsumer | ConsumerDrops

export class EmbeddedConsumerStore implements ConsumerStore {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  async merge (tallies: readonly FeedConsumer[], drops?: ReadonlyMap<string, ConsumerDrops>): Promise<void> {
    if (tallies.length === 0 && (drops === undefined || drops.size === 0)) return
    await this.#env.write((dbs) => {
      for (const t of tallies) {
        const key = keyOf(t)
        const stored: FeedConsumer | undefined = dbs.consumers.get(key)
        dbs.consumers.put(key, mergeConsumer(stored ?? null, t))
      }
      if (drops !== undefined) for (const [ws, d] of drops) addStoredDrops(this.#table(dbs), ws, d)
    })
  }

  async list (workspaceId?: string): Promise<FeedConsumer[]> {
    this.#env.renew()
    return this.#env.read((dbs) => {
      const out: FeedConsumer[] = []
      for (const { key, value } of dbs.consumers.getRange(rangeOf(workspaceId))) if (!isDrops(key)) out.push(value)
      return out
    })
  }

  async trim (workspaceId: string, keyId: string, keep: number): Promise<number> {
    return this.#env.write((dbs) => {
      // The workspace's records, not the key's: the key layout has no key id; a workspace holds
      // at most its keys times the bound.
      const own: Array<{ key: string, lastSeen: number }> = []
      for (const { key, value } of dbs.consumers.getRange(rangeOf(workspaceId))) {
        if (!isDrops(key) && value.keyId === keyId) own.push({ key, lastSeen: value.lastSeen })
      }
      if (own.length <= keep) return 0
      own.sort((a, b) => b.lastSeen - a.lastSeen)
      const gone = own.slice(keep)
      for (const { key } of gone) dbs.consumers.remove(key)
      addStoredDrops(this.#table(dbs), workspaceId, { evicted: 0, refused: 0, removed: gone.length })
      return gone.length
    })
  }

  async drops (workspaceId?: string): Promise<ConsumerDrops> {
    this.#env.renew()
    return this.#env.read((dbs) => {
      const sum = noDrops()
      const table = this.#table(dbs)
      if (workspaceId !== undefined) return addDrops(sum, table.get(workspaceId + DROPS) as ConsumerDrops | undefined ?? noDrops())
      for (const { key, value } of table.getRange({})) if (isDrops(key)) addDrops(sum, value as ConsumerDrops)
      return sum
    })
  }

  /** The table as it is: consumers and drop counts. */
  #table (dbs: { consumers: unknown }): DropsTable {
    return dbs.consumers as DropsTable
  }

  async forget (before: number): Promise<number> {
    // Found with a read, removed in a write that checks again: another process may have merged a
    // later poll meanwhile.
    const due = this.#env.read((dbs) => {
      const keys: string[] = []
      for (const { key, value } of dbs.consumers.getRange({})) if (!isDrops(key) && value.lastSeen < before) keys.push(key)
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

interface DropsTable {
  get (key: string): Value | undefined
  put (key: string, value: Value): unknown
  getRange (range: { start?: string, end?: string }): Iterable<{ key: string, value: Value }>
}

/** Adds `d` to a workspace's stored drop counts (inside a write transaction). */
function addStoredDrops (table: DropsTable, workspaceId: string, d: Readonly<ConsumerDrops>): void {
  const key = workspaceId + DROPS
  table.put(key, addDrops(addDrops(noDrops(), table.get(key) as ConsumerDrops | undefined ?? noDrops()), d))
}
