/**
 * Leases on LMDB (types.ts LeaseStore): one record per lease in the main environment's meta
 * database, under `lease:<name>`. Every process on the data directory is on this machine, so its
 * clock is the one clock the expiries are read against.
 */
import type { Database } from 'lmdb'
import type { Lease, LeaseStore } from '../types.js'
import type { LmdbEnv } from './lmdb-env.js'

const PREFIX = 'lease:'

/** The meta database holds counters, and these records beside them under their own prefix. */
function leases (meta: unknown): Database<Lease, string> {
  return meta as Database<Lease, string>
}

export class EmbeddedLeaseStore implements LeaseStore {
  readonly #env: LmdbEnv

  constructor (env: LmdbEnv) {
    this.#env = env
  }

  async claim (name: string, owner: string, ttlMs: number): Promise<Lease> {
    const id = PREFIX + name
    // A follower asks every second: answer a live lease of another from a read, without the
    // cross-process write lock and a flush.
    this.#env.renew()
    const seen = this.#env.read((dbs) => leases(dbs.meta).get(id))
    if (seen !== undefined && seen.owner !== owner && seen.expiresAt > Date.now()) return seen
    return this.#env.write((dbs) => {
      const now = Date.now()
      const current = leases(dbs.meta).get(id)
      if (current !== undefined && current.owner !== owner && current.expiresAt > now) return current
      const next: Lease = { owner, expiresAt: now + ttlMs }
      leases(dbs.meta).put(id, next)
      return next
    })
  }

  async release (name: string, owner: string): Promise<void> {
    const id = PREFIX + name
    await this.#env.write((dbs) => {
      if (leases(dbs.meta).get(id)?.owner === owner) leases(dbs.meta).remove(id)
    })
  }

  async get (name: string): Promise<Lease | null> {
    this.#env.renew()
    return this.#env.read((dbs) => leases(dbs.meta).get(PREFIX + name)) ?? null
  }
}
