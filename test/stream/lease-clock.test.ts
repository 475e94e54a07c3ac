/**
 * Issue 33, item 9: the applier lease timed on the node's wall clock. The server times the lease
 * itself ($$NOW, lease-store.ts); the holder's own deadline must be a duration from its claim,
 * and a wall clock stepped back (NTP, a VM resumed) must not stretch it: for the length of the
 * step the holder would keep applying while another node holds the lease.
 */
import t from 'tap'
import { ApplierLease } from '../../src/stream/applier-lease.js'
import type { Lease, LeaseStore } from '../../src/store/types.js'

t.test('a wall clock stepped back does not stretch the holder\'s turn', async (t) => {
  let reachable = true
  const store: LeaseStore = {
    async claim (_name: string, owner: string, ttlMs: number): Promise<Lease> {
      if (!reachable) throw new Error('store away')
      return { owner, expiresAt: Date.now() + ttlMs }
    },
    async get () { return null },
    async release () {},
  }
  const lease = new ApplierLease(store, 'rules', { ttlMs: 300, renewMs: 100 })
  t.equal(await lease.mayApply(), true, 'held after its claim')
  reachable = false // no renewal from here: the turn must end ttl - renew after the claim
  const realNow = Date.now
  const stepped = realNow() - 60_000
  const offset = stepped - realNow()
  Date.now = () => realNow() + offset // the wall clock jumps a minute back
  t.teardown(() => { Date.now = realNow })
  await new Promise((resolve) => setTimeout(resolve, 350))
  t.equal(await lease.mayApply(), false, 'the turn ended on time, whatever the wall clock says')
})
