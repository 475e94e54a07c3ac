/** Store contract, feed consumers (issue 20): merge, list, forget, on every store. */
import { randomUUID } from 'node:crypto'
import { consumerId, emptyTally, mergeConsumer } from '../../src/store/consumer-record.js'
import type { FeedConsumer } from '../../src/store/types.js'
import type { StoreTest } from './contract.js'

/** A tally of one consumer with overridable fields. */
export function consumerTally (workspaceId: string, over: Partial<FeedConsumer> = {}): FeedConsumer {
  const identity = { workspaceId, keyId: 'k1', address: '192.0.2.7', userAgent: 'PAN-OS/10.2', client: '', listId: '*', variant: 'plain|v4|block|', ...over }
  return {
    id: consumerId(identity),
    family: 'v4',
    action: 'block',
    ...identity,
    ...emptyTally(1000),
    ...over,
  }
}

const byId = (a: FeedConsumer, b: FeedConsumer): number => a.id < b.id ? -1 : 1

export function describeConsumerContract (test: StoreTest): void {
  test('consumers: merge creates a record, and merging again adds to it field by field', async (t, store) => {
    const ws = randomUUID()
    const a = consumerTally(ws, {
      polls: 3, ok: 1, notModified: 2, firstSeen: 1000, lastSeen: 3000, last: { at: 3000, status: 304 },
      last200At: 1000, held: { at: 3000, etag: '"plain.v4.block.identity.aa"', since: 900_000 }, intervals: { 4: 2 },
    })
    await store.consumers.merge([a])
    t.same(await store.consumers.list(ws), [a], 'stored as given')
    // Another process's view: earlier first poll, later last poll, a 4xx and a newer version.
    const b = consumerTally(ws, {
      polls: 4, ok: 1, clientErrors: 3, firstSeen: 500, lastSeen: 9000, last: { at: 9000, status: 404 },
      last200At: 2000, held: { at: 5000, etag: '"plain.v4.block.identity.bb"', since: 950_000 },
      recentFails: [9000, 8000, 7000], intervals: { 4: 1, 7: 2 },
    })
    const c = consumerTally(ws, { polls: 1, serverErrors: 1, firstSeen: 6000, lastSeen: 6000, last: { at: 6000, status: 500 }, recentFails: [] })
    await store.consumers.merge([b, c].map((x) => ({ ...x })))
    const expected: FeedConsumer = {
      ...a,
      polls: 8, ok: 2, notModified: 2, clientErrors: 3, serverErrors: 1,
      firstSeen: 500, lastSeen: 9000, last: { at: 9000, status: 404 }, last200At: 2000,
      held: { at: 5000, etag: '"plain.v4.block.identity.bb"', since: 950_000 },
      recentFails: [9000, 8000, 7000], intervals: { 4: 3, 7: 2 },
    }
    t.same(await store.consumers.list(ws), [expected])
    t.same(mergeConsumer(mergeConsumer(mergeConsumer(null, c), b), a), expected, 'the merge does not depend on the order')
    // A fourth 4xx keeps the three most recent.
    await store.consumers.merge([consumerTally(ws, { polls: 1, clientErrors: 1, firstSeen: 8500, lastSeen: 8500, last: { at: 8500, status: 400 }, recentFails: [8500] })])
    const [after] = await store.consumers.list(ws)
    t.same(after?.recentFails, [9000, 8500, 8000])
    t.same(after?.last, { at: 9000, status: 404 }, 'an earlier poll does not replace the last status')
  })

  test('consumers: list by workspace, or all; forget removes those last seen before a time', async (t, store) => {
    const ws1 = randomUUID()
    const ws2 = randomUUID()
    const old = consumerTally(ws1, { userAgent: 'old', lastSeen: 1000, last: { at: 1000, status: 200 } })
    const recent = consumerTally(ws1, { userAgent: 'recent', lastSeen: 5000, last: { at: 5000, status: 200 } })
    const other = consumerTally(ws2, { address: '2001:db8::7', lastSeen: 2000, last: { at: 2000, status: 304 } })
    t.not(old.id, recent.id, 'the User-Agent is part of the identity')
    await store.consumers.merge([old, recent, other])
    t.same((await store.consumers.list(ws1)).sort(byId), [old, recent].sort(byId))
    t.same(await store.consumers.list(ws2), [other])
    t.same((await store.consumers.list()).sort(byId), [old, recent, other].sort(byId))
    t.equal(await store.consumers.forget(2001), 2)
    t.same(await store.consumers.list(), [recent])
    t.equal(await store.consumers.forget(2001), 0)
    await store.consumers.merge([])
    t.same(await store.consumers.list(), [recent], 'an empty merge changes nothing')
  })

  test('consumers: trim keeps a key\'s most recently seen and counts the rest as removed; drops add up per workspace', async (t, store) => {
    const ws = randomUUID()
    const other = randomUUID()
    const mine = Array.from({ length: 5 }, (_, i) => consumerTally(ws, { userAgent: `ua-${i}`, lastSeen: 1000 + i, last: { at: 1000 + i, status: 200 } }))
    const otherKey = consumerTally(ws, { keyId: 'k2', lastSeen: 1, last: { at: 1, status: 200 } })
    await store.consumers.merge([...mine, otherKey, consumerTally(other)])
    t.equal(await store.consumers.trim(ws, 'k1', 2), 3)
    t.same((await store.consumers.list(ws)).map((c) => c.userAgent).sort(), ['PAN-OS/10.2', 'ua-3', 'ua-4'], 'the two most recently seen of k1, and k2 untouched')
    t.equal(await store.consumers.trim(ws, 'k1', 2), 0, 'within the bound: nothing')
    t.same(await store.consumers.drops(ws), { evicted: 0, refused: 0, removed: 3 })
    await store.consumers.merge([], new Map([[ws, { evicted: 4, refused: 1, removed: 0 }], [other, { evicted: 2, refused: 0, removed: 0 }]]))
    t.same(await store.consumers.drops(ws), { evicted: 4, refused: 1, removed: 3 })
    t.same(await store.consumers.drops(other), { evicted: 2, refused: 0, removed: 0 })
    const all = await store.consumers.drops()
    t.ok(all.evicted >= 6 && all.removed >= 3, 'summed over every workspace')
    t.equal((await store.consumers.list(ws)).length, 3, 'the counts are not consumers')
    t.equal(await store.consumers.forget(Number.MAX_SAFE_INTEGER) >= 4, true)
    t.same(await store.consumers.drops(ws), { evicted: 4, refused: 1, removed: 3 }, 'forget leaves the counts')
  })
}
