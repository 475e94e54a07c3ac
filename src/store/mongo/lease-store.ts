/**
 * Leases on MongoDB (types.ts LeaseStore): one document per lease, taken or renewed by one
 * conditional pipeline update against the server's clock ($$NOW), so that nodes whose clocks
 * disagree still agree on when a lease lapses.
 */
import type { Lease, LeaseStore } from '../types.js'
import type { LeaseDoc } from './collections.js'
import { isDuplicateKey } from './mongo-client.js'
import type { MongoContext } from './mongo-context.js'
import { num, text } from './values.js'

/** The update pipeline of a claim: keeps a live lease of another owner, else takes it. */
export function claimPipeline (owner: string, ttlMs: number): object[] {
  const heldByAnother = { $and: [{ $gt: ['$expiresAt', '$$NOW'] }, { $ne: ['$owner', owner] }, { $ne: [{ $type: '$owner' }, 'missing'] }] }
  return [{
    $set: {
      owner: { $cond: [heldByAnother, '$owner', owner] },
      expiresAt: { $cond: [heldByAnother, '$expiresAt', { $add: ['$$NOW', ttlMs] }] },
    },
  }]
}

export class MongoLeaseStore implements LeaseStore {
  readonly #ctx: MongoContext

  constructor (ctx: MongoContext) {
    this.#ctx = ctx
  }

  claim (name: string, owner: string, ttlMs: number): Promise<Lease> {
    return this.#ctx.run(async () => {
      const update = claimPipeline(text(owner), num(ttlMs))
      // Two first claims at once both upsert: one inserts, the other's E11000 is retried once
      // and then finds the document.
      for (let attempt = 0; ; attempt++) {
        try {
          const doc = await this.#ctx.c.leases.findOneAndUpdate({ _id: text(name) }, update, { upsert: true, returnDocument: 'after' })
          if (doc === null) throw new Error(`lease ${name} vanished`)
          return toLease(doc)
        } catch (e) {
          if (!isDuplicateKey(e) || attempt > 0) throw e
        }
      }
    })
  }

  get (name: string): Promise<Lease | null> {
    return this.#ctx.run(async () => {
      const doc = await this.#ctx.c.leases.findOne({ _id: text(name) })
      return doc === null ? null : toLease(doc)
    })
  }

  release (name: string, owner: string): Promise<void> {
    return this.#ctx.run(async () => {
      await this.#ctx.c.leases.deleteOne({ _id: text(name), owner: text(owner) })
    })
  }
}

function toLease (d: LeaseDoc): Lease {
  return { owner: d.owner, expiresAt: d.expiresAt.getTime() }
}
